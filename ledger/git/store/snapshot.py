"""Taking a snapshot: capture, dedup against the latest exact snapshot, commit, keep alive.

Why it exists: the engine, the CLI and the benchmarks all need one call that turns the current
work tree into a snapshot commit kept alive by ``refs/pi-rewind/store``
(docs/formats.md#snapshot-commits, docs/formats.md#appending-to-the-store) and says what it did.

Invariants:
- A snapshot commit has the captured tree, no parents, the subject ``pi rewind snapshot`` (the
  body carries ``Head:``/``Branch:`` lines when HEAD exists), and the user's git identity, or a
  fixed one when git has none (D16, reported as ``identity_fallback``).
- Dedup (docs/design.md#snapshots-and-dedup, D8): a capture whose tree equals the *latest* exact snapshot's reuses that
  commit only if it still exists with that tree and the store still reaches it; otherwise a new
  commit is made and appended.
- The latest exact snapshot is the caller's (``last_exact=``) or, by default, the small record in
  ``<git-dir>/pi-rewind/last-snapshot.json``, rewritten after every snapshot.
- Times come from the injected :class:`~ledger.clock.Clock`.
- After a new snapshot is appended, :func:`ledger.git.store.autoupkeep.after_append` checks
  (cheaply) whether the disk upkeep is due and starts it detached: never waited for.
"""

from __future__ import annotations

import contextlib
import errno
import json
import time
from typing import Final

import pygit2

from ledger.errors import CaptureIndexError, GitError
from ledger.git.capture.plan import SkippedPath
from ledger.git.capture.scan import CaptureResult, capture_tree
from ledger.git.owned import replace_private_file
from ledger.git.private import private_dir
from ledger.git.repo import GitRepo
from ledger.git.shadow.layout import ShadowRepo
from ledger.git.store.chain import SNAPSHOT_SUBJECT, Identity, Store, git_identity, offset_minutes
from ledger.loaded_modules import finished
from ledger.plain import FrozenPlain
from ledger.safe_read import read_regular_file
from ledger.settings import SnapshotSettings

# Not `from typing import TYPE_CHECKING`: see ledger/cli/context.py. ledger.clock (uuid,
# datetime) is imported only when a new commit is made: a reused snapshot needs no time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.clock import Clock

LAST_SNAPSHOT_FILE = "last-snapshot.json"


class LastExact(FrozenPlain):
    """The latest exact snapshot: its commit and that commit's tree."""

    __slots__ = ("commit", "tree")
    commit: str
    tree: str

    def __init__(self, commit: str, tree: str) -> None:
        self._init(commit=commit, tree=tree)


class Persisted:
    """The type of :data:`PERSISTED`."""

    def __repr__(self) -> str:
        return "PERSISTED"


PERSISTED: Final = Persisted()
"""``last_exact=PERSISTED``: use (and update) the record in the private dir."""


class SnapshotReport(FrozenPlain):
    __slots__ = (
        "capture_ms",
        "commit",
        "identity_fallback",
        "ms",
        "rebuilt",
        "reused",
        "skipped",
        "store_head",
        "tree",
    )
    commit: str
    tree: str
    reused: bool
    """The latest exact snapshot was reused: no new commit, no store append."""
    skipped: tuple[SkippedPath, ...]
    ms: float
    """Wall time of the whole operation (capture + commit + store)."""
    capture_ms: float
    rebuilt: bool
    """The private capture index was built from nothing (first capture, changed config …)."""
    identity_fallback: bool
    store_head: str | None

    def __init__(
        self,
        commit: str,
        tree: str,
        reused: bool,
        skipped: tuple[SkippedPath, ...],
        ms: float,
        capture_ms: float,
        rebuilt: bool,
        identity_fallback: bool,
        store_head: str | None,
    ) -> None:
        self._init(
            commit=commit,
            tree=tree,
            reused=reused,
            skipped=skipped,
            ms=ms,
            capture_ms=capture_ms,
            rebuilt=rebuilt,
            identity_fallback=identity_fallback,
            store_head=store_head,
        )

    def to_json(self) -> dict[str, object]:
        """The ``rewind snapshot --json`` payload."""
        return {
            "commit": self.commit,
            "tree": self.tree,
            "reused": self.reused,
            "skipped": [s.path for s in self.skipped],
            "ms": round(self.ms, 1),
        }

    def fields(self) -> dict[str, object]:
        """Plain values for printing it, the same whether it was taken here or served by a
        running ``rewind serve`` (:mod:`ledger.bridge.snapshot_socket`)."""
        return {
            "json": self.to_json(),
            "commit": self.commit,
            "tree": self.tree,
            "reused": self.reused,
            "skipped": [s.fields() for s in self.skipped],
            "ms": self.ms,
            "rebuilt": self.rebuilt,
            "identityFallback": self.identity_fallback,
        }


# --- the latest exact snapshot record ------------------------------------------------------


def load_last_exact(repo: GitRepo) -> LastExact | None:
    # Read on every snapshot: through the non-blocking regular-file reader, so a FIFO or device
    # put in its place is no record (docs/design.md#hostile-files), never a hang.
    try:
        raw = read_regular_file(private_dir(repo.git_dir) / LAST_SNAPSHOT_FILE, 1 << 16)
        if raw is None:
            return None
        data = json.loads(raw)
        commit, tree = data["commit"], data["tree"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (isinstance(commit, str) and isinstance(tree, str)):
        return None
    return LastExact(commit, tree)


def save_last_exact(repo: GitRepo, last: LastExact | None) -> None:
    """Record (or with ``None``, forget) the latest exact snapshot; e.g. after a store rewrite."""
    path = private_dir(repo.git_dir) / LAST_SNAPSHOT_FILE
    if last is None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # Through a temporary that is its own lock: one a kill leaves is swept (ledger/git/owned.py).
    replace_private_file(path, json.dumps({"commit": last.commit, "tree": last.tree}).encode())


# --- identity and commits ------------------------------------------------------------------


def _snapshot_message(repo: GitRepo) -> str:
    lines = [SNAPSHOT_SUBJECT]
    body = []
    if isinstance(repo, ShadowRepo):  # its HEAD is ours, not the user's (docs/shadow.md#speed)
        return SNAPSHOT_SUBJECT + "\n"
    r = repo.pygit2
    try:
        if not r.head_is_unborn:
            body.append(f"Head: {r.head.target}")
            if not r.head_is_detached:
                body.append(f"Branch: {r.head.shorthand}")
    except (pygit2.GitError, KeyError, ValueError):
        pass
    if body:
        lines += ["", *body]
    return "\n".join(lines) + "\n"


class SnapshotCommit(FrozenPlain):
    __slots__ = ("commit", "identity_fallback", "reused", "store_head", "tree")
    commit: str
    tree: str
    reused: bool
    identity_fallback: bool
    store_head: str | None

    def __init__(
        self, commit: str, tree: str, reused: bool, identity_fallback: bool, store_head: str | None
    ) -> None:
        self._init(
            commit=commit,
            tree=tree,
            reused=reused,
            identity_fallback=identity_fallback,
            store_head=store_head,
        )


def commit_snapshot(
    repo: GitRepo,
    tree: str,
    *,
    last_exact: LastExact | None,
    clock: Clock | None = None,
    store: Store | None = None,
    identity: Identity | None = None,
    note: str | None = None,
) -> SnapshotCommit:
    """Reuse ``last_exact`` for ``tree`` when allowed (D8), else commit ``tree`` as a new
    snapshot and append it to the store. ``note``: one more body line, which also makes the
    commit differ from any other snapshot of the same tree made in the same second (the agent
    tool's restores: docs/formats.md#snapshot-commits)."""
    store = store or Store(repo)
    if last_exact is not None and last_exact.tree == tree and _reusable(repo, store, last_exact):
        return SnapshotCommit(last_exact.commit, tree, True, False, store.head())
    r = repo.pygit2
    try:
        tree_oid = pygit2.Oid(hex=tree)
        if not isinstance(r.get(tree_oid), pygit2.Tree):
            raise GitError("snapshot", f"{tree} is not a tree")
    except ValueError as exc:
        raise GitError("snapshot", f"{tree} is not a tree id") from exc
    from ledger.clock import SystemClock

    ident = identity or _kept_identity(repo)
    when_s = (clock or SystemClock()).now_ms() // 1000
    offset = offset_minutes(when_s)
    sig = ident.signature(when_s, offset)
    message = _snapshot_message(repo)
    if note is not None:
        message += ("\n" if message.count("\n") == 1 else "") + f"{note}\n"
    commit = str(r.create_commit(None, sig, sig, message, tree_oid, []))
    head = store.append(commit, ident, when_s, offset)
    # Every new snapshot passes here, whoever takes it (CLI, library, bridge; retention on or
    # off): start the disk upkeep in the background when loose objects are over gc.auto.
    from ledger.git.store.autoupkeep import after_append

    after_append(repo)
    return SnapshotCommit(commit, tree, False, ident.fallback, head)


def _kept_identity(repo: GitRepo) -> Identity:
    """``git var GIT_COMMITTER_IDENT``, asked once per configuration: kept with git's
    configuration view (:mod:`ledger.git.config_view`), whose signature holds every file git
    read and every ``GIT_*``/``EMAIL`` variable the identity comes from. A watcher or a bridge
    restoring many times asks git once (a cold command still asks once)."""
    from ledger.git.config_view import config_view

    view = config_view(repo)
    if not view.complete:
        return git_identity(repo)
    return view.remember("identity", lambda: git_identity(repo))


def _feed_identity(repo: GitRepo) -> Identity | None:
    """Inside ``rewind serve``, the committer identity cached by the change feed while git's
    configuration files and the environment are unchanged (saves a ``git var`` per snapshot);
    ``None`` elsewhere (one-shot commands never import the feed)."""
    module = finished("ledger.git.feed.service")  # never half-imported
    if module is None or not module.enabled():
        return None
    feed = module.feed_for(repo)
    if feed is None or feed.base is None:
        return None
    ident = feed.identity(lambda: git_identity(repo))
    return ident if isinstance(ident, Identity) else None


def _reusable(repo: GitRepo, store: Store, last: LastExact) -> bool:
    if repo.tree_of(last.commit) != last.tree:
        return False
    return store.reaches(last.commit)


def take_snapshot(
    repo: GitRepo,
    settings: SnapshotSettings | None = None,
    *,
    last_exact: LastExact | Persisted | None = PERSISTED,
    clock: Clock | None = None,
) -> SnapshotReport:
    """Capture the work tree and make (or reuse) its snapshot commit, kept by the store.

    ``last_exact``: ``PERSISTED`` (default) uses the record in the private dir; a
    :class:`LastExact` is the caller's own (e.g. the engine's per-session value); ``None``
    disables dedup. The persisted record names the result in every case (written only on change).
    """
    started = time.perf_counter()
    captured: CaptureResult = capture_tree(repo, settings)
    last = load_last_exact(repo) if isinstance(last_exact, Persisted) else last_exact
    try:
        made = commit_snapshot(
            repo, captured.tree, last_exact=last, clock=clock, identity=_feed_identity(repo)
        )
    except (OSError, pygit2.GitError) as exc:  # e.g. a full disk while writing the commit
        raise CaptureIndexError(
            repo.git_dir / "objects",
            str(exc),
            no_space="No space left" in str(exc) or getattr(exc, "errno", None) == errno.ENOSPC,
        ) from None
    made_exact = LastExact(made.commit, made.tree)
    # The record is rewritten only when it changes: a reused snapshot (most captures in a
    # session) reads ~40 bytes instead of writing and renaming a file. A concurrent writer
    # between the read and the skip leaves its own (equally valid) hint: dedup re-checks it.
    recorded = last if isinstance(last_exact, Persisted) else load_last_exact(repo)
    try:
        if recorded != made_exact:
            save_last_exact(repo, made_exact)
    except OSError:
        # Only a dedup hint: forget it rather than keep a stale one (unlinking needs no space).
        with contextlib.suppress(OSError):
            save_last_exact(repo, None)
    return SnapshotReport(
        commit=made.commit,
        tree=made.tree,
        reused=made.reused,
        skipped=captured.skipped,
        ms=(time.perf_counter() - started) * 1000.0,
        capture_ms=captured.ms,
        rebuilt=captured.rebuilt,
        identity_fallback=made.identity_fallback,
        store_head=made.store_head,
    )


__all__ = [
    "PERSISTED",
    "LastExact",
    "SnapshotCommit",
    "SnapshotReport",
    "commit_snapshot",
    "load_last_exact",
    "save_last_exact",
    "take_snapshot",
]
