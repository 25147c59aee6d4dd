"""The engine's adapter to the authorship index: appends as work happens, reads for plans,
rebuilds from the ledgers (docs/authorship.md#wiring).

Why it exists: whose work a restore would overwrite used to be recomputed from every recorded
point of every session at each use (slow, slower with every prompt, and wrong where the walk
did not model a flow). :mod:`ledger.authorship` keeps the answer as it happens; this module is
the one place that feeds it from git and the ledgers:

- **Appends**, one record per capture that makes a ledger point, right after the capture
  (:meth:`AuthorshipLog.capture`, :meth:`~AuthorshipLog.agent`, :meth:`~AuthorshipLog.rewind`),
  through the pure :class:`~ledger.authorship.rebuild.Chain` rule: a capture is compared with
  the work tree's latest recorded snapshot (whoever took it: the index's last record), an agent
  turn or a rewind with the same session's previous point. One tree diff that skips equal
  subtrees, so a record costs what changed. A record without changes is not written (its tree
  equals its base, so it says nothing).
- **Reads** for a plan: a few paths in a process without the index in memory read only the
  frames naming them (:meth:`~ledger.authorship.store.AuthorshipStore.read` with ``only``);
  more paths, or a long-lived engine (the bridge), load the index once and then take only the
  bytes appended since.
- **Rebuild** when the file is missing, partial (created by appends while no index existed),
  damaged, too large or of a newer version: every session of this work tree that the ledgers
  name (this one, its ancestors, the session files beside it and the live ones), their points
  in time order, replayed through the same rule (:func:`ledger.authorship.rebuild.rebuild`), then
  written in place of the file (kept in memory only for a newer version).

Invariants: an index problem never fails a capture or a restore (a failed append invalidates
the file, which is rebuilt at its next read); nothing here captures or touches the work tree;
only files in our private dir are written.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from ledger.authorship.model import AuthorshipIndex, Key, Record, absent
from ledger.authorship.rebuild import Chain, Point, ordered, rebuild
from ledger.authorship.store import (
    AuthorshipReader,
    AuthorshipStore,
    Latest,
    Loaded,
)
from ledger.clock import ms_from_iso
from ledger.errors import AuthorshipIndexError, LedgerError
from ledger.git.private import make_private_dir, private_dir
from ledger.git.repo import GitRepo
from ledger.git.trees import leaf_changes
from ledger.ledgerview import LedgerView
from ledger.lineage import LineageReader
from ledger.plain import Plain
from ledger.records import FORK_PENDING, OP, TURN
from ledger.session.model import Session

SPARSE_PATHS = 32
"""A plan of at most this many paths, in a process without the index loaded, reads only the
frames naming them (a scan of the file in C) instead of parsing every entry."""
MAX_REBUILD_SESSIONS = 64
"""Session files beside this one a rebuild reads at most (newest first)."""
MAX_SIBLINGS_LISTED = 4096

Ledgers = Mapping[str, Sequence[Point]]
"""Per session id, its points in the order they were recorded."""


def keys_between(repo: GitRepo, base: str | None, snapshot: str) -> list[Key]:
    """The keys a capture of ``snapshot`` records against ``base`` (commits): each path whose
    ``(mode, blob)`` changed, with its new state (an absence when deleted); every file of
    ``snapshot`` when ``base`` is ``None`` (the first capture); nothing when ``base`` is gone.
    Equal subtrees are skipped."""
    new_tree = repo.tree_of(snapshot)
    if new_tree is None:
        return []
    old_tree = repo.tree_of(base) if base is not None else None
    if old_tree == new_tree:
        return []
    if base is not None and old_tree is None:
        # The base was pruned (or never reached this repository): what changed since is
        # unknown. Listing every file as found would make the user the latest producer of
        # everything and hide whose work it was; content left unrecorded reads as the user's
        # anyway, and older content keeps its producer.
        return []
    changes = leaf_changes(repo, old_tree, new_tree) or []  # None: a corrupt tree, no keys
    keys: list[Key] = []
    for change in changes:
        path = os.fsencode(change.path)
        new = change.new
        keys.append(absent(path) if new is None else (path, new.mode, new.oid))
    return keys


_SHARED: dict[str, tuple[AuthorshipReader, threading.RLock]] = {}
"""Per index file, the reader the served commands of this process share (:meth:`AuthorshipLog.share_loaded`)."""
_SHARED_GUARD = threading.Lock()
_LATEST: dict[str, Latest] = {}
"""Per index file, its latest record as this process last found it: a later session of a
watcher, or a restore's record after its plan, reads only what was appended since
(docs/authorship.md#the-latest-snapshot-without-a-whole-read). Any entry is a correct place to
go on from (the file is only appended to, and a rewrite is seen), so which of two racing
threads stores its answer last does not matter."""


class AuthorshipLog:
    """One engine's authorship index of its repository's work tree (see the module)."""

    def __init__(
        self,
        repo: GitRepo,
        ledgers: Callable[[], Ledgers] | None = None,
        *,
        keep_loaded: bool = False,
    ) -> None:
        self.repo = repo
        self.store = AuthorshipStore(private_dir(repo.git_dir))
        self.ledgers = ledgers
        """What a rebuild replays (``None``: no rebuild, the file as it is)."""
        self.keep_loaded = keep_loaded
        """A long-lived engine (the bridge): load the index once and tail it."""
        self._reader: AuthorshipReader | None = None
        self._own: dict[str, str] = {}
        """Per session, its latest point written by this process (the chain's session bases)."""
        self._memory: AuthorshipIndex | None = None
        """A rebuilt index that could not be written (a newer file version, or busy)."""
        self.rebuilds = 0
        self.last_error: str | None = None
        self._reading = threading.RLock()
        """Held while the loaded index is read from the file (:meth:`preload` runs in the
        bridge's background): a caller meanwhile waits for it, then reads only what follows."""

    # --- appends ----------------------------------------------------------------------------

    def capture(self, snapshot: str, session: str, *, busy: str | None = None) -> None:
        """A capture that makes a ledger point: what changed since the work tree's latest
        recorded snapshot was found, not made (the user's), unless ``busy`` names the one
        other session whose turn was running then (its agent's, until its turn says)."""
        if busy is not None:
            self._note(Point(snapshot, "agent", busy), base=self._last())
            self._own[session] = snapshot
            return
        self._note(Point(snapshot, "capture", session))

    def agent(self, snapshot: str, session: str, entry: str | None) -> None:
        """An agent turn's post-turn snapshot (``entry``: its assistant entry)."""
        self._note(Point(snapshot, "agent", session, entry))

    def rewind(self, before: str | None, after: str, session: str) -> None:
        """A restore, undo or fork restore: ``before`` its pre-restore capture, ``after`` the
        state it wrote. ``before`` is ``None`` when the restore changed nothing (the files
        already were ``after``): then nothing was written, and whatever differs from the latest
        point was made by someone else, so it is a capture of ``after``, exactly what a rebuild
        replays for its op (``current`` without ``undo``). A rewind record there would credit
        the user's changes (say, deleting the file the agent made) to the rewind."""
        if before is None:
            self.capture(after, session)
            return
        self.capture(before, session)
        self._note(Point(after, "rewind", session))

    def _note(self, point: Point, *, base: str | None = None) -> None:
        if base is None:
            own = self._own.get(point.session) if point.kind != "capture" else None
            base = own if own is not None else self._last()
        chain = Chain(last=base, sessions={point.session: base} if base else {})
        record = chain.record(point, lambda old, new: keys_between(self.repo, old, new))
        self._own[point.session] = point.snapshot
        if not record.entries:
            return
        self._append(record)

    def _append(self, record: Record) -> None:
        try:
            make_private_dir(self.repo.git_dir)
            if not self.store.append([record], history_free=lambda: self._history_free(record)):
                self.last_error = "the index file is of a newer version or damaged"
        except (AuthorshipIndexError, OSError) as exc:
            # Never fail the capture: the index is only advice, and a rebuild restores it.
            self.last_error = str(exc)
            with contextlib.suppress(OSError):
                self.store.invalidate()
        if self._memory is not None:
            self._memory.add(record)

    def _history_free(self, record: Record) -> bool:
        """Whether no point can exist before ``record``: the store's chain keeps no snapshot but
        its own (asked only when its append creates the index file). A point's snapshot stays
        on the chain until a sweep drops it, and a pruned one is no point to a rebuild either,
        so a rebuild would write exactly this record: the file can start ``complete``, and the
        first ``/rewind`` of a new repository reads it instead of replaying every session.
        (A swept snapshot whose commit git has not pruned yet would be replayed by a rebuild; at
        worst its changes read as unrecorded, which attribution counts as the user's: more
        warnings, never fewer.) Newest first, so the walk stops at the first other snapshot; any
        doubt (an unreadable chain) says no."""
        from ledger.git.store.chain import Store

        try:
            return all(s == record.snapshot for s in Store(self.repo).iter_snapshots())
        except Exception:  # an optimization only: the file is then created partial, as before
            return False

    def _last(self) -> str | None:
        """The work tree's latest recorded snapshot (the base of a capture)."""
        if self._memory is not None:
            return self._memory.last_snapshot
        if self._reader is not None or self.keep_loaded:
            return self._loaded().index.last_snapshot
        # Read before in this process (a restore's plan read the index for its paths; an
        # earlier session of this watcher): nothing read while the file is the same, only
        # what was appended since when it grew (docs/authorship.md#one-read-per-restore).
        key = str(self.store.path)
        with _SHARED_GUARD:
            known = _LATEST.get(key)
        latest = self.store.latest(known)
        if latest is not None and latest is not known:
            with _SHARED_GUARD:
                _LATEST[key] = latest
        return None if latest is None else latest.snapshot

    def _remember(self, loaded: Loaded) -> Loaded:
        """Keep a whole read's latest record for :meth:`_last`."""
        if loaded.latest is not None:
            with _SHARED_GUARD:
                _LATEST[str(self.store.path)] = loaded.latest
        return loaded

    # --- reads ------------------------------------------------------------------------------

    def _loaded(self) -> AuthorshipReader:
        with self._reading:
            if self._reader is None:
                self._reader = AuthorshipReader(self.store)
            self._reader.refresh()
            return self._reader

    def share_loaded(self) -> None:
        """Read through this process's one loaded reader of the index file, kept current by
        tailing it: for the commands a watcher runs one after another
        (:mod:`ledger.bridge.served_commands`, which runs them one at a time), each with a new
        engine that would otherwise load the whole file again (~35 ms at 400 frames)."""
        key = str(self.store.path)
        with _SHARED_GUARD:
            shared = _SHARED.get(key)
            if shared is None:
                shared = _SHARED[key] = (AuthorshipReader(self.store), threading.RLock())
        self._reader, self._reading = shared
        self.keep_loaded = True

    def preload(self) -> None:
        """Load the index now, off the caller's path (the bridge, in the background once
        ``session_start`` is answered), so that the first list or plan only reads what was
        appended since. Only a kept-loaded index, and only the file as it is: a rebuild (it
        reads the ledgers and the repository) is left to the first real use."""
        if self.keep_loaded and self._memory is None:
            with contextlib.suppress(OSError, LedgerError):
                self._loaded()

    def index_for(self, paths: Collection[bytes] | None) -> AuthorshipIndex:
        """An index that answers for ``paths`` (``None``, many paths, or an index kept loaded:
        for every path), rebuilt first when the file must be."""
        if self._memory is not None:
            return self._memory
        if (
            paths is None
            or self._reader is not None
            or self.keep_loaded
            or len(paths) > SPARSE_PATHS
        ):
            reader = self._loaded()
            if reader.status == "ok":
                return reader.index
            return self._rebuild(reader.status)
        loaded = self._remember(self.store.read(only=paths))
        if loaded.status == "ok":
            index = AuthorshipIndex.of(loaded.records)
            index.last_snapshot = loaded.last_snapshot
            return index
        return self._rebuild(loaded.status)

    def _rebuild(self, status: str) -> AuthorshipIndex:
        """Replay every session's points (see the module); write the result unless the file
        is of a newer version. Without a ledger source: the file's records as they are."""
        if self.ledgers is None:
            return AuthorshipIndex.of(self.store.read().records)
        # A pruned snapshot is no point: each point is compared with the last one that exists.
        points = [p for p in ordered(self.ledgers()) if self.repo.commit_exists(p.snapshot)]
        records = [
            r
            for r in rebuild(points, lambda old, new: keys_between(self.repo, old, new))
            if r.entries
        ]
        self.rebuilds += 1
        written = False
        if status != "newer":
            with contextlib.suppress(OSError):
                make_private_dir(self.repo.git_dir)
                written = self.store.replace(records)
        if written:
            if self._reader is not None or self.keep_loaded:
                return self._loaded().index
            return AuthorshipIndex.of(self.store.read().records)
        self._memory = AuthorshipIndex.of(records)
        return self._memory


# --- the ledgers a rebuild replays ------------------------------------------------------------


class Replayed(Plain):
    """What a rebuild replayed so far, across the sessions it reads (:func:`session_points`)."""

    __slots__ = ("handoffs", "open_in", "records")
    records: set[str]
    """Record ids: a fork copies its parent's records with their ids (the parent's are
    replayed, the copies skipped)."""
    handoffs: dict[tuple[str, str | None], str]
    """Fork hand-offs (a ``rewind-fork-pending``'s ``(current, undo)``) not yet matched, with
    the session that recorded them. Exactly one op repeats each: the child's import (its first
    record of its own), or the parent's own op for a fork that did not happen (the parent's
    next op, before any turn). That op repeats the hand-off's points and is not replayed; any
    other op is, even with the same pair (a restore done again from the same state to the same
    point: a restore, its undo, the same restore)."""
    open_in: set[str]
    """Sessions whose latest record is a hand-off (their next op may be its own record)."""

    def __init__(
        self,
        records: set[str] | None = None,
        handoffs: dict[tuple[str, str | None], str] | None = None,
        open_in: set[str] | None = None,
    ) -> None:
        self.records = set() if records is None else records
        self.handoffs = {} if handoffs is None else handoffs
        self.open_in = set() if open_in is None else open_in


def session_points(session: Session, replayed: Replayed) -> list[Point]:
    """The points of one session's ledger in file order, as the live writer appended them:
    a turn's bindings (the pre-prompt snapshot a capture, each assistant entry's an agent
    turn), an op's ``undo`` (a capture) then ``current`` (a rewind; without an ``undo``, a
    capture: "Keep current files"), its bindings (checkpoints, compactions: captures), a
    fork hand-off's restore. ``replayed``: what was replayed before (records a fork copied,
    hand-offs whose op is still to come; see :class:`Replayed`), updated."""
    view = LedgerView.of(session)
    points: list[Point] = []
    sid = session.id
    first_own = True
    for record in view.records:
        rid = record.record_id
        if rid in replayed.records:
            continue
        replayed.records.add(rid)
        at = ms_from_iso(record.timestamp) / 1000.0
        starts = first_own
        first_own = False
        if record.custom_type == TURN:
            replayed.open_in.discard(sid)
            for entry_id, sha in record.bindings:
                entry = session.get(entry_id)
                stamp = entry.timestamp if entry is not None else None
                when = (ms_from_iso(stamp) / 1000.0) or at
                if entry is not None and entry.type == "message" and entry.role == "assistant":
                    points.append(Point(sha, "agent", sid, entry_id, at=when))
                else:
                    points.append(Point(sha, "capture", sid, at=when))
            continue
        if record.custom_type not in (OP, FORK_PENDING):
            continue
        pair = (record.current, record.undo) if record.current else None
        if record.custom_type == OP and pair is not None:
            by = replayed.handoffs.get(pair)
            # The op that repeats a hand-off: the child's import (its first record) or the
            # parent's record of a fork that did not happen (its next op). Its points are the
            # hand-off's, replayed already.
            if by is not None and (
                (by != sid and starts) or (by == sid and sid in replayed.open_in)
            ):
                del replayed.handoffs[pair]
                replayed.open_in.discard(sid)
                continue
        replayed.open_in.discard(sid)
        if record.custom_type == FORK_PENDING and pair is not None:
            replayed.handoffs[pair] = sid
            replayed.open_in.add(sid)
        if record.current and record.undo:
            points.append(Point(record.undo, "capture", sid, at=at))
            points.append(Point(record.current, "rewind", sid, at=at))
        elif record.current:
            points.append(Point(record.current, "capture", sid, at=at))
        for _entry_id, sha in record.bindings:
            points.append(Point(sha, "capture", sid, at=at))
    return points


def work_tree_ledgers(
    own: Session,
    ancestors: Sequence[Session],
    others: Sequence[Session],
) -> dict[str, list[Point]]:
    """Every session's points for a rebuild: ancestors first (a fork's copied records are its
    parent's), then this session, then the others, oldest first: a fork is created after the
    session it was forked from, so its parent's records are replayed (and credited to the
    parent) before its copies of them are skipped."""
    replayed = Replayed()
    found: dict[str, list[Point]] = {}
    by_age = sorted(others, key=lambda other: ms_from_iso(other.header.get("timestamp")))
    for session in [*reversed(ancestors), own, *by_age]:
        if session.id in found:
            continue
        found[session.id] = session_points(session, replayed)
    return found


def sibling_files(
    own: Path | None, *, limit: int = MAX_REBUILD_SESSIONS, changed_since: float | None = None
) -> list[Path]:
    """The ``*.jsonl`` files beside ``own`` (Pi keeps one directory per working directory),
    newest first, at most ``limit`` (a listing of at most :data:`MAX_SIBLINGS_LISTED` names);
    ``changed_since``: only those modified at or after that time (seconds)."""
    if own is None:
        return []
    dated: list[tuple[float, Path]] = []
    try:
        with os.scandir(own.parent) as listing:
            for count, item in enumerate(listing):
                if count >= MAX_SIBLINGS_LISTED:
                    break
                if not item.name.endswith(".jsonl") or item.path == str(own):
                    continue
                with contextlib.suppress(OSError):
                    if item.is_file(follow_symlinks=False):
                        mtime = item.stat(follow_symlinks=False).st_mtime
                        if changed_since is None or mtime >= changed_since:
                            dated.append((mtime, Path(item.path)))
    except OSError:
        return []
    dated.sort(key=lambda d: d[0], reverse=True)
    return [path for _, path in dated[:limit]]


def load_sessions(paths: Sequence[Path], load: Callable[[Path], Session | None]) -> list[Session]:
    """The sessions at ``paths`` that can be read (one that cannot names nothing)."""
    found: list[Session] = []
    for path in paths:
        try:
            session = load(path)
        except (OSError, LedgerError):
            continue
        if session is not None:
            found.append(session)
    return found


def busy_other(git_dir: Path, own: str) -> str | None:
    """The one other session whose turn runs in this work tree now (the registries' word):
    what a capture finds changed meanwhile is its agent's work in flight, not the user's."""
    from ledger.turngate import busy_here

    try:
        busy = {b.session_id for b in busy_here(git_dir, own)}
    except (LedgerError, OSError):
        return None
    return busy.pop() if len(busy) == 1 else None


def ledgers_here(
    own: Session, own_file: str | Path | None, reader: LineageReader, git_dir: Path
) -> dict[str, list[Point]]:
    """:func:`work_tree_ledgers` of this work tree's sessions: ``own`` (the engine's, in
    memory) with its ancestors, the session files beside its file and the live sessions of
    this repository."""
    from ledger.presence import live_sessions

    def load(path: Path) -> Session | None:
        return reader.load(path, full=True).session

    ancestors = load_sessions([link.path for link in reader.lineage(own).links[1:]], load)
    own_path = Path(os.path.realpath(own_file)) if own_file is not None else None
    paths = sibling_files(own_path)
    with contextlib.suppress(OSError, LedgerError):
        for entry in live_sessions(git_dir):
            if entry.session_file and Path(os.path.realpath(entry.session_file)) not in (
                own_path,
                *paths,
            ):
                paths.append(Path(entry.session_file))
    others = [s for s in load_sessions(paths, load) if s.id != own.id]
    return work_tree_ledgers(own, ancestors, others)


__all__ = [
    "SPARSE_PATHS",
    "AuthorshipLog",
    "Ledgers",
    "Replayed",
    "busy_other",
    "keys_between",
    "ledgers_here",
    "load_sessions",
    "session_points",
    "sibling_files",
    "work_tree_ledgers",
]
