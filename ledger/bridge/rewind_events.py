"""The ``/rewind`` command's events: list, preview, diff, apply, and the one-shot intent that lets
a ``/tree`` or ``/fork`` started by ``/rewind`` skip its menu (docs/pi.md#rewind).

Why it exists: ``/rewind`` is ours, not Pi's, so its events are not Pi events. The extension
sends them like any other event (one in flight at a time, with the same calls back for session
facts and appends), and each action goes through the same engine operation and writes the same
records as the menu choice it stands for:

- ``rewind_list`` → :func:`ledger.engine.preview.list_points`;
- ``rewind_preview`` ``{entryId}`` → :func:`ledger.engine.preview.preview`, ``{operation}`` →
  :func:`ledger.engine.state_preview.state_preview` (the state before a past file operation);
- ``rewind_diff`` ``{entryId, path, operation?}`` → :func:`ledger.engine.preview.file_diff`;
- ``rewind_apply`` ``{action: "files"|"undo", entryId?}``: "Code only" / "Undo last file rewind"
  (a restore and an op at the leaf, :mod:`ledger.engine.operations`); ``{action: "undo-to",
  operation}``: ``rewind undo --to OP`` (:func:`ledger.engine.history.undo_to`);
- ``rewind_intent`` ``{action: "both"|"conversation"|"fork", entryId}``: the extension then calls
  Pi's ``ctx.navigateTree`` / ``ctx.fork``; the ``session_before_tree`` / ``session_before_fork``
  that follows for that entry answers its menu with "Restore files to that point", "Keep current
  files" or "Restore all" without showing it. So the records are exactly ``/tree``'s and
  ``/fork``'s. An intent is used once, and dropped by the next prompt. A ``fork`` intent is
  refused for an entry Pi will not fork at (it forks only from a prompt, a user message), and
  so is the ``session_before_fork`` for such an entry (:func:`fork_refused`): nothing changes.

Invariants: list, preview and diff append nothing; a refused apply raises before anything
changes (:class:`~ledger.errors.LedgerError` → an ``error`` reply with the message).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger.engine import messages as M
from ledger.errors import LedgerError

if TYPE_CHECKING:
    from ledger.bridge.protocol import EventMessage
    from ledger.bridge.state import BridgeState
    from ledger.engine.engine import Choose, Engine, EventResult

INTENT_CHOICES: dict[str, dict[str, str]] = {
    "tree": {"both": M.TREE_RESTORE, "conversation": M.TREE_KEEP},
    "fork": {"fork": M.FORK_RESTORE_ALL},
}
"""Which menu answer each intent stands for, per menu."""
STAY = "the conversation is unchanged"


def _text(payload: dict[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) and value else None


def _answer(data: dict[str, Any]) -> EventResult:
    from ledger.engine.engine import EventResult

    return EventResult(data=data)


def rewind_list(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    from ledger.engine.preview import MAX_POINTS, list_points

    limit = message.payload.get("limit")
    size = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
    return _answer(
        {"list": list_points(engine, limit=min(size or MAX_POINTS, MAX_POINTS)).to_json()}
    )


def rewind_preview(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    """A prompt's point (``entryId``), or the state before a past operation (``operation``)."""
    from ledger.engine.preview import preview
    from ledger.engine.state_preview import state_preview

    operation = _text(message.payload, "operation")
    if operation is not None:
        return _answer({"preview": state_preview(engine, operation).to_json()})
    entry = _text(message.payload, "entryId")
    if entry is None:
        raise LedgerError("rewind_preview needs an entryId", hint="a bug in the extension")
    return _answer({"preview": preview(engine, entry).to_json()})


def rewind_diff(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    from ledger.engine.preview import file_diff

    entry, path = _text(message.payload, "entryId"), _text(message.payload, "path")
    operation = _text(message.payload, "operation")
    if entry is None or path is None:
        raise LedgerError("rewind_diff needs an entryId and a path", hint="a bug in the extension")
    text, cut = file_diff(engine, entry, path, operation=operation)
    return _answer({"diff": text, "cut": cut})


def rewind_apply(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    """Restore files only (the "Code only" record) or undo the last file rewind."""
    from ledger.engine import operations
    from ledger.engine.engine import EventResult
    from ledger.engine.history import find_operation, undo_to
    from ledger.engine.past_states import state_label, undo_words
    from ledger.engine.undo_target import interrupted_note, require_undo

    action, entry = _text(message.payload, "action"), _text(message.payload, "entryId")
    operation = _text(message.payload, "operation")
    result = EventResult()
    if action == "undo":
        # Said as it was offered: an undo or a redo, and back to which files (read before the
        # undo appends its op, which turns the next one into the opposite).
        found = require_undo(engine)
        words = undo_words(engine, found)
        report = operations.undo(engine)
        result.info(M.FILES_RESTORED_BEFORE_REWIND)
        # An undo that finished an interrupted restore says so, as the /tree and /fork panels do.
        recovered = [] if report.interrupted is None else [interrupted_note(report.interrupted)]
        result.show(
            *M.panel_undone(report, stay=STAY, head=words.head, state=words.state),
            *recovered,
            M.REWIND_UNDO_HINT_AGAIN,
        )
    elif action == "undo-to" and operation is not None:
        # rewind undo --to OP: the one restore path for a state before a past operation.
        op = find_operation(engine, operation)
        label = state_label(engine, op)
        op, report = undo_to(engine, op.record)
        result.info(M.FILES_RESTORED_BEFORE_REWIND)
        result.show(
            *M.panel_state(report, label, stay=STAY),
            M.REWIND_UNDO_HINT if report.undo else M.NOTHING_TO_UNDO,
        )
    elif action == "files" and entry is not None:
        report = operations.restore(engine, entry, "files")
        result.info(M.FILES_RESTORED_FROM_POINT)
        result.show(
            # No fork was asked for here: "no fork made" is the /fork menu's Code only wording.
            *M.panel_restored(report, engine.describe(entry), after=STAY),
            M.REWIND_UNDO_HINT if report.undo else M.NOTHING_TO_UNDO,
        )
    else:
        raise LedgerError(f"unknown /rewind action {action!r}", hint="a bug in the extension")
    result.data = {"applied": action, "record": report.record}
    return result


def rewind_intent(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    from ledger.engine.preview import pi_fork_refusal

    action, entry = _text(message.payload, "action"), _text(message.payload, "entryId")
    if entry is None or not any(action in choices for choices in INTENT_CHOICES.values()):
        raise LedgerError(f"unknown /rewind intent {action!r}", hint="a bug in the extension")
    refusal = pi_fork_refusal(engine, entry) if action == "fork" else None
    if refusal is not None:
        # Refused here, before the extension calls ctx.fork: Pi would throw after
        # session_before_fork, and interactive Pi exits on that error.
        raise LedgerError(
            f"no fork made, nothing changed: {refusal}, or choose "
            '"Restore files and conversation" to go back to this entry here',
            hint="Pi's /fork lists the prompts it can fork from",
        )
    state.intent = (action or "", entry)
    return _answer({"intent": action})


def fork_refused(state: BridgeState, engine: Engine, message: EventMessage) -> bool:
    """A ``session_before_fork`` that Pi 0.73.1 will refuse once every handler has run (an entry
    that is not a prompt, or not in the session; :func:`ledger.engine.preview.pi_fork_refusal`):
    True, after dropping a ``/rewind`` intent for it. The caller then changes nothing: no
    menu, no restore, no ``rewind-fork-pending`` left behind in this session (Pi answers with
    its own error, ``Invalid entry ID for forking``). Not cancelled either: the fork is Pi's to
    refuse, so a caller sees Pi's own error."""
    from ledger.engine.preview import pi_fork_refusal

    entry = _text(message.payload, "entryId")
    if entry is None:
        return False
    position = _text(message.payload, "position") or "before"
    if pi_fork_refusal(engine, entry, position) is None:
        return False
    if state.intent is not None and state.intent[1] == entry:
        state.intent = None
    return True


def chooser(state: BridgeState, menu: str, entry: str, fallback: Choose | None) -> Choose | None:
    """The menu's chooser: the pending intent's answer when it is for ``entry`` (used once),
    else ``fallback`` (the user's own choice in Pi's menu)."""
    intent, state.intent = state.intent, None
    if intent is None or intent[1] != entry:
        return fallback
    label = INTENT_CHOICES[menu].get(intent[0])
    if label is None:
        return fallback
    return lambda _title, options: label if label in options else None


__all__ = [
    "chooser",
    "fork_refused",
    "rewind_apply",
    "rewind_diff",
    "rewind_intent",
    "rewind_list",
    "rewind_preview",
]
