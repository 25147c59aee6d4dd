"""A fork's child takes its parent's hand-off (docs/design.md#the-fork-hand-off).

Why it exists: ``/fork`` with a restore changes the files in the parent and writes a
``rewind-fork-pending`` record there; the child session, at its ``session_start`` with reason
``fork``, records the same ``{current, undo}`` as its own op, so that its undo brings back the
files from before the fork's restore. Kept apart from the engine so that it reads as one rule.

Invariants (D13): the hand-off is imported only by the fork it was written for (nothing was
appended to the parent after it), at most once (a reload of the child imports nothing), and only
with snapshots that still exist. Appends nothing else; never raises for an unreadable parent (a
warning says the state was not imported). The import makes no authorship record: the restore it
repeats was recorded by the parent (docs/authorship.md#rebuild).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.engine import messages as M
from ledger.errors import LedgerError
from ledger.records import OP

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext
    from ledger.engine.results import EventResult


def import_fork(engine: EngineContext, parent_file: str, result: EventResult) -> None:
    """Record the parent's hand-off in the child ``engine``'s session (see the module)."""
    try:
        parent = engine.reader.load(parent_file, full=True)
    except LedgerError as exc:
        result.warn(f"Rewind: parent session unreadable, fork state not imported ({exc.message})")
        return
    pending = parent.view.fork_pending
    session = parent.session
    # D13: the hand-off is for this fork only if nothing was appended to the parent after it
    # (a cancelled fork's record is followed by the parent's next entries, or superseded).
    if (
        pending is None
        or session is None
        or not session.entries
        or session.entries[-1].id != pending.record_id
    ):
        return
    if any(e.custom_type == OP and e.id not in session.by_id for e in engine.session().entries):
        return  # already imported (a reload of the child); copied records share the parent's ids
    repo = engine.repo
    if not pending.current or not repo.commit_exists(pending.current):
        return
    undo = pending.undo if pending.undo and repo.commit_exists(pending.undo) else None
    engine.append_op(current=pending.current, undo=undo)
    if undo is not None:
        result.show(*_fork_panel(engine, undo, pending.current), M.UNDO_HINT)


def _fork_panel(engine: EngineContext, undo: str, current: str) -> list[str]:
    """The panel's lines for what the fork's restore changed (undo → current); the bare line
    when the trees cannot be read (a courtesy: the import itself is done)."""
    from ledger.git.trees import diff_trees

    try:
        added, modified, deleted = diff_trees(engine.repo, undo, current)
    except (LedgerError, OSError):
        return [M.PANEL_FORK_RESTORED]
    return M.panel_fork_restored(_Changed(added, modified, deleted))


class _Changed:
    """A restore's changed paths, as the panel words read them (:func:`M.changes`)."""

    def __init__(self, added: tuple[str, ...], modified: tuple[str, ...], deleted: tuple[str, ...]):
        self.added, self.modified, self.deleted = added, modified, deleted


__all__ = ["import_fork"]
