"""The one "Undo last file rewind": which files it brings back, and bringing them back.

Why it exists: ``rewind undo`` used to be the only undo that looked at the restore journals. A
bridge killed in the middle of a restore leaves an open journal and no op record, so ``/rewind``'s
undo, and the ``/tree`` and ``/fork`` menus, which read only the branch's recorded undo, said
"nothing to undo" while ``rewind undo`` brought back every byte (issue 32). Every undo now asks
this module: ``rewind undo`` and ``/rewind``'s undo through :func:`ledger.engine.operations.undo`,
the menus through :meth:`Engine._undo_files <ledger.engine.engine.Engine>`, and what they offer
(the ``/rewind`` list's undo row, the menus' option) through :meth:`Engine.undo_point`.

Invariants (docs/design.md#crash-safe-restore):

- An interrupted restore of this session (its journal open, its owner gone) comes first: the
  undo is its recovery (:func:`ledger.recovery.recover`), back to the snapshot taken before it;
  a recovery that was itself interrupted leads back to the restore it was recovering. Else the
  undo is the branch's recorded one (``undo`` of the branch state), if its snapshot still exists.
- A journal whose owner is alive (a restore still running, in this process or another) is never
  an undo target, never recovered from under it.
- The target is chosen before the restore takes the capture lock, so two undos (Pi's menu and
  ``rewind undo``) may choose the same interrupted restore: the second is refused under the lock
  (:class:`~ledger.errors.AlreadyRecoveredError`), changes nothing and records nothing.
- An interrupted restore of another session refuses the undo (:class:`InterruptedRestoreError`
  naming it, as ``rewind undo`` always did), before anything changes; what is *offered*
  (:func:`find_undo`) still shows this session's undo, and choosing it says why it cannot run.
- Every undo is recorded: one ``rewind-op`` (``current`` = the snapshot brought back, ``undo`` =
  the files it replaced), appended while the restore's journal is still locked, so it is
  undoable in turn and no other process takes it for interrupted in between.
- Nothing here prints; notices go into the caller's :class:`EventResult`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.engine import messages as M
from ledger.errors import LedgerError, NothingToUndoError
from ledger.git.restore.journal import recording
from ledger.plain import FrozenPlain
from ledger.recovery import Interrupted, held_session, interrupted_of, interruption_error, recover

if TYPE_CHECKING:
    # Type names only; the engine imports this module, so it names the engine's protocol
    # (ledger/engine/context.py), never ledger.engine.engine.
    from ledger.engine.context import EngineContext
    from ledger.engine.results import EventResult
    from ledger.git.restore.journal import Journal
    from ledger.git.restore.plan import RestorePlan


class UndoTarget(FrozenPlain):
    """What an undo brings back: ``snapshot`` (the files), the ``entry`` the undone rewind went
    to, and the ``interrupted`` restore it finishes (None: the branch's recorded undo)."""

    __slots__ = ("entry", "interrupted", "snapshot")
    snapshot: str
    entry: str | None
    interrupted: Journal | None

    def __init__(
        self, snapshot: str, entry: str | None = None, interrupted: Journal | None = None
    ) -> None:
        self._init(snapshot=snapshot, entry=entry, interrupted=interrupted)


class UndoDone(FrozenPlain):
    """An undo that ran: the paths it changed, the snapshot of the files it replaced (``undo``,
    None when none changed) and its op record; ``notes`` for the panel."""

    __slots__ = ("added", "changed", "deleted", "modified", "record", "target", "undo")
    target: UndoTarget
    changed: bool
    added: tuple[str, ...]
    modified: tuple[str, ...]
    deleted: tuple[str, ...]
    undo: str | None
    record: str

    def __init__(
        self,
        target: UndoTarget,
        changed: bool,
        added: tuple[str, ...],
        modified: tuple[str, ...],
        deleted: tuple[str, ...],
        undo: str | None,
        record: str,
    ) -> None:
        self._init(
            target=target,
            changed=changed,
            added=added,
            modified=modified,
            deleted=deleted,
            undo=undo,
            record=record,
        )

    @property
    def notes(self) -> list[str]:
        journal = self.target.interrupted
        return [] if journal is None else [interrupted_note(journal)]


def interrupted_note(journal: Journal) -> str:
    """The panel's line for an undo that finished an interrupted restore."""
    return (
        f"Rewind: the restore to {journal.target[:12]} (started {journal.started}) had been "
        "interrupted; every file is back as it was before it"
    )


def _interrupted(engine: EngineContext) -> Interrupted:
    session_file = engine.host.session_file
    return interrupted_of(engine.repo, session_file, held_session(engine))


def _from_journal(journal: Journal) -> UndoTarget:
    return UndoTarget(journal.undo, journal.entry, journal)


def _recorded_undo(engine: EngineContext) -> UndoTarget | None:
    state = engine.branch_state()
    if state.undo is None or not engine.repo.commit_exists(state.undo):
        return None
    return UndoTarget(state.undo, state.undo_from)


def find_undo(engine: EngineContext) -> UndoTarget | None:
    """What "Undo last file rewind" would bring back now, for offering it (None: nothing to
    undo). See the module docstring for the order."""
    found = _interrupted(engine)
    if found.mine is not None:
        return _from_journal(found.mine)
    return _recorded_undo(engine)


def require_undo(engine: EngineContext) -> UndoTarget:
    """What an undo brings back now, or why it cannot run: :class:`NothingToUndoError`, or
    :class:`~ledger.errors.InterruptedRestoreError` for another session's interrupted restore.
    Changes nothing."""
    found = _interrupted(engine)
    if found.mine is not None:
        return _from_journal(found.mine)
    if found.newest is not None:
        raise interruption_error(found.newest)
    recorded = _recorded_undo(engine)
    if recorded is not None:
        return recorded
    session_id = engine.session().id
    undo = engine.branch_state().undo
    if undo is None:
        raise NothingToUndoError(session_id)
    raise NothingToUndoError(session_id, reason=f"its snapshot {undo[:12]} was pruned")


def undo_files(
    engine: EngineContext, target: UndoTarget, *, planned: RestorePlan | None = None
) -> UndoDone:
    """Bring back ``target`` (from :func:`require_undo`) and record it; raises before changing
    anything when the restore refuses, and rolls back when it fails. ``planned``: the plan
    shown for it (its scan is reused when still current)."""
    if target.interrupted is not None:
        report = recover(engine, target.interrupted)
        return UndoDone(
            target,
            report.changed,
            tuple(report.added),
            tuple(report.modified),
            tuple(report.deleted),
            report.undo,
            report.record or "",
        )
    with recording():  # the restore counts as running until its op record is appended
        outcome = engine.restore_files(target.snapshot, planned=planned)
        record = engine.append_op(current=target.snapshot, undo=outcome.undo_commit)
    plan = outcome.plan
    return UndoDone(
        target,
        outcome.changed,
        tuple(plan.added),
        tuple(plan.modified),
        tuple(plan.deleted),
        outcome.undo_commit,
        record,
    )


def report_interrupted(engine: EngineContext, result: EventResult) -> None:
    """At session start: an interrupted restore of this work tree is said at once, with what
    brings every file back (for this session's own, the undo in its menus as well)."""
    try:
        found = _interrupted(engine)
    except (LedgerError, OSError) as exc:
        result.warn(f"Rewind: cannot read the restore journals ({exc})")
        return
    journal = found.mine or found.newest
    if journal is None:
        return
    error = interruption_error(journal)
    menus = f'"{M.UNDO}" (in /rewind, /tree or /fork) or ' if found.mine is not None else ""
    result.warn(f"Rewind: {error.message}; {menus}{error.hint}")


__all__ = [
    "UndoDone",
    "UndoTarget",
    "find_undo",
    "interrupted_note",
    "report_interrupted",
    "require_undo",
    "undo_files",
]
