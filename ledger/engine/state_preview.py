"""The preview of a state before a past file operation, as ``/rewind`` shows it
(docs/pi.md#rewind): what restoring the files as they were before operation OP would change.

Why it exists: a state before a past rewind is a point of the ``/rewind`` list like a prompt's,
so its preview says the same things (the files with their line counts, the user's own work and
other sessions' agents' files it would overwrite, the plan's refusals; :func:`ledger.engine.
preview.fill_plan`), plus the work this session's agent did since the last file rewind that it
takes back. Restoring it is ``rewind undo --to OP`` (:func:`ledger.engine.history.undo_to`,
the only restore path for it): one more undoable operation at the leaf.

Invariants: read-only (the plan's own capture, nothing appended); the one file action is
offered only when that plan can run now (not refused, no other session's turn running).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.engine.past_states import (
    agent_since,
    last_rewind_tree,
    paths_of,
    since_note,
    state_label,
)
from ledger.engine.preview import busy_elsewhere, fill_plan
from ledger.engine.preview_model import Action, Preview

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext as Engine

RESTORE_STATE = "Restore these files (keep the conversation)"


def state_preview(engine: Engine, operation: str) -> Preview:
    """What restoring the files as they were before ``operation`` (an id or a unique prefix,
    through the lineage) would change, file by file, and whether it can run now."""
    from ledger.engine.history import find_operation

    op = find_operation(engine, operation)
    label = state_label(engine, op)
    target = op.before if op.before and engine.repo.commit_exists(op.before) else None
    title = "Restore the f" + label[1:]
    result = Preview(op.record, label, target, title=title, operation=op.record)
    if target is None:
        why = (
            f"it changed no file ({op.kind}), so it recorded no state before it"
            if op.before is None
            else f"its before snapshot {op.before[:12]} was pruned by retention"
        )
        result.missing = f"Files cannot be restored: {why}"
        result.actions = _actions(why)
        return result
    refused = fill_plan(engine, result, target)
    if refused is None and result.current_tree is not None:
        not_agents = [*(c.path for c in result.own), *paths_of(result.others)]
        since = last_rewind_tree(engine)
        extra = agent_since(engine, result.current_tree, since, result.counts, not_agents)
        note = since_note(extra, top=False).removeprefix(" — ")
        result.note = note[:1].upper() + note[1:] if note else None
    result.actions = _actions(refused or busy_elsewhere(engine))
    return result


def _actions(why: str | None) -> list[Action]:
    return [
        Action("undo-to", RESTORE_STATE, why is None, why),
        Action("cancel", "Cancel", True),
    ]


__all__ = ["RESTORE_STATE", "state_preview"]
