"""The pydantic models of the bridge protocol: validation of unusual host messages, and the schema.

Why it exists: ``schemas/bridge.schema.json`` is generated from these models (``ledger/schemas.py``),
and a host message the plain checks of :func:`ledger.bridge.protocol.decode_host_message` do not
accept as is is decided here, so its coercion or its error is exactly pydantic's. Importing
pydantic costs a bridge 0.1–0.4 s, so nothing on the ordinary path imports this module
(issue 34: a process imports only what it uses).

Invariants: the class names, fields, aliases and docstrings are the schema (a docstring enters it
as a description); the runtime classes in :mod:`ledger.bridge.protocol` carry the same fields.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ledger.bridge.protocol_names import PROTOCOL_VERSION, ErrorCode, EventName
from ledger.engine.messages import Level


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
    session: dict[str, Any] | None = None
    """What a ``session`` call from ``session.from`` would answer (``from``, ``entries``,
    ``total``, ``leafId``, ``sessionFile``, ``header``), sent with the event; optional."""


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
    skip: list[EventName] | None = None
    """``session_start`` only: the events this bridge does nothing with; the host may leave
    them out."""


class ErrorBody(_Model):
    code: ErrorCode
    message: str


class ErrorMessage(_Model):
    type: Literal["error"]
    id: int | str | None
    error: ErrorBody


def bridge_schema() -> dict[str, Any]:
    """One JSON Schema with both directions under ``$defs`` (``schemas/bridge.schema.json``)."""
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


_HOST_MESSAGE: TypeAdapter[EventMessage | ReplyMessage] = TypeAdapter(EventMessage | ReplyMessage)


def validate_host_message(raw: dict[str, Any]) -> EventMessage | ReplyMessage:
    """``raw`` as pydantic validates it (raises :class:`pydantic.ValidationError`)."""
    return _HOST_MESSAGE.validate_python(raw)
