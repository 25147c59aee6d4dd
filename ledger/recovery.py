"""Finding and finishing interrupted restores: the session side of the restore journal.

Why it exists: :mod:`ledger.git.restore.journal` knows which restores of a work tree started and did not
finish, but only the session's ledger can say whether a finished restore was *recorded*. This
module joins the two (docs/design.md#crash-safe-restore):

- :func:`settle_journals` closes every ``done`` journal whose session holds a record naming its
  undo snapshot, written at or after the journal started. What stays open and has no live owner
  (:meth:`Journal.owner_alive <ledger.git.restore.journal.Journal.owner_alive>`) is an interruption:
  files possibly mixed (``writing``: killed, out of space, a failed rollback) or changed without
  a record (``done``: the append failed). What stays open with a live owner is a restore that is
  still *running*: :func:`journal_states` returns those too, and :func:`wait_for_running` waits
  (bounded) until none is left, so that commands act on the finished state instead of calling a
  running restore interrupted.
- :func:`interrupted_of` picks the interrupted restore an undo of one session finishes, and
  :func:`recover` finishes it: it restores the journal's undo snapshot (every byte from before
  that restore; itself undoable, journaled and verified), records an op in the session so the
  branch state is right again, and closes the journal. Every undo uses them, through
  :mod:`ledger.engine.undo_target`: ``rewind undo``, ``/rewind``'s undo and the ``/tree`` and
  ``/fork`` menus.
- A session's records are looked for in its file, and also in the session as its host holds it
  (:class:`HeldSession`: Pi's entries through the bridge, which Pi writes to the file lazily).

Invariants: a journal is closed only when its restore is recorded or undone; a journal whose
owner is alive is never reported, refused or recovered as interrupted; recovery never needs the
interrupted process's op record, and is recorded (an op appended while its own journal's
liveness lock is held) before anything reads it as finished; nothing here prints.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import InterruptedRestoreError, LedgerError, RestoreRunningError
from ledger.git.capture.index import LOCK_TIMEOUT_S
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import (
    Journal,
    current_intent,
    open_journals,
    restore_intent,
    settle,
)
from ledger.ledgerview import LedgerView
from ledger.plain import FrozenPlain, Plain
from ledger.session.model import Session
from ledger.session.store import read_session

if TYPE_CHECKING:
    # The engine imports this module to report interrupted restores: recovery names only the
    # protocol of what it uses of an engine, so no import, not even a type's, runs back to it.
    from ledger.engine.context import EngineContext


class HeldSession(FrozenPlain):
    """A session as its host holds it now. Pi keeps its entries in memory and writes the file
    lazily, so the op record of a restore made through the bridge may be there before it is in
    the file; the journals of this session are found recorded in either."""

    __slots__ = ("path", "read")
    path: str
    """The session file's real path, as journals name their session."""
    read: Callable[[], Session]

    def __init__(self, path: str, read: Callable[[], Session]) -> None:
        self._init(path=path, read=read)


def held_session(engine: EngineContext) -> HeldSession | None:
    """The engine's session as its host holds it (None for a host without a session file)."""
    session_file = engine.host.session_file
    if session_file is None:
        return None
    return HeldSession(os.path.realpath(session_file), engine.session)


def _names_undo(view: LedgerView, journal: Journal) -> bool:
    return any(
        ref.snapshot == journal.undo
        and ref.kind in ("undo", "fork-pending")
        and ref.timestamp_ms >= journal.started_ms
        for ref in view.references
    )


def _recorded(journal: Journal, held: HeldSession | None = None) -> bool:
    if journal.session is None:
        return True  # nothing could record it: the restore closed such journals itself
    if _session_gone(journal):
        return True
    if held is not None and os.path.realpath(journal.session) == held.path:
        try:
            if _names_undo(LedgerView.of(held.read()), journal):
                return True
        except LedgerError:
            pass  # the host could not answer: the file decides
    try:
        view = LedgerView.of(read_session(journal.session))
    except LedgerError:
        return False
    return _names_undo(view, journal)


def _session_gone(journal: Journal) -> bool:
    """A finished restore (``done``: every file written and verified) whose session file no
    longer exists and whose owner process has ended: nothing can ever record it. It is closed as
    the journal of a restore without a session is; its undo snapshot stays in the store under
    the retention policy. Kept open, it refused every later restore of the repository with a
    hint (``rewind undo SESSION``) that could not work on a deleted session (docs/defects.md).
    A ``writing`` journal is never closed so: its files may be between two states. An owner
    that may still run may hold the record in memory (Pi writes a new session's file lazily)."""
    assert journal.session is not None
    return (
        journal.state == "done"
        and not os.path.lexists(journal.session)
        and not journal.owner_may_run()
    )


RUNNING_WAIT_S = LOCK_TIMEOUT_S
"""How long a command waits for a running restore: as long as for the capture lock that
restore holds while it writes files."""


def settle_journals(repo: GitRepo, held: HeldSession | None = None) -> list[Journal]:
    """Close the journals of recorded restores (``held``: a session as its host holds it, see
    :class:`HeldSession`); return the interrupted ones (owner gone), oldest first. Running
    restores are left alone (:func:`journal_states`)."""
    return settle(repo, lambda journal: _recorded(journal, held))[0]


def journal_states(repo: GitRepo) -> tuple[list[Journal], list[Journal]]:
    """Close the journals of recorded restores; return (interrupted, running), oldest first."""
    return settle(repo, _recorded)


def running_error(
    repo: GitRepo, journal: Journal, waited_s: float | None = None
) -> RestoreRunningError:
    return RestoreRunningError(
        journal.pid, repo.root, target=journal.target, started=journal.started, waited_s=waited_s
    )


def running_message(journal: Journal) -> str:
    """``a restore is running (pid N)…``: the words every command uses for a live journal."""
    return (
        f"a restore is running (pid {journal.pid}): to {journal.target[:12]}, started "
        f"{journal.started}"
    )


def wait_for_running(
    repo: GitRepo,
    *,
    timeout_s: float | None = None,
    notify: Callable[[str], None] | None = None,
) -> None:
    """Return once no restore of this work tree is running (its files written and its record
    appended, or its owner gone: then it is an interrupted one, for the caller to handle).
    ``notify`` is told once, when there is something to wait for. Raises
    :class:`RestoreRunningError` after ``timeout_s`` (default :data:`RUNNING_WAIT_S`); nothing
    was changed then."""
    if timeout_s is None:
        timeout_s = RUNNING_WAIT_S
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    told = False
    while True:
        running = settle(repo, _recorded)[1]
        if not running:
            return
        newest = running[-1]
        if time.monotonic() >= deadline:
            raise running_error(repo, newest, waited_s=timeout_s)
        if not told and notify is not None:
            notify(f"{running_message(newest)}; waiting for it to finish (up to {timeout_s:.0f} s)")
            told = True
        # Polling, not a blocking flock: the wait stays bounded, and a journal whose owner is
        # known by identity only (no flock on this file system) is waited for the same way.
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.2)


def interruption_error(journal: Journal) -> InterruptedRestoreError:
    return InterruptedRestoreError(
        journal.undo,
        journal.target,
        session=_session_name(journal),
        entry=journal.entry,
        started=journal.started,
        state=journal.state,
    )


def refuse_if_interrupted(repo: GitRepo) -> None:
    """Raise :class:`InterruptedRestoreError` for the newest interrupted restore, if any."""
    left = settle_journals(repo)
    if left:
        raise interruption_error(left[-1])


def _session_name(journal: Journal) -> str | None:
    return str(journal.session) if journal.session else None


class RecoveryReport(Plain):
    __slots__ = (
        "added",
        "changed",
        "deleted",
        "interrupted_target",
        "journal",
        "modified",
        "record",
        "restored_to",
        "session",
        "undo",
    )
    journal: str
    session: str | None
    restored_to: str
    interrupted_target: str
    changed: bool
    added: list[str]
    modified: list[str]
    deleted: list[str]
    undo: str | None
    record: str | None

    def __init__(
        self,
        journal: str,
        session: str | None,
        restored_to: str,
        interrupted_target: str,
        changed: bool,
        added: list[str] | None = None,
        modified: list[str] | None = None,
        deleted: list[str] | None = None,
        undo: str | None = None,
        record: str | None = None,
    ) -> None:
        self.journal = journal
        self.session = session
        self.restored_to = restored_to
        self.interrupted_target = interrupted_target
        self.changed = changed
        self.added = [] if added is None else added
        self.modified = [] if modified is None else modified
        self.deleted = [] if deleted is None else deleted
        self.undo = undo
        self.record = record

    def to_json(self) -> dict[str, object]:
        return {
            "recovered": self.journal,
            "session": self.session,
            "target": self.restored_to,
            "interruptedTarget": self.interrupted_target,
            "changed": self.changed,
            "added": self.added,
            "modified": self.modified,
            "deleted": self.deleted,
            "undo": self.undo,
            "record": self.record,
            "mode": "recover",
        }


def recover(engine: EngineContext, journal: Journal) -> RecoveryReport:
    """Bring the work tree back to ``journal``'s undo snapshot and record it in the engine's
    session (see the module docstring). ``journal`` was chosen earlier: when another process
    recovered it meanwhile, the restore raises :class:`~ledger.errors.AlreadyRecoveredError`
    under the capture lock and nothing is changed or appended (one record per recovery)."""
    session_file = engine.host.session_file
    intent = current_intent().with_operation("recover")
    # The outermost intent block keeps the recovery's own journal locked until its op record is
    # appended: no other process (nor a settle here) takes it for an interrupted one meanwhile.
    with restore_intent(intent):
        outcome = engine.restore_files(journal.undo, recovering=journal)
        # The branch's state is the pre-restore one again; the record also keeps that snapshot
        # live, and makes this recovery undoable (back to the files it found).
        record = engine.append_op(current=journal.undo, undo=outcome.undo_commit)
    settle_journals(engine.repo, held_session(engine))
    return RecoveryReport(
        journal.id,
        os.path.realpath(session_file) if session_file else None,
        journal.undo,
        journal.target,
        outcome.changed,
        list(outcome.plan.added),
        list(outcome.plan.modified),
        list(outcome.plan.deleted),
        outcome.undo_commit,
        record,
    )


class Interrupted(FrozenPlain):
    """The interrupted restores an undo of one session sees (:func:`interrupted_of`)."""

    __slots__ = ("mine", "newest")
    mine: Journal | None
    """The one an undo of this session finishes (following an interrupted recovery back to the
    restore it was recovering); None when this session has none."""
    newest: Journal | None
    """The newest interrupted restore of the work tree, of any session."""

    def __init__(self, mine: Journal | None, newest: Journal | None) -> None:
        self._init(mine=mine, newest=newest)


def interrupted_of(
    repo: GitRepo, session: Path | str | None, held: HeldSession | None = None
) -> Interrupted:
    """Close the journals of recorded restores, then find the interrupted restore an undo of
    ``session`` finishes: the newest one of that session, or of no session. A running restore
    (its owner alive) is never one."""
    left = settle_journals(repo, held)
    if not left:
        return Interrupted(None, None)
    mine_path = os.path.realpath(session) if session is not None else None
    mine = [
        j
        for j in left
        if j.session is None or mine_path is None or os.path.realpath(j.session) == mine_path
    ]
    if not mine:
        return Interrupted(None, left[-1])
    chosen = mine[-1]
    # A recovery that was itself interrupted: its undo snapshot is the mixed tree it started
    # from; the state to bring back is the one before the restore it was recovering.
    by_id = {j.id: j for j in left}
    while chosen.recovering is not None and chosen.recovering in by_id:
        chosen = by_id[chosen.recovering]
    return Interrupted(chosen, left[-1])


def newest_interrupted(
    repo: GitRepo, session: Path | str | None, held: HeldSession | None = None
) -> Journal | None:
    """The interrupted restore ``rewind undo`` should finish for ``session`` (the newest one of
    that session, or of no session); None when there is none. Raises
    :class:`InterruptedRestoreError` when only another session's restore was interrupted."""
    found = interrupted_of(repo, session, held)
    if found.mine is None and found.newest is not None:
        raise interruption_error(found.newest)
    return found.mine


__all__ = [
    "RUNNING_WAIT_S",
    "HeldSession",
    "Interrupted",
    "RecoveryReport",
    "held_session",
    "interrupted_of",
    "interruption_error",
    "journal_states",
    "newest_interrupted",
    "open_journals",
    "recover",
    "refuse_if_interrupted",
    "running_error",
    "running_message",
    "settle_journals",
    "wait_for_running",
]
