"""The restore journal: a durable note of a restore in progress, so that no interruption loses the
way back.

Why it exists: a restore snapshots the work tree first (the undo snapshot) and only then changes
files, but the record that names the undo snapshot is appended to the session at the very end. A
``kill -9``, a full disk or a failed rollback between the two left the tree mixed, ``rewind undo``
with nothing to undo, and the undo snapshot unreferenced (dropped by the next sweep). The journal
closes that gap (docs/design.md#crash-safe-restore):

1. Before the first file changes, :func:`open_journal` writes ``<git dir>/pi-rewind/journal/
   <started>-<id>.json`` with the undo snapshot, the target, the session and entry (from the
   ambient :class:`RestoreIntent`), and the staging directory, and fsyncs file and directory.
2. When the files are written and verified, the journal is marked ``done`` (its bytes fsync'd,
   its directory not: a crash that loses the mark leaves an interrupted restore, whose undo
   loses nothing, :meth:`Journal.mark_done`). It is closed
   (deleted) when the caller has recorded the op (:func:`settle` checks the session's ledger for a
   record naming the undo snapshot) or, without a session, at once.
3. A rollback that succeeds closes the journal (the work tree is as before; nothing to record).
   A rollback that fails leaves it ``writing``, with the failure.

**Running or interrupted.** An open journal is an *interrupted* restore only when its owner is
gone. The owner proves it is alive by an exclusive ``flock`` on a sibling lock file
``<started>-<id>.lock``, taken before the journal is first written and held until the restore is
over: the outermost :func:`restore_intent` block ends (so that the caller's op record is
appended while it is still held), the rollback failed (:meth:`Journal.mark_failed`), or, without
such a block, :func:`restore_commit <ledger.git.restore.run.restore_commit>` returns. The kernel
drops the lock when the process dies, also on ``kill -9``, and a reused pid cannot hold it, so
the lock is the proof; a probe (a non-blocking shared ``flock`` on a new descriptor) tells
held from free. The journal also records the owner's identity (pid, its start time from
``/proc/<pid>/stat`` field 22, the boot id, the host): it names the running process in messages,
and it is the proof only where the file system has no ``flock`` (the journal then says
``"lock": false``): alive while that pid on this host and boot has that start time. Journals
written before these fields existed have neither a lock nor an identity: interrupted, as before.

Every later ``rewind`` command and the bridge read :func:`settle`: restores wait for a running
restore and refuse while an interrupted ``writing`` journal is open, ``rewind undo`` returns to
an interrupted restore's undo snapshot, ``rewind doctor`` exits 1 for an interrupted one (a
running one is information), and the retention sweep pins every open journal's undo snapshot.

Invariants: journals live only in our private directory; writing one is atomic (temporary file,
fsync, rename, fsync of the directory); the lock file is never replaced (a rename would drop the
lock), and a journal file exists only while its lock is (or was) held: it is written after the
lock is taken and deleted before the lock file; a journal that cannot be parsed is reported,
never deleted silently; nothing here touches the work tree.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from ledger.errors import LedgerError
from ledger.git.liveness import (
    boot_id,
    lock_held,
    pid_exists,
    proc_start,
    process_table,
    take_lock,
)
from ledger.git.private import make_private_dir
from ledger.git.repo import GitRepo
from ledger.plain import FrozenPlain, Plain

JOURNAL_VERSION = 1
JOURNAL_DIR_NAME = "journal"
STAGING_PREFIX = ".pi-rewind-staging-"
"""Restores write new file contents into ``<root>/<STAGING_PREFIX><id>/`` first and rename them
into place, so a file is always either its old or its new version."""

State = Literal["writing", "done"]
_JSON_FIELDS = (
    *("id", "undo", "undo_tree", "target", "target_tree", "started_ms", "session", "entry"),
    *("operation", "state", "staging", "pid", "host", "failure", "recovering", "pid_start"),
    *("boot_id", "lock"),
)
"""A journal file's fields, the first six required: ``Journal``'s but its path and lock_fd."""


class RestoreIntent(FrozenPlain):
    """What a restore is for, set by whoever drives it (CLI, engine host) around the call."""

    __slots__ = ("agent_dir", "entry", "operation", "session")
    session: str | None
    """The session file the restore's record goes to."""
    entry: str | None
    operation: str
    agent_dir: str | None
    """Pi's agent dir: a restore never writes inside it (defence in depth)."""

    def __init__(
        self,
        session: str | None = None,
        entry: str | None = None,
        operation: str = "restore",
        agent_dir: str | None = None,
    ) -> None:
        self._init(session=session, entry=entry, operation=operation, agent_dir=agent_dir)

    def with_operation(self, operation: str) -> RestoreIntent:
        """The same intent for another operation (a recovery: ``"recover"``)."""
        return RestoreIntent(self.session, self.entry, operation, self.agent_dir)


_INTENT: contextvars.ContextVar[RestoreIntent | None] = contextvars.ContextVar(
    "rewind_restore_intent", default=None
)
_HELD: contextvars.ContextVar[list[Journal] | None] = contextvars.ContextVar(
    "rewind_held_journals", default=None
)
"""The journals whose liveness lock the outermost :func:`restore_intent` block releases."""


@contextlib.contextmanager
def restore_intent(intent: RestoreIntent) -> Iterator[RestoreIntent]:
    """Make ``intent`` the ambient one for restores started inside the ``with`` block.

    The outermost such block also owns the liveness locks of the journals opened inside it and
    releases them when it ends: a caller appends its op record inside the block, so the restore
    counts as running until the record is there (a probe that finds the lock free and no record
    has found an interrupted restore, never one about to be recorded)."""
    token = _INTENT.set(intent)
    held_token = _HELD.set([]) if _HELD.get() is None else None
    try:
        yield intent
    finally:
        if held_token is not None:
            held = _HELD.get() or []
            _HELD.reset(held_token)
            for journal in held:
                journal.release()
        _INTENT.reset(token)


@contextlib.contextmanager
def held_journals() -> Iterator[list[Journal]]:
    """Collect the journals opened inside the block *without* releasing their liveness locks
    when it ends: for a restore whose record is appended in a later event (Pi's ``/tree``
    writes the navigation first), the caller releases each (:meth:`Journal.release`) once the
    record is there or will never be. A process that dies drops them anyway."""
    held: list[Journal] = []
    token = _HELD.set(held)
    try:
        yield held
    finally:
        _HELD.reset(token)


def current_intent() -> RestoreIntent:
    return _INTENT.get() or RestoreIntent()


def recording() -> contextlib.AbstractContextManager[RestoreIntent]:
    """Around a restore and the append of its record: the restore counts as running (its
    journal's liveness lock held) until the record is there, so no other process calls it
    interrupted in between (docs/design.md#crash-safe-restore)."""
    return restore_intent(current_intent())


class JournalWriteError(LedgerError):
    """The journal could not be written: the restore did not start; nothing changed."""


class Journal(Plain):
    """One restore in progress (or interrupted)."""

    __slots__ = (
        "boot_id",
        "entry",
        "failure",
        "host",
        "id",
        "lock",
        "lock_fd",
        "operation",
        "path",
        "pid",
        "pid_start",
        "recovering",
        "session",
        "staging",
        "started_ms",
        "state",
        "target",
        "target_tree",
        "undo",
        "undo_tree",
    )
    id: str
    undo: str
    """The snapshot of the work tree before the restore: every byte it may overwrite or delete."""
    undo_tree: str
    target: str
    target_tree: str
    started_ms: int
    session: str | None
    entry: str | None
    operation: str
    state: State
    staging: str | None
    """The staging directory (relative to the root) the restore writes into first."""
    pid: int
    host: str
    failure: str | None
    recovering: str | None
    """For a recovery: the id of the journal whose undo snapshot it restores."""
    pid_start: int | None
    """The owner's start time (``/proc/<pid>/stat`` field 22, clock ticks after boot); ``None``
    in older journals and once the owner let go (:meth:`mark_failed`)."""
    boot_id: str | None
    lock: bool
    """The owner holds ``<started>-<id>.lock`` (the liveness proof); ``False`` in older journals
    and where the file system has no ``flock`` (then the identity is the proof)."""
    path: Path
    lock_fd: int | None
    """In the owner only: the descriptor holding the lock."""

    def __init__(
        self,
        id: str,
        undo: str,
        undo_tree: str,
        target: str,
        target_tree: str,
        started_ms: int,
        session: str | None = None,
        entry: str | None = None,
        operation: str = "restore",
        state: State = "writing",
        staging: str | None = None,
        pid: int = 0,
        host: str = "",
        failure: str | None = None,
        recovering: str | None = None,
        pid_start: int | None = None,
        boot_id: str | None = None,
        lock: bool = False,
        path: Path = Path(),
        lock_fd: int | None = None,
    ) -> None:
        self.id = id
        self.undo = undo
        self.undo_tree = undo_tree
        self.target = target
        self.target_tree = target_tree
        self.started_ms = started_ms
        self.session = session
        self.entry = entry
        self.operation = operation
        self.state = state
        self.staging = staging
        self.pid = pid
        self.host = host
        self.failure = failure
        self.recovering = recovering
        self.pid_start = pid_start
        self.boot_id = boot_id
        self.lock = lock
        self.path = path
        self.lock_fd = lock_fd

    def _names(self) -> tuple[str, ...]:
        # As the dataclass's fields: path and lock_fd not compared, only the path shown (repr).
        return tuple(name for name in self.__slots__ if name not in ("lock_fd", "path"))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in (*self._names(), "path"))
        return f"Journal({shown})"

    @property
    def started(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_ms / 1000))

    @property
    def lock_path(self) -> Path:
        return self.path.parent / (self.path.stem + ".lock")

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {name: getattr(self, name) for name in _JSON_FIELDS}
        data["version"] = JOURNAL_VERSION
        return data

    # --- liveness -----------------------------------------------------------------------

    def owner_alive(self) -> bool:
        """Whether the restore that wrote this journal is still running (module docstring)."""
        if self.lock:
            held = lock_held(self.lock_path)
            if held is not None:
                return held
        return self._identity_alive()

    def owner_may_run(self) -> bool:
        """Whether the process that wrote this journal may still run. The lock is not asked: an
        owner lets go of it once its restore is over, yet may still hold the restore's record in
        memory. Its pid, start time, boot and host decide where they can be read (``/proc``);
        elsewhere (no process table: macOS, ``REWIND_PORTABLE=1``) only a pid that no process
        has proves it gone. This process, on this host, always may."""
        if self.pid == os.getpid() and self.host == socket.gethostname():
            return True
        if self.pid_start is not None and self.boot_id is not None and process_table():
            return self._identity_alive()
        return pid_exists(self.pid) is not False

    def _identity_alive(self) -> bool:
        if self.pid_start is None or self.boot_id is None or self.pid <= 0:
            return False
        # Another host's pids mean nothing here; another boot's process is gone.
        if self.host != socket.gethostname() or self.boot_id != boot_id():
            return False
        return proc_start(self.pid) == self.pid_start  # a reused pid has another start time

    def release(self) -> None:
        """Let go of the liveness lock: from now on an open journal counts as interrupted."""
        fd, self.lock_fd = self.lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the only descriptor drops the flock

    # --- transitions --------------------------------------------------------------------

    def mark_done(self) -> None:
        self.state = "done"
        # Durability: the file's bytes are fsync'd before the rename (a crash never leaves an
        # empty or half journal, which would no longer pin the undo snapshot), but not the
        # directory after it (one fsync less per restore, 1-25 ms on a busy disk). A crash that
        # loses this rename brings back the journal as first written, fsync'd with its directory
        # before any file changed: "writing", owner gone, i.e. an interrupted restore, whose
        # recovery ('rewind undo') restores the undo snapshot, itself journaled and undoable.
        # The way back is never lost; only the crash's aftermath asks for one undo more. A kill
        # of the process alone loses nothing: the rename is in the kernel once it returns.
        with contextlib.suppress(OSError):  # still "writing" on disk: reported, and undo works
            _write(self.path, self, durable_name=False)

    def mark_failed(self, failure: str) -> None:
        """The rollback failed: the restore is over and interrupted (``rewind undo`` finishes
        it), whether or not this process lives on."""
        self.failure = failure
        self.state = "writing"
        self.pid_start = None  # the identity no longer claims the journal (no-flock file systems)
        with contextlib.suppress(OSError):  # the journal as first written still says "writing"
            _write(self.path, self)
        self.release()

    def close(self, *, durable: bool = True) -> None:
        """Remove the journal. ``durable=False`` skips the directory's ``fsync`` (~10 ms): for
        a ``done`` journal whose record is found. A crash of the machine may bring it back as the
        same ``done`` journal with the same record, settled again at the next look
        (:func:`settle`), or, since the ``done`` mark is not made durable either
        (:meth:`mark_done`), as the journal first written: an interrupted restore, which
        ``rewind undo`` takes back from its undo snapshot. No byte is lost either way."""
        # The journal goes before its lock file: a probe that finds no lock re-checks that the
        # journal still exists (see settle).
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.lock_path)
        if durable:
            _fsync_dir(self.path.parent)
        self.release()


def journal_dir(repo: GitRepo) -> Path:
    return repo.git_dir / "pi-rewind" / JOURNAL_DIR_NAME


def open_journal(
    repo: GitRepo,
    *,
    undo: str,
    undo_tree: str,
    target: str,
    target_tree: str,
    staging: str | None,
    now_ms: int,
    recovering: str | None = None,
) -> Journal:
    """Durably record a restore about to change files (see the module docstring)."""
    intent = current_intent()
    ident = os.urandom(4).hex()
    journal = Journal(
        id=ident,
        undo=undo,
        undo_tree=undo_tree,
        target=target,
        target_tree=target_tree,
        started_ms=now_ms,
        session=intent.session,
        entry=intent.entry,
        operation=intent.operation,
        staging=staging,
        pid=os.getpid(),
        host=socket.gethostname(),
        recovering=recovering,
        pid_start=proc_start(os.getpid()),
        boot_id=boot_id(),
    )
    directory = journal_dir(repo)
    journal.path = directory / f"{now_ms}-{ident}.json"
    try:
        make_private_dir(repo.git_dir, directory.name)
        # The lock before the journal: no reader ever sees this journal without a live owner.
        journal.lock_fd = take_lock(journal.lock_path)
        journal.lock = journal.lock_fd is not None
        _write(journal.path, journal)
    except OSError as exc:
        with contextlib.suppress(OSError):  # the error to report is the one above
            journal.close()
        raise JournalWriteError(
            f"cannot write the restore journal {journal.path}: {exc.strerror or exc}",
            hint="free some space (or fix the permissions) under the repository's git "
            "directory; nothing was changed",
        ) from exc
    held = _HELD.get()
    if held is not None:
        held.append(journal)
    return journal


def release_unless_held(journal: Journal) -> None:
    """The restore function is done with ``journal``: the enclosing :func:`restore_intent` block
    keeps its lock until the caller has recorded the op; without one it is released now."""
    held = _HELD.get()
    if held is None or not any(j is journal for j in held):
        journal.release()


class UnreadableJournal(FrozenPlain):
    __slots__ = ("path", "reason")
    path: Path
    reason: str

    def __init__(self, path: Path, reason: str) -> None:
        self._init(path=path, reason=reason)


def open_journals(repo: GitRepo) -> tuple[list[Journal], list[UnreadableJournal]]:
    """Every open journal of this work tree, oldest first, and the files that are not journals."""
    directory = journal_dir(repo)
    journals: list[Journal] = []
    broken: list[UnreadableJournal] = []
    try:
        names = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return journals, broken
    for name in names:
        if not name.endswith(".json"):
            continue
        path = directory / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                raw = os.read(fd, 1 << 16)
            finally:
                os.close(fd)
            journal = _parse(raw)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            broken.append(UnreadableJournal(path, str(exc) or type(exc).__name__))
            continue
        journal.path = path
        journals.append(journal)
    journals.sort(key=lambda j: (j.started_ms, j.id))
    return journals, broken


def pinned_snapshots(repo: GitRepo) -> dict[str, str]:
    """Snapshot → why it must stay reachable: every open journal's undo snapshot."""
    return {j.undo: f"pinned: open restore journal {j.id}" for j in open_journals(repo)[0]}


def settle(
    repo: GitRepo, recorded: Callable[[Journal], bool]
) -> tuple[list[Journal], list[Journal]]:
    """Close the ``done`` journals whose op ``recorded`` finds; return the journals left open as
    (interrupted, running), each oldest first."""
    interrupted: list[Journal] = []
    running: list[Journal] = []
    for journal in open_journals(repo)[0]:
        # Liveness before the record: an owner lets go only after appending its record, so a
        # free lock seen first means the record check below sees that record if there is one.
        alive = journal.owner_alive()
        if journal.state == "done" and recorded(journal):
            journal.close(durable=False)  # brought back by a crash, it is settled again
        elif alive:
            running.append(journal)
        elif os.path.lexists(journal.path):  # else its owner closed it since we listed it
            interrupted.append(journal)
    return interrupted, running


def _parse(raw: bytes) -> Journal:
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict) or data.get("version") != JOURNAL_VERSION:
        raise ValueError("not a version-1 restore journal")
    fields = {k: data[k] for k in _JSON_FIELDS[:6]}  # required: a KeyError when missing
    fields |= {k: data[k] for k in _JSON_FIELDS[6:] if k in data}
    journal = Journal(**fields)
    if journal.state not in ("writing", "done"):
        raise ValueError(f"unknown state {journal.state!r}")
    # The owner fields pick a /proc file to read: integers and a plain string, or nothing.
    if not _is_int(journal.pid) or not isinstance(journal.host, str):
        raise ValueError("the owner's pid is not a number")
    if journal.pid_start is not None and not _is_int(journal.pid_start):
        raise ValueError("the owner's start time is not a number")
    if journal.boot_id is not None and not isinstance(journal.boot_id, str):
        raise ValueError("the owner's boot id is not a string")
    if not isinstance(journal.lock, bool):
        raise ValueError("the lock flag is not a boolean")
    for sha in (journal.undo, journal.target):
        if not (
            isinstance(sha, str) and len(sha) == 40 and all(c in "0123456789abcdef" for c in sha)
        ):
            raise ValueError("a snapshot id is not a sha")
    if journal.staging is not None and (
        not journal.staging.startswith(STAGING_PREFIX) or "/" in journal.staging
    ):
        raise ValueError("the staging directory is not one of ours")
    return journal


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# The owner's lock and identity helpers live in :mod:`ledger.git.liveness` (the store's ref lock
# and the session registry use them too); re-exported here for the journal's callers.


def _write(path: Path, journal: Journal, *, durable_name: bool = True) -> None:
    """Write ``journal`` atomically (its bytes fsync'd, then renamed into place); with
    ``durable_name`` the directory is fsync'd too, so that the new name survives a crash."""
    data = json.dumps(journal.to_json(), ensure_ascii=False, sort_keys=True).encode("utf-8")
    tmp = path.with_name(f".{path.name}.{os.urandom(3).hex()}.tmp")
    # The temporary is its own lock (ledger/git/owned.py), held from creation through the
    # rename: one a kill leaves is named by `rewind doctor` and removed by `rewind sweep`
    # (ledger/git/store/leftovers.py), a live writer's never.
    fd = take_lock(tmp)
    if fd is None:  # no flock here: a plain temporary (named by nothing, as before)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            os.replace(tmp, path)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable_name:
        _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def restore_open(repo: GitRepo) -> bool:
    """Whether any restore journal of ``repo`` is open (a restore running, or interrupted)."""
    return bool(open_journals(repo)[0])


__all__ = [
    "STAGING_PREFIX",
    "Journal",
    "JournalWriteError",
    "RestoreIntent",
    "UnreadableJournal",
    "boot_id",
    "current_intent",
    "held_journals",
    "journal_dir",
    "lock_held",
    "open_journal",
    "open_journals",
    "pinned_snapshots",
    "proc_start",
    "recording",
    "release_unless_held",
    "restore_intent",
    "restore_open",
    "settle",
    "take_lock",
]
