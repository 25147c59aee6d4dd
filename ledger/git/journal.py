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
2. When the files are written and verified, the journal is marked ``done``. It is closed
   (deleted) when the caller has recorded the op (:func:`settle` checks the session's ledger for a
   record naming the undo snapshot) or, without a session, at once.
3. A rollback that succeeds closes the journal (the work tree is as before; nothing to record).
   A rollback that fails leaves it ``writing``, with the failure.

Every later ``rewind`` command and the bridge read :func:`open_journals`: restores refuse while a
``writing`` journal is open, ``rewind undo`` returns to its undo snapshot, ``rewind doctor`` exits
1, and the retention sweep pins every open journal's undo snapshot.

Invariants: journals live only in our private directory; writing one is atomic (temporary file,
fsync, rename, fsync of the directory); a journal that cannot be parsed is reported, never
deleted silently; nothing here touches the work tree.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from ledger.errors import LedgerError
from ledger.git.repo import GitRepo

JOURNAL_VERSION = 1
JOURNAL_DIR_NAME = "journal"
STAGING_PREFIX = ".pi-rewind-staging-"
"""Restores write new file contents into ``<root>/<STAGING_PREFIX><id>/`` first and rename them
into place, so a file is always either its old or its new version."""

State = Literal["writing", "done"]


@dataclass(frozen=True)
class RestoreIntent:
    """What a restore is for, set by whoever drives it (CLI, engine host) around the call."""

    session: str | None = None
    """The session file the restore's record goes to."""
    entry: str | None = None
    operation: str = "restore"
    agent_dir: str | None = None
    """Pi's agent dir: a restore never writes inside it (defence in depth)."""


_INTENT: contextvars.ContextVar[RestoreIntent | None] = contextvars.ContextVar(
    "rewind_restore_intent", default=None
)


@contextlib.contextmanager
def restore_intent(intent: RestoreIntent) -> Iterator[RestoreIntent]:
    """Make ``intent`` the ambient one for restores started inside the ``with`` block."""
    token = _INTENT.set(intent)
    try:
        yield intent
    finally:
        _INTENT.reset(token)


def current_intent() -> RestoreIntent:
    return _INTENT.get() or RestoreIntent()


class JournalWriteError(LedgerError):
    """The journal could not be written: the restore did not start; nothing changed."""


@dataclass
class Journal:
    """One restore in progress (or interrupted)."""

    id: str
    undo: str
    """The snapshot of the work tree before the restore: every byte it may overwrite or delete."""
    undo_tree: str
    target: str
    target_tree: str
    started_ms: int
    session: str | None = None
    entry: str | None = None
    operation: str = "restore"
    state: State = "writing"
    staging: str | None = None
    """The staging directory (relative to the root) the restore writes into first."""
    pid: int = 0
    host: str = ""
    failure: str | None = None
    recovering: str | None = None
    """For a recovery: the id of the journal whose undo snapshot it restores."""
    path: Path = field(default=Path(), compare=False)

    @property
    def started(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_ms / 1000))

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data.pop("path")
        data["version"] = JOURNAL_VERSION
        return data

    # --- transitions --------------------------------------------------------------------

    def mark_done(self) -> None:
        self.state = "done"
        with contextlib.suppress(OSError):  # still "writing" on disk: reported, and undo works
            _write(self.path, self)

    def mark_failed(self, failure: str) -> None:
        self.failure = failure
        self.state = "writing"
        with contextlib.suppress(OSError):  # the journal as first written still says "writing"
            _write(self.path, self)

    def close(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        _fsync_dir(self.path.parent)


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
    ident = secrets.token_hex(4)
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
    )
    directory = journal_dir(repo)
    journal.path = directory / f"{now_ms}-{ident}.json"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _write(journal.path, journal)
    except OSError as exc:
        raise JournalWriteError(
            f"cannot write the restore journal {journal.path}: {exc.strerror or exc}",
            hint="free some space (or fix the permissions) under the repository's git "
            "directory; nothing was changed",
        ) from exc
    return journal


@dataclass(frozen=True)
class UnreadableJournal:
    path: Path
    reason: str


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


def settle(repo: GitRepo, recorded: Callable[[Journal], bool]) -> list[Journal]:
    """Close the ``done`` journals whose op ``recorded`` finds; return the journals left open."""
    left: list[Journal] = []
    for journal in open_journals(repo)[0]:
        if journal.state == "done" and recorded(journal):
            journal.close()
        else:
            left.append(journal)
    return left


def _parse(raw: bytes) -> Journal:
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict) or data.get("version") != JOURNAL_VERSION:
        raise ValueError("not a version-1 restore journal")
    fields = {
        k: data[k] for k in ("id", "undo", "undo_tree", "target", "target_tree", "started_ms")
    }
    for key in (
        "session",
        "entry",
        "operation",
        "state",
        "staging",
        "pid",
        "host",
        "failure",
        "recovering",
    ):
        if key in data:
            fields[key] = data[key]
    journal = Journal(**fields)
    if journal.state not in ("writing", "done"):
        raise ValueError(f"unknown state {journal.state!r}")
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


def _write(path: Path, journal: Journal) -> None:
    data = json.dumps(journal.to_json(), ensure_ascii=False, sort_keys=True).encode("utf-8")
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(3)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = [
    "STAGING_PREFIX",
    "Journal",
    "JournalWriteError",
    "RestoreIntent",
    "UnreadableJournal",
    "current_intent",
    "journal_dir",
    "open_journal",
    "open_journals",
    "pinned_snapshots",
    "restore_intent",
    "settle",
]
