"""The wire format of ``rewind serve --stdio``: one JSON object per line, both directions.

Why it exists: Pi (TypeScript) and our engine (Python) live in different processes. The
extension forwards the agent's events; the engine answers with results, and, while it handles an
event, asks the host for session facts, to append a record, or to show a menu. Keeping the
messages as pydantic models gives one place that validates input and generates the JSON Schema
(``schemas/bridge.schema.json``).

Messages from the host (the extension):

- ``{"type":"event","id":N,"event":NAME,"payload":{…},"ctx":{hasUI, cwd, sessionFile, leafId}}``
- ``{"type":"reply","id":CALL_ID,"result":…}`` or ``{"type":"reply","id":CALL_ID,"error":TEXT}``

Messages from the bridge:

- ``{"type":"call","id":"cN","method":"session"|"appendEntry"|"select","params":{…}}``, only
  while an event is in flight; the host answers each before the event's result comes.
- ``{"type":"result","id":N,"result":{cancel?, skipConversationRestore?, …},"notices":[…],"status":…}``
  (``/rewind``'s events answer with data in ``result``: ``list``, ``preview``, ``diff``, …;
  :mod:`ledger.bridge.rewind_events`)
- ``{"type":"error","id":N|null,"error":{"code":…,"message":…}}``

Invariants: a malformed or unknown message gets an ``error`` and the bridge keeps serving; every
event gets exactly one ``result`` or ``error`` with its id.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ledger.engine.messages import Level

PROTOCOL_VERSION = 1

EventName = Literal[
    "session_start",
    "before_agent_start",
    "turn_start",
    "message_end",
    "turn_end",
    "agent_end",
    "session_compact",
    "session_before_tree",
    "session_tree",
    "session_before_fork",
    "session_shutdown",
    "checkpoint_entry",
    "fork_preference",
    "rewind_list",
    "rewind_preview",
    "rewind_diff",
    "rewind_apply",
    "rewind_intent",
    "ping",
]
EVENT_NAMES: frozenset[str] = frozenset(EventName.__args__)  # type: ignore[attr-defined]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class EventContext(_Model):
    """What the host knows at the time of the event (``ctx`` in Pi)."""

    has_ui: bool = Field(False, alias="hasUI")
    cwd: str | None = None
    session_file: str | None = Field(None, alias="sessionFile")
    leaf_id: str | None = Field(None, alias="leafId")


class EventMessage(_Model):
    type: Literal["event"]
    id: int | str
    event: EventName
    payload: dict[str, Any] = Field(default_factory=dict)
    ctx: EventContext = Field(default_factory=EventContext)


class ReplyMessage(_Model):
    type: Literal["reply"]
    id: int | str
    result: Any = None
    error: str | None = None


class CallMessage(_Model):
    type: Literal["call"]
    id: str
    method: Literal["session", "appendEntry", "select"]
    params: dict[str, Any]


# ledger.engine.messages.Notice on the wire (a docstring here would enter the JSON Schema).
class Notice(_Model):
    level: Level
    text: str


class ResultMessage(_Model):
    type: Literal["result"]
    id: int | str
    result: dict[str, Any]
    notices: list[Notice]
    status: str | None = None
    """The footer text; ``null`` clears it; absent leaves it as it is (another writer owns it)."""
    panel: list[str] | None = None
    """Lines to keep on screen (Pi: ``ctx.ui.setWidget``) until replaced; ``[]`` clears them;
    absent leaves them as they are."""


ErrorCode = Literal["bad-json", "bad-message", "unknown-event", "failed", "internal"]
"""Why an event or message got an ``error``: unparsable JSON, a message of the wrong shape (or out
of turn), an unknown event, a refusal of the engine (a :class:`~ledger.errors.LedgerError`), or
an unexpected failure inside the bridge."""


class ErrorBody(_Model):
    code: ErrorCode
    message: str


class ErrorMessage(_Model):
    type: Literal["error"]
    id: int | str | None
    error: ErrorBody


def bridge_schema() -> dict[str, Any]:
    """One JSON Schema with both directions under ``$defs`` (``schemas/bridge.schema.json``)."""
    from pydantic import TypeAdapter

    host = TypeAdapter(EventMessage | ReplyMessage).json_schema(ref_template="#/$defs/{model}")
    bridge = TypeAdapter(CallMessage | ResultMessage | ErrorMessage).json_schema(
        ref_template="#/$defs/{model}"
    )
    defs = {**host.pop("$defs", {}), **bridge.pop("$defs", {})}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "rewind serve --stdio: one JSON object per line",
        "description": f"Protocol version {PROTOCOL_VERSION}. hostToBridge: what the extension sends; "
        "bridgeToHost: what the bridge answers.",
        "properties": {"hostToBridge": host, "bridgeToHost": bridge},
        "$defs": defs,
    }
