"""The ``rewind_tool`` event: the model's ``rewind`` tool, answered in words for the model and in
a panel for the user (docs/pi.md#the-agents-rewind-tool).

Why it exists: the extension registers a Pi tool named ``rewind`` (tools/pi-extension/
rewind-tool.ts) whose every call is one ``rewind_tool`` event ``{action, point?, label?}``. The
engine (:mod:`ledger.engine.agent_tool`) returns reports; this module turns them into what the
tool returns (``data.text`` for the model, ``data.details`` kept in the session with the tool's
result) and, for a restore, the panel and notice the user sees, with the way back.

A refusal (no such point, another session's turn running, files changed meanwhile) is an answer
for the model, not a bridge error: ``data.refused`` is set and nothing was changed or appended.

Invariants: list and diff append nothing; a checkpoint appends one ``rewind-op`` (the extension
then labels the entry); a restore appends one ``rewind-op`` only when it changed files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger.clock import ms_from_iso
from ledger.engine import messages as M
from ledger.errors import LedgerError

if TYPE_CHECKING:
    from ledger.bridge.protocol import EventMessage
    from ledger.bridge.state import BridgeState
    from ledger.engine.agent_points import ToolFile, ToolPoint
    from ledger.engine.agent_tool import PointSummary
    from ledger.engine.engine import Engine, EventResult

ACTIONS = ("checkpoint", "list", "diff", "restore")
LETTER = {"added": "A", "modified": "M", "deleted": "D"}
DEFAULT_LABEL = "checkpoint"
MAX_LABEL = 80
SHOWN_FILES = 30
"""Files a list or result names one by one (then "and N more")."""


@dataclass(frozen=True)
class _Counts:
    added: tuple[str, ...]
    modified: tuple[str, ...]
    deleted: tuple[str, ...]


def _counts(files: Sequence[ToolFile]) -> _Counts:
    return _Counts(
        tuple(f.path for f in files if f.change == "added"),
        tuple(f.path for f in files if f.change == "modified"),
        tuple(f.path for f in files if f.change == "deleted"),
    )


def _age(timestamp: str | None, now_ms: int) -> str:
    then = ms_from_iso(timestamp) if timestamp else None
    if not then:
        return "time unknown"
    seconds = max(0, (now_ms - then) // 1000)
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} d ago"


def _file_lines(files: Sequence[ToolFile], *, author: bool = True) -> list[str]:
    lines = [
        f"  {LETTER[f.change]} {f.path}" + (f"  ({f.author})" if author else "")
        for f in files[:SHOWN_FILES]
    ]
    if len(files) > SHOWN_FILES:
        lines.append(f"  … and {len(files) - SHOWN_FILES} more")
    return lines


def _left_words(files: Sequence[ToolFile]) -> str:
    shown = "; ".join(f"{f.path} ({f.author})" for f in files[:SHOWN_FILES])
    more = f"; and {len(files) - SHOWN_FILES} more" if len(files) > SHOWN_FILES else ""
    return shown + more


def _point_json(point: ToolPoint) -> dict[str, Any]:
    return {"id": point.id, "kind": point.kind, "label": point.label, "snapshot": point.snapshot}


def _checkpoint(engine: Engine, payload: dict[str, Any]) -> dict[str, Any]:
    from ledger.engine.agent_tool import checkpoint

    raw = payload.get("label")
    label = " ".join(raw.split())[:MAX_LABEL] if isinstance(raw, str) and raw.strip() else ""
    report = checkpoint(engine, label or DEFAULT_LABEL)
    point = report.point
    named = f'"{label}" ' if label else ""
    text = (
        f"Checkpoint {named}saved as {point.id}. To go back to it: rewind with action "
        f'"restore" and point "{label or point.id}" ("diff" first shows what would change). '
        "A restore takes back only files you wrote after this point; the user's and other "
        "sessions' work is left as it is."
    )
    return {
        "text": text,
        "details": {"action": "checkpoint", "point": _point_json(point), "record": report.record},
        "label": {"entryId": point.id, "label": label or DEFAULT_LABEL},
    }


def _summary_line(summary: PointSummary, now_ms: int) -> str:
    point = summary.point
    what = f'checkpoint "{point.label}"' if point.label else "before the prompt"
    prompt = " ".join(point.text.split())
    if prompt and not point.label:
        what += f' "{prompt[:60]}{"…" if len(prompt) > 60 else ""}"'
    files = summary.files
    if not files:
        change = "the files are the same as now"
    else:
        mine = sum(1 for f in files if f.taken_back)
        others = len(files) - mine
        change = f"a restore would change {mine} of your files"
        if others:
            change += f", leave alone {others} not yours"
    return f"{point.id}  {what}  ({_age(point.timestamp, now_ms)}): {change}"


def _list(engine: Engine, payload: dict[str, Any]) -> dict[str, Any]:
    from ledger.engine.agent_tool import list_points

    summaries = list_points(engine)
    now_ms = engine.clock.now_ms()
    if not summaries:
        text = (
            'No points yet in this conversation. Call rewind with action "checkpoint" before a '
            "risky change."
        )
    else:
        text = "\n".join(
            [
                "Points of this conversation, newest first (restore one with action "
                '"restore" and its id or label):',
                *(_summary_line(s, now_ms) for s in summaries),
            ]
        )
    return {
        "text": text,
        "details": {
            "action": "list",
            "points": [
                {**_point_json(s.point), "files": [f.to_json() for f in s.files]} for s in summaries
            ],
        },
    }


def _diff(engine: Engine, payload: dict[str, Any]) -> dict[str, Any]:
    from ledger.engine.agent_points import point_words
    from ledger.engine.agent_tool import diff

    report = diff(engine, _point_ref(payload))
    mine = [f for f in report.files if f.taken_back]
    theirs = [f for f in report.files if not f.taken_back]
    where = point_words(report.point)
    if not report.files:
        lines = [f"The files are the same as at {where}: a restore would change nothing."]
    else:
        lines = [f"Restoring {where} would change {len(mine)} file(s) of yours:"]
        lines += _file_lines(mine, author=False) or ["  (none)"]
        if theirs:
            lines.append(f"and leave alone {len(theirs)} file(s) that are not your work:")
            lines += _file_lines(theirs)
        if report.patch:
            lines += ["", "Diff from now to that point (your files only):", report.patch.rstrip()]
            if report.cut:
                lines.append("… (diff cut)")
    return {
        "text": "\n".join(lines),
        "details": {
            "action": "diff",
            "point": _point_json(report.point),
            "files": [f.to_json() for f in report.files],
        },
    }


def _restore(engine: Engine, payload: dict[str, Any], result: EventResult) -> dict[str, Any]:
    from ledger.engine.agent_points import USERS, point_words
    from ledger.engine.agent_tool import restore

    report = restore(engine, _point_ref(payload))
    where = point_words(report.point)
    left = report.left_alone
    lines: list[str] = []
    if report.record is None:
        lines.append(
            f"Nothing restored: no file of yours differs from {where}."
            if left
            else f"The files already match {where}: nothing to restore."
        )
    else:
        counts = _counts(report.restored)
        lines.append(
            f"Restored your files to {where} ({M.changes(counts)}); the conversation is unchanged:"
        )
        lines += _file_lines(report.restored, author=False)
    if left:
        lines.append(f"Left alone, not your work: {_left_words(left)}.")
    if report.record is not None:
        lines.append("The user can undo this restore from /rewind.")
        user_words = [
            f"  left alone: {f.path} ({'your own work' if f.author == USERS else f.author})"
            for f in left[:SHOWN_FILES]
        ]
        result.info(f"Rewind: the agent restored its own files to {where}")
        result.show(
            f"Rewind: the agent restored files to {where}: {M.changes(_counts(report.restored))}; "
            "the conversation is unchanged",
            *M.named(_counts(report.restored)),
            *user_words,
            M.REWIND_UNDO_HINT,
        )
    lines += [f"Warning: {w}" for w in report.warnings]
    return {
        "text": "\n".join(lines),
        "details": {
            "action": "restore",
            "point": _point_json(report.point),
            "record": report.record,
            "current": report.current if report.record else None,
            "undo": report.undo,
            "restored": [f.to_json() for f in report.restored],
            "leftAlone": [f.to_json() for f in left],
        },
    }


def _point_ref(payload: dict[str, Any]) -> str:
    point = payload.get("point")
    if not isinstance(point, str) or not point.strip():
        raise LedgerError(
            "this action needs a point",
            hint='give "point": an id or checkpoint label from action "list"',
        )
    return point.strip()


def rewind_tool(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    """One call of the model's ``rewind`` tool (see the module)."""
    from ledger.engine.engine import EventResult

    result = EventResult()
    payload = message.payload
    action = payload.get("action")
    try:
        if action == "checkpoint":
            data = _checkpoint(engine, payload)
        elif action == "list":
            data = _list(engine, payload)
        elif action == "diff":
            data = _diff(engine, payload)
        elif action == "restore":
            data = _restore(engine, payload, result)
        else:
            raise LedgerError(
                f"unknown action {action!r}",
                hint=f"use one of: {', '.join(ACTIONS)}",
            )
    except LedgerError as exc:
        hint = f" ({exc.hint})" if exc.hint else ""
        data = {
            "text": f"{exc.message[:1].upper()}{exc.message[1:]}{hint}. Nothing was changed.",
            "details": {"action": action if isinstance(action, str) else None, "refused": True},
            "refused": True,
        }
    result.data = data
    return result


__all__ = ["ACTIONS", "rewind_tool"]
