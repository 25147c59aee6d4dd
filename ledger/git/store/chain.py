"""``refs/pi-rewind/store``: the keepalive chain that keeps snapshot commits reachable.

Why it exists: snapshot commits have no parents and no branch; without a ref, ``git gc`` would
prune them. The reference extension keeps them alive with a first-parent chain of *keepalive*
commits: empty tree, parents ``[previous head, snapshot]`` (only ``[snapshot]`` for the first),
message ``pi rewind store`` (docs/formats.md#the-store-ref, docs/formats.md#the-keepalive-chain).
Several processes share the ref.

Invariants:
- The only ref this package writes. Updates are compare-and-swap (``git update-ref <new> <old>``,
  the zero SHA when the ref must not exist yet), retried with jitter at least
  :data:`DEFAULT_ATTEMPTS` times *and* for at least :data:`DEFAULT_PATIENCE_S` seconds; every
  attempt builds a new keepalive on the head it just read, so a concurrent append is never lost.
  Exhausted retries raise :class:`~ledger.errors.StoreUpdateError`.
- No reflog is written for the ref and no hook runs.
- pygit2 builds the objects and reads the chain. The swap is git's lock-file protocol done
  in-process (:mod:`ledger.git.store.refswap`, the same ``store.lock`` git takes); any layout it does
  not fully understand is left to ``git update-ref`` itself.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pygit2

from ledger.errors import GitError, LockTimeoutError, StoreUpdateError
from ledger.git.repo import GitRepo
from ledger.git.runner import EMPTY_TREE, ZERO_SHA, GitRunner
from ledger.git.store.refswap import RefLock, SwapOutcome, ref_lock, remove_if_gone, swap_loose_ref
from ledger.plain import FrozenPlain

if TYPE_CHECKING:
    import random  # loaded on a retry only: ~1 ms of every process (issue 34)

_T = TypeVar("_T")

STORE_REF = "refs/pi-rewind/store"
KEEPALIVE_MESSAGE = "pi rewind store"
SNAPSHOT_SUBJECT = "pi rewind snapshot"
DEFAULT_ATTEMPTS = 25
DEFAULT_PATIENCE_S = 3.0
"""A swap keeps retrying for at least this long. An attempt is lost only when another writer
swapped in between (progress for someone), so giving up early costs a user a snapshot (a prompt
without its point) to save a few seconds: 25 attempts alone last ~1 s, which one busy writer
(a sweep rewriting the chain, many sessions capturing at once on a loaded machine) can outlast.
Bounded all the same: a writer stopped (``SIGSTOP``) while holding the lock makes the others wait
this long, then fail with its pid named; a stale lock not of rewind's ends the retries at once
(:meth:`Store._clear_or_raise`)."""


class Identity(FrozenPlain):
    """Author/committer for snapshot and keepalive commits."""

    __slots__ = ("email", "fallback", "name")
    name: str
    email: str
    fallback: bool
    """True when git had no identity and the fixed one was used (D16)."""

    def __init__(self, name: str, email: str, fallback: bool = False) -> None:
        self._init(name=name, email=email, fallback=fallback)

    def signature(self, when_s: int, offset_min: int) -> pygit2.Signature:
        return pygit2.Signature(self.name, self.email, when_s, offset_min)


FALLBACK_IDENTITY = Identity("pi-rewind", "pi-rewind@localhost", fallback=True)
"""Who a snapshot commit names when git knows no committer (no user.name/user.email)."""


def git_identity(repo: GitRepo) -> Identity:
    """The committer identity git would use (config and ``GIT_COMMITTER_*``), else the
    fallback identity."""
    runner = GitRunner(repo.root, repo.git_dir)
    result = runner.run(["var", "GIT_COMMITTER_IDENT"], operation="git var", check=False)
    text = result.text.strip()
    if result.returncode != 0 or "<" not in text or ">" not in text:
        return FALLBACK_IDENTITY
    name = text[: text.index("<")].strip()
    email = text[text.index("<") + 1 : text.rindex(">")].strip()
    if not name or not email:
        return FALLBACK_IDENTITY
    return Identity(name, email)


def offset_minutes(when_s: int) -> int:
    """The local time zone's offset from UTC at ``when_s``, in minutes (a signature's offset)."""
    return int(time.localtime(when_s).tm_gmtoff // 60)


def is_keepalive(commit: pygit2.Commit) -> bool:
    """A keepalive of the chain: the empty tree and the message ``pi rewind store``."""
    return str(commit.tree_id) == EMPTY_TREE and commit.message.strip().startswith(
        KEEPALIVE_MESSAGE
    )


class Store:
    """Reads and appends to ``refs/pi-rewind/store`` of one repository."""

    def __init__(
        self,
        repo: GitRepo,
        *,
        attempts: int = DEFAULT_ATTEMPTS,
        patience_s: float = DEFAULT_PATIENCE_S,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.repo = repo
        self.attempts = attempts
        self.patience_s = patience_s
        self._clock = clock
        self._sleep = sleep
        self._rng = rng
        self._empty_tree: pygit2.Oid | None = None

    @functools.cached_property
    def git(self) -> GitRunner:
        """Only for the swaps :mod:`ledger.git.store.refswap` leaves to git (built on first use: a
        runner copies the environment, which a prompt's three snapshots need not pay)."""
        return GitRunner(self.repo.root, self.repo.git_dir)

    # --- reading -------------------------------------------------------------------------

    def head(self) -> str | None:
        """The ref's current target, or ``None`` when it does not exist."""
        try:
            ref = self.repo.pygit2.references.get(STORE_REF)
        except (pygit2.GitError, ValueError):
            ref = None
        if ref is None:
            return None
        try:
            return str(ref.resolve().target)
        except (pygit2.GitError, KeyError):
            return None

    def iter_snapshots(self, head: str | None = None, *, until: str | None = None) -> Iterator[str]:
        """Snapshots the chain keeps, newest first (a keepalive's last parent; a head that is
        not a keepalive counts as a snapshot itself). ``head``: start there instead of the ref;
        ``until``: stop when the walk reaches that keepalive (what was appended since it)."""
        sha = self.head() if head is None else head
        seen: set[str] = set()
        while sha and sha not in seen and sha != until:
            seen.add(sha)
            commit = self.repo.commit(sha)
            if commit is None:
                return
            if not is_keepalive(commit):
                yield sha
                return
            parents = [str(p) for p in commit.parent_ids]
            if not parents:
                return
            yield parents[-1]
            sha = parents[0] if len(parents) >= 2 else None

    def snapshots(self) -> list[str]:
        """Snapshots kept by the chain, oldest first, without duplicates."""
        return list(dict.fromkeys(reversed(list(self.iter_snapshots()))))

    def snapshot_times(self) -> dict[str, int]:
        """Snapshots kept by the chain → their commit time in ms."""
        times: dict[str, int] = {}
        for sha in self.snapshots():
            commit = self.repo.commit(sha)
            if commit is not None:
                times[sha] = commit.commit_time * 1000
        return times

    def reachable(self) -> frozenset[str]:
        """Every commit the store ref reaches (keepalives and snapshots): one ``git rev-list``
        walk, for callers that ask about many commits (``rewind doctor``), where
        :meth:`reaches` would walk the chain once per commit."""
        head = self.head()
        if head is None:
            return frozenset()
        try:
            result = self.git.run(["rev-list", head], operation="git rev-list (store)")
        except GitError:
            return frozenset()
        return frozenset(result.text.split())

    def reaches(self, commit: str) -> bool:
        """Whether ``commit`` is reachable from the store ref (so gc keeps it)."""
        head = self.head()
        if head is None or self.repo.commit(commit) is None:
            return False
        if head == commit:
            return True
        for count, snap in enumerate(self.iter_snapshots()):
            if snap == commit:
                return True
            if count > 64:
                break
        try:
            return bool(self.repo.pygit2.descendant_of(head, commit))
        except (pygit2.GitError, ValueError, KeyError):
            return False

    def check_chain(self) -> tuple[int, list[str]]:
        """Walk the whole chain: ``(keepalives, problems)``. Well formed = every keepalive has
        the empty tree and the message ``pi rewind store``, its last parent is a commit, and it
        has two parents except the first one (one)."""
        problems: list[str] = []
        sha, seen, count = self.head(), set(), 0
        while sha and sha not in seen:
            seen.add(sha)
            commit = self.repo.commit(sha)
            if commit is None:
                problems.append(f"{sha[:12]}: in the chain but missing from the object store")
                break
            if not is_keepalive(commit):
                if commit.message.strip().startswith(KEEPALIVE_MESSAGE):
                    problems.append(f"{sha[:12]}: a keepalive whose tree is not empty")
                elif count:
                    problems.append(f"{sha[:12]}: first parent of a keepalive is not a keepalive")
                break  # a head set to a snapshot by hand (the reference's tests do) is tolerated
            count += 1
            parents = [str(p) for p in commit.parent_ids]
            if len(parents) not in (1, 2):
                problems.append(f"{sha[:12]}: keepalive with {len(parents)} parents")
                break
            if self.repo.commit(parents[-1]) is None:
                problems.append(f"{sha[:12]}: keeps {parents[-1][:12]}, which is missing")
            sha = parents[0] if len(parents) == 2 else None
        return count, problems

    # --- writing -------------------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        """git's lock file for the store ref (it holds one for milliseconds per update)."""
        return self.repo.common_dir / (STORE_REF + ".lock")

    def lock_state(self) -> RefLock | None:
        """The lock on the store ref and whose it is (:func:`~ledger.git.store.refswap.ref_lock`),
        or None when there is none."""
        return ref_lock(self.repo.common_dir, STORE_REF)

    def _clear_or_raise(self) -> str | None:
        """Between two attempts: a lock of ours whose owner is provably gone is removed (the next
        attempt takes the lock); one not of rewind's older than :data:`STALE_LOCK_S` ends the
        retries at once with its path and remedy (waiting would only delay the error). A lock
        whose owner runs is waited for, however old: only the owner may remove it. Returns who
        holds it, for the final error."""
        lock = self.lock_state()
        if lock is None:
            return None
        if lock.state == "gone":
            remove_if_gone(self.repo.common_dir, STORE_REF)
            return None
        if lock.state == "foreign" and lock.age_s >= STALE_LOCK_S:
            raise LockTimeoutError(
                self.lock_path, lock.age_s, remedy=stale_lock_remedy(self.lock_path)
            )
        return lock.describe()

    def keepalive_chain(
        self,
        base: str | None,
        snapshots: list[str],
        identity: Identity,
        when_s: int,
        offset_min: int,
    ) -> str | None:
        """Objects only: keepalive commits for ``snapshots`` chained on ``base``; the new head."""
        repo = self.repo.pygit2
        if self._empty_tree is None:  # written once per Store: libgit2 hashes it at every write
            self._empty_tree = repo.TreeBuilder().write()
        empty_tree = self._empty_tree
        sig = identity.signature(when_s, offset_min)
        head = base
        for sha in snapshots:
            parents = [head, sha] if head else [sha]
            head = str(
                repo.create_commit(
                    None,
                    sig,
                    sig,
                    KEEPALIVE_MESSAGE + "\n",
                    empty_tree,
                    [pygit2.Oid(hex=p) for p in parents],
                )
            )
        return head

    def _compare_and_swap(
        self, operation: str, what: str, build: Callable[[str | None, int], tuple[str, _T] | None]
    ) -> _T | None:
        """The one retry loop every store update goes through: read the head, ``build(head,
        attempt)`` the new chain (None: nothing to do), swap only if the head is still the one
        read; otherwise back off with jitter and rebuild. A lock left by a dead rewind process
        is removed; an old one not of rewind's ends it at once (:meth:`_clear_or_raise`)."""
        last_detail = ""
        give_up_at = self._clock() + self.patience_s
        attempt = 0
        while attempt < self.attempts or self._clock() < give_up_at:
            old = self.head()
            built = build(old, attempt)
            if built is None:
                return None
            new, value = built
            outcome = swap_loose_ref(self.repo.common_dir, STORE_REF, new, old)
            if outcome is SwapOutcome.SWAPPED:
                return value
            if outcome is SwapOutcome.LOST:
                last_detail = f"cannot lock ref '{STORE_REF}': it moved or another writer holds it"
            else:
                result = self.git.run(
                    ["update-ref", "--no-deref", STORE_REF, new, old or ZERO_SHA],
                    operation=operation,
                    check=False,
                    config=[("core.logAllRefUpdates", "false")],
                )
                if result.returncode == 0:
                    return value
                last_detail = result.stderr.decode("utf-8", "replace").strip()
            holder = self._clear_or_raise()
            if holder is not None and outcome is SwapOutcome.LOST:
                last_detail = f"the lock {self.lock_path} is {holder}"
            if self._rng is None:
                import random

                self._rng = random.Random()
            self._sleep(self._rng.uniform(0.001, min(0.05, 0.002 * (2 ** min(attempt, 5)))))
            attempt += 1
        raise StoreUpdateError(
            operation, f"failed to {what} after {attempt} attempts: {last_detail}"
        )

    def append(self, snapshot: str, identity: Identity, when_s: int, offset_min: int) -> str:
        """Append a keepalive for ``snapshot``; returns the new head. Raises
        :class:`StoreUpdateError` when the swap keeps failing."""
        if self.repo.commit(snapshot) is None:
            raise GitError("append to the rewind store", f"{snapshot} is not a commit")

        def build(old: str | None, _attempt: int) -> tuple[str, str]:
            head = self.keepalive_chain(old, [snapshot], identity, when_s, offset_min)
            assert head is not None
            return head, head

        head = self._compare_and_swap(
            "update refs/pi-rewind/store", "update rewind store ref", build
        )
        assert head is not None
        return head

    def append_many(
        self, snapshots: list[str], identity: Identity, when_s: int, offset_min: int
    ) -> list[str]:
        """Append keepalives for the ``snapshots`` the store does not keep yet, in order, with
        **one** compare-and-swap for the batch (an import of 500 snapshots would otherwise pay
        500 swaps); rebuilt on the new head and retried when another process moved it. Returns
        the snapshots appended."""

        def build(old: str | None, _attempt: int) -> tuple[str, list[str]] | None:
            kept = set(self.iter_snapshots(old)) if old else set()
            new = [sha for sha in dict.fromkeys(snapshots) if sha not in kept]
            head = self.keepalive_chain(old, new, identity, when_s, offset_min)
            return (head, new) if new and head is not None else None

        return (
            self._compare_and_swap(
                "update refs/pi-rewind/store", f"append {len(snapshots)} snapshots", build
            )
            or []
        )

    def rewrite(
        self,
        live: list[str],
        *,
        since: str | None,
        identity: Identity,
        when_s: int,
        offset_min: int,
    ) -> RewriteResult:
        """Replace the chain by one that keeps exactly ``live`` (retention's rewrite,
        docs/design.md#the-compare-and-swap-rewrite).

        ``since``: the head read when the sweep began. D7 fixed: the swap is a compare-and-swap
        against the head read just before it; when that head is not ``since``, every snapshot
        appended on top of ``since`` is kept too, the chain rebuilt and the swap retried. An
        empty live set leaves the ref untouched.
        """
        wanted = list(dict.fromkeys(sha for sha in live if self.repo.commit(sha) is not None))
        if not wanted:
            return RewriteResult(self.head(), self.head(), [], preserved=True, attempts=0)

        def build(old: str | None, attempt: int) -> tuple[str, RewriteResult]:
            arrived = (
                []
                if old == since
                else [sha for sha in self.iter_snapshots(old, until=since) if sha not in wanted]
            )
            keep = wanted + list(dict.fromkeys(reversed(arrived)))
            new = self.keepalive_chain(None, keep, identity, when_s, offset_min)
            assert new is not None
            return new, RewriteResult(
                old,
                new,
                keep,
                preserved=False,
                attempts=attempt + 1,
                arrived=[sha for sha in keep if sha not in wanted],
            )

        result = self._compare_and_swap(
            "rewrite refs/pi-rewind/store", "rewrite rewind store ref", build
        )
        assert result is not None
        return result


STALE_LOCK_S = 10.0
"""A ref lock *not of rewind's* this old is called stale: git holds one only while it writes the
ref. It is named with a remedy, never removed by rewind: age proves nothing about its owner (a
stopped process holds a lock for as long as it is stopped). Rewind's own locks are judged by
their owner's identity instead (:mod:`ledger.git.store.refswap`)."""


def stale_lock_remedy(path: Path) -> str:
    return (
        f"if no git or rewind process is running in this repository, remove the lock: "
        f"rm '{path}' (rewind removes a lock only when it can prove its owner gone)"
    )


def gone_lock_remedy(lock: RefLock) -> str:
    who = f" (pid {lock.owner.pid})" if lock.owner else ""
    return (
        f"the rewind process that took it{who} is gone: 'rewind sweep' removes it, and so does "
        f"the next snapshot (or: rm '{lock.path}')"
    )


class RewriteResult(FrozenPlain):
    __slots__ = ("arrived", "attempts", "kept", "new_head", "old_head", "preserved")
    old_head: str | None
    new_head: str | None
    kept: list[str]
    preserved: bool
    """True when the live set was empty and the ref was left as it was."""
    attempts: int
    arrived: list[str]
    """Snapshots appended by others during the sweep, kept although the plan did not list them."""

    def __init__(
        self,
        old_head: str | None,
        new_head: str | None,
        kept: list[str],
        preserved: bool,
        attempts: int,
        arrived: list[str] | None = None,
    ) -> None:
        self._init(
            old_head=old_head,
            new_head=new_head,
            kept=kept,
            preserved=preserved,
            attempts=attempts,
            arrived=[] if arrived is None else arrived,
        )


__all__ = [
    "FALLBACK_IDENTITY",
    "KEEPALIVE_MESSAGE",
    "SNAPSHOT_SUBJECT",
    "STALE_LOCK_S",
    "STORE_REF",
    "Identity",
    "RewriteResult",
    "Store",
    "git_identity",
    "gone_lock_remedy",
    "is_keepalive",
    "offset_minutes",
]
