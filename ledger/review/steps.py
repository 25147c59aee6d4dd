"""The reviewable steps of a conversation branch: each prompt and each turn, with its two points.

Why it exists: a rewind point is a *state*; a review needs a *change*: what one prompt or one
turn did. This module pairs the points into steps along one branch, root → leaf:

- a **prompt** (a user message): from the user entry's own point (the work tree before the
  prompt ran) to the point of the last assistant turn of that prompt (the entries after it up to
  the next user message); without one, to the next user message's point (the state before the
  next prompt); without either there is no "after" and the prompt has no diff;
- a **turn** (an assistant message with a point): from the nearest earlier user or assistant
  point on the branch (the previous turn of the same prompt, else the prompt's own point) to the
  turn's point.

A turn also names the tools it ran (``write src/app.py``, ``bash: pytest -q``): the ``toolCall``
parts of its assistant message and of any earlier assistant message of the same prompt that had no
point of its own (their effects land in this turn's diff).

Points come through the lineage (a fork's copied entries keep their bindings in the parent file)
unless the caller asks for this file's own bindings only.

Invariants: read-only and pure over the session values and the ``exists`` predicate; a pruned
snapshot counts as no point (as restore treats it). Steps come in branch order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ledger.lineage import LedgerFile, Lineage
from ledger.session.model import Session, entry_text
from ledger.session.parse import Entry

StepKind = Literal["prompt", "turn"]


@dataclass(frozen=True)
class Step:
    """One prompt or turn and the two rewind points around it."""

    kind: StepKind
    entry: Entry
    prompt_id: str
    """The user entry this step belongs to (itself for a prompt); '' before any prompt."""
    before: str | None
    after: str | None
    session_id: str
    """The session whose ledger bound this step's own entry (the nearest through lineage)."""
    label: str | None
    text: str
    """The prompt's text for a prompt; the turn's text for a turn."""
    summary: str
    """The first non-empty line of the (last) assistant reply."""
    timestamp: str | None
    fork_children: int
    """How many branches leave this entry's subtree before the next step (>1 marks a fork)."""
    tools: tuple[str, ...] = ()
    """For a turn: one short line per tool call it ran (``edit x``, ``bash: pytest -q``)."""

    @property
    def entry_id(self) -> str:
        return self.entry.id

    @property
    def has_diff(self) -> bool:
        return self.before is not None and self.after is not None


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


_MAX_TOOL_TEXT = 120
_MAX_TOOLS = 200
_ARG_KEYS = ("path", "file_path", "filePath", "file", "pattern", "query", "url")


def describe_tool_call(name: str, arguments: object) -> str:
    """One short line for a tool call: ``bash: <first command line>``, ``<name> <path>``, or the name."""
    detail = ""
    if isinstance(arguments, dict):
        command = arguments.get("command")
        if isinstance(command, str) and command.strip():
            line = first_line(command)
            text = f"{name}: {line}" + (" …" if command.strip() != line else "")
            return _clip(text)
        for key in _ARG_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and value:
                detail = value
                break
    return _clip(f"{name} {detail}" if detail else name)


def _clip(text: str) -> str:
    text = " ".join(text.split())  # one line: no newline, tab or other break survives
    return text if len(text) <= _MAX_TOOL_TEXT else text[: _MAX_TOOL_TEXT - 1] + "…"


def tool_calls(entry: Entry) -> list[str]:
    """The described ``toolCall`` parts of an assistant message, in order (Pi's content format)."""
    message = entry.raw.get("message")
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    if not isinstance(content, list):
        return []
    out: list[str] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "toolCall":
            name = part.get("name")
            out.append(
                describe_tool_call(name if isinstance(name, str) else "?", part.get("arguments"))
            )
    return out


def _is_user(entry: Entry) -> bool:
    return entry.type == "message" and entry.role == "user"


def _is_assistant(entry: Entry) -> bool:
    return entry.type == "message" and entry.role == "assistant"


def branch_points(
    lineage: Lineage, exists: Callable[[str], bool], *, own_only: bool = False
) -> dict[str, tuple[str, LedgerFile]]:
    """Entry id → (snapshot, the file whose ledger bound it); ``own_only``: the session's file only."""
    if own_only:
        link = lineage.current
        return {eid: (sha, link) for eid, sha in link.view.entry_to_commit.items() if exists(sha)}
    return lineage.points(exists)


def branch_steps(
    session: Session, points: dict[str, tuple[str, LedgerFile]], *, leaf_id: str | None = None
) -> list[Step]:
    """Every prompt and every turn with a point, along the branch ending at ``leaf_id``."""
    branch = session.branch(leaf_id)
    labels = session.labels
    children_count = _children_counts(session)
    steps: list[Step] = []
    prompt_id = ""
    last_point: str | None = None
    pending_tools: list[str] = []  # tool calls of assistant messages without a point of their own
    user_positions = [i for i, e in enumerate(branch) if _is_user(e)]
    next_user: dict[int, int | None] = {}
    for n, pos in enumerate(user_positions):
        next_user[pos] = user_positions[n + 1] if n + 1 < len(user_positions) else None
    for index, entry in enumerate(branch):
        point = points.get(entry.id)
        sha = point[0] if point else None
        session_id = point[1].session_id if point else session.id
        if _is_user(entry):
            prompt_id = entry.id
            pending_tools = []
            end = next_user[index]
            span = branch[index + 1 : end if end is not None else len(branch)]
            after = None
            summary = ""
            for later in span:
                if _is_assistant(later):
                    later_point = points.get(later.id)
                    if later_point is not None:
                        after = later_point[0]
                    text = first_line(entry_text(later))
                    if text:
                        summary = text
            if after is None and end is not None and branch[end].id in points:
                after = points[branch[end].id][0]
            steps.append(
                Step(
                    "prompt",
                    entry,
                    entry.id,
                    sha,
                    after,
                    session_id,
                    labels.get(entry.id),
                    entry_text(entry),
                    summary,
                    _stamp(entry),
                    children_count.get(entry.id, 0),
                )
            )
        elif _is_assistant(entry) and sha is None:
            pending_tools.extend(tool_calls(entry))
        elif _is_assistant(entry) and sha is not None:
            text = entry_text(entry)
            tools = [*pending_tools, *tool_calls(entry)]
            pending_tools = []
            steps.append(
                Step(
                    "turn",
                    entry,
                    prompt_id,
                    last_point,
                    sha,
                    session_id,
                    labels.get(entry.id),
                    text,
                    first_line(text),
                    _stamp(entry),
                    children_count.get(entry.id, 0),
                    tuple(tools[:_MAX_TOOLS]),
                )
            )
        if sha is not None and (_is_user(entry) or _is_assistant(entry)):
            last_point = sha
    return steps


def step_for(steps: list[Step], entry_id: str) -> Step | None:
    for step in steps:
        if step.entry.id == entry_id:
            return step
    return None


def _children_counts(session: Session) -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in session.entries:
        if entry.parent_id:
            counts[entry.parent_id] = counts.get(entry.parent_id, 0) + 1
    return counts


def _stamp(entry: Entry) -> str | None:
    return entry.timestamp if isinstance(entry.timestamp, str) else None


__all__ = [
    "Step",
    "StepKind",
    "branch_points",
    "branch_steps",
    "describe_tool_call",
    "first_line",
    "step_for",
    "tool_calls",
]
