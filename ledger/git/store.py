"""``refs/pi-rewind/store``: the keepalive chain that keeps snapshot commits reachable.

Why it exists: snapshot commits have no parents and no branch; without a ref, ``git gc`` would
prune them. The reference extension (rewind-v2.md §5) keeps them alive with a first-parent chain
of *keepalive* commits: empty tree, parents ``[previous head, snapshot]`` (only ``[snapshot]``
for the first), message ``pi rewind store``. Several processes share the ref.

Invariants:
- The only ref this package writes. Updates are compare-and-swap (``git update-ref <new> <old>``,
  the zero SHA when the ref must not exist yet), retried a bounded number of times with jitter;
  every attempt builds a new keepalive on the head it just read, so a concurrent append is never
  lost. Exhausted retries raise :class:`~ledger.errors.StoreUpdateError`.
- No reflog is written for the ref and no hook runs.
- pygit2 builds the objects and reads the chain; git's ``update-ref`` does the swap (pygit2
  exposes no compare-and-swap ref update).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pygit2

from ledger.errors import GitError, StoreUpdateError
from ledger.git.repo import GitRepo
from ledger.git.runner import EMPTY_TREE, ZERO_SHA, GitRunner

STORE_REF = "refs/pi-rewind/store"
KEEPALIVE_MESSAGE = "pi rewind store"
SNAPSHOT_SUBJECT = "pi rewind snapshot"
DEFAULT_ATTEMPTS = 25


@dataclass(frozen=True)
class Identity:
    """Author/committer for snapshot and keepalive commits."""

    name: str
    email: str
    fallback: bool = False
    """True when git had no identity and the fixed one was used (D16)."""

    def signature(self, when_s: int, offset_min: int) -> pygit2.Signature:
        return pygit2.Signature(self.name, self.email, when_s, offset_min)


class Store:
    """Reads and appends to ``refs/pi-rewind/store`` of one repository."""

    def __init__(self, repo: GitRepo, *, attempts: int = DEFAULT_ATTEMPTS,
                 sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None) -> None:
        self.repo = repo
        self.git = GitRunner(repo.root, repo.git_dir)
        self.attempts = attempts
        self._sleep = sleep
        self._rng = rng or random.Random()

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

    def _commit(self, sha: str) -> pygit2.Commit | None:
        try:
            obj = self.repo.pygit2.get(sha)
        except (ValueError, pygit2.GitError):
            return None
        return obj if isinstance(obj, pygit2.Commit) else None

    def _is_keepalive(self, commit: pygit2.Commit) -> bool:
        return (str(commit.tree_id) == EMPTY_TREE
                and commit.message.strip().startswith(KEEPALIVE_MESSAGE))

    def iter_snapshots(self) -> Iterator[str]:
        """Snapshots the chain keeps, newest first (a keepalive's last parent; a head that is
        not a keepalive counts as a snapshot itself)."""
        sha = self.head()
        seen: set[str] = set()
        while sha and sha not in seen:
            seen.add(sha)
            commit = self._commit(sha)
            if commit is None:
                return
            if not self._is_keepalive(commit):
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

    def reaches(self, commit: str) -> bool:
        """Whether ``commit`` is reachable from the store ref (so gc keeps it)."""
        head = self.head()
        if head is None or self._commit(commit) is None:
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

    # --- writing -------------------------------------------------------------------------

    def append(self, snapshot: str, identity: Identity, when_s: int, offset_min: int) -> str:
        """Append a keepalive for ``snapshot``; returns the new head. Raises
        :class:`StoreUpdateError` when the swap keeps failing."""
        repo = self.repo.pygit2
        if self._commit(snapshot) is None:
            raise GitError("append to the rewind store", f"{snapshot} is not a commit")
        empty_tree = repo.TreeBuilder().write()
        sig = identity.signature(when_s, offset_min)
        last_detail = ""
        for attempt in range(self.attempts):
            old = self.head()
            parents = [old, snapshot] if old else [snapshot]
            keepalive = repo.create_commit(None, sig, sig, KEEPALIVE_MESSAGE + "\n", empty_tree,
                                           [pygit2.Oid(hex=p) for p in parents])
            result = self.git.run(
                ["update-ref", "--no-deref", STORE_REF, str(keepalive), old or ZERO_SHA],
                operation="update refs/pi-rewind/store", check=False,
                config=[("core.logAllRefUpdates", "false")])
            if result.returncode == 0:
                return str(keepalive)
            last_detail = result.stderr.decode("utf-8", "replace").strip()
            self._sleep(self._rng.uniform(0.001, min(0.05, 0.002 * (2 ** min(attempt, 5)))))
        raise StoreUpdateError("update refs/pi-rewind/store",
                               f"failed to update rewind store ref after {self.attempts} "
                               f"attempts: {last_detail}")


__all__ = ["Identity", "KEEPALIVE_MESSAGE", "SNAPSHOT_SUBJECT", "STORE_REF", "Store"]
