"""The wire format of ``rewind serve --stdio``: one JSON object per line, both directions.

Why it exists: Pi (TypeScript) and our engine (Python) live in different processes. The
extension forwards the agent's events; the engine answers with results, and, while it handles an
event, asks the host for session facts, to append a record, or to show a menu. The messages'
pydantic models (:mod:`ledger.bridge.protocol_models`) generate the JSON Schema
(``schemas/bridge.schema.json``) and decide any host message out of the ordinary; the messages
the extension sends are checked here without pydantic, whose import would cost every spawned
bridge 0.1–0.4 s before it answers ``session_start`` (issue 34).

Messages from the host (the extension):

- ``{"type":"event","id":N,"event":NAME,"payload":{…},"ctx":{hasUI, cwd, sessionFile, leafId},
  "session"?:{from, entries, total, leafId, sessionFile, header?}}``: ``session`` (optional) is
  what a ``session`` call with ``{"from": from}`` would answer, sent with the event so that the
  bridge need not ask (issue 34, per prompt): the entries from index ``from`` on. A bridge
  whose mirror does not hold exactly ``from`` entries ignores it and asks, as before.
- ``{"type":"reply","id":CALL_ID,"result":…}`` or ``{"type":"reply","id":CALL_ID,"error":TEXT}``;
  an ``appendEntry`` result may carry the same ``session`` facts as an event, taken after the
  append.

Messages from the bridge:

- ``{"type":"call","id":"cN","method":"session"|"appendEntry"|"select","params":{…}}``, only
  while an event is in flight; the host answers each before the event's result comes.
- ``{"type":"result","id":N,"result":{cancel?, skipConversationRestore?, …},"notices":[…],"status":…}``
  (``/rewind``'s events answer with data in ``result``: ``list``, ``preview``, ``diff``, …;
  :mod:`ledger.bridge.rewind_events`); ``session_start``'s result also carries ``"skip":[NAME…]``,
  the events this bridge does nothing with (:data:`SKIPPED_EVENTS`): a host may leave them out.
- ``{"type":"error","id":N|null,"error":{"code":…,"message":…}}``

Compatibility: ``session`` and ``skip`` are optional both ways. An older extension sends no
``session`` (the bridge asks, as before) and ignores ``skip`` (it sends every event); an older
bridge ignores ``session`` (extra keys are allowed) and sends no ``skip``.

Invariants: a malformed or unknown message gets an ``error`` and the bridge keeps serving; every
event gets exactly one ``result`` or ``error`` with its id. :func:`decode_host_message` gives
what the pydantic models give, for every input (the same fields, or the same error text): what
it accepts by itself the models accept unchanged (tests/property/test_protocol_fast_properties.py);
everything else is passed to them.
"""

from __future__ import annotations

from typing import Any, TypeGuard, cast

from ledger.bridge.protocol_names import (  # re-exported: the protocol's names, in one place
    EVENT_NAMES as EVENT_NAMES,
)
from ledger.bridge.protocol_names import PROTOCOL_VERSION as PROTOCOL_VERSION
from ledger.bridge.protocol_names import ErrorCode as ErrorCode
from ledger.bridge.protocol_names import EventName as EventName


class EventContext:
    """What the host knows at the time of the event (``ctx`` in Pi)."""

    __slots__ = ("cwd", "has_ui", "leaf_id", "session_file")

    def __init__(
        self,
        has_ui: bool = False,
        cwd: str | None = None,
        session_file: str | None = None,
        leaf_id: str | None = None,
    ) -> None:
        self.has_ui = has_ui
        self.cwd = cwd
        self.session_file = session_file
        self.leaf_id = leaf_id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EventContext) and _fields(self) == _fields(other)

    def __repr__(self) -> str:
        return f"EventContext{_fields(self)!r}"


SKIPPED_EVENTS: tuple[EventName, ...] = ("message_end",)
"""Events the bridge does nothing with (``message_end``: its entry is written after it and bound
by the next ``turn_end``), announced in ``session_start``'s result as ``skip``."""


class EventMessage:
    """``{"type":"event", id, event, payload, ctx, session?}`` (extra keys are allowed and
    ignored)."""

    __slots__ = ("ctx", "event", "id", "payload", "session")
    type = "event"

    def __init__(
        self,
        id: int | str,
        event: EventName,
        payload: dict[str, Any] | None = None,
        ctx: EventContext | None = None,
        session: dict[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.event = event
        self.payload = payload if payload is not None else {}
        self.ctx = ctx if ctx is not None else EventContext()
        self.session = session

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EventMessage) and _fields(self) == _fields(other)

    def __repr__(self) -> str:
        return f"EventMessage{_fields(self)!r}"


class ReplyMessage:
    """``{"type":"reply", id, result}`` or ``{"type":"reply", id, error}``."""

    __slots__ = ("error", "id", "result")
    type = "reply"

    def __init__(self, id: int | str, result: Any = None, error: str | None = None) -> None:
        self.id = id
        self.result = result
        self.error = error

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReplyMessage) and _fields(self) == _fields(other)

    def __repr__(self) -> str:
        return f"ReplyMessage{_fields(self)!r}"


def _fields(value: EventContext | EventMessage | ReplyMessage) -> tuple[object, ...]:
    return tuple(getattr(value, name) for name in type(value).__slots__)


class BadHostMessage(Exception):
    """A host message of the wrong shape; ``text`` is the ``bad-message`` error's message."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def decode_host_message(raw: dict[str, Any]) -> EventMessage | ReplyMessage:
    """A host message (a JSON object) as the pydantic models validate it; raises
    :class:`BadHostMessage` with the first error (``loc: msg``) when they refuse it."""
    fast = _plain(raw)
    if fast is not None:
        return fast
    return _validated(raw)


_CTX_OWN_NAMES = frozenset(("has_ui", "session_file", "leaf_id"))
"""``ctx``'s fields by their Python names (``cwd`` has no alias): the models accept those too."""


def _plain_id(value: object) -> TypeGuard[int | str]:
    # int | str as the models take it unchanged (a bool or a float would become an int).
    return type(value) is str or type(value) is int


def _optional_str(value: object) -> bool:
    return value is None or type(value) is str


def _plain(raw: dict[str, Any]) -> EventMessage | ReplyMessage | None:
    """The messages the extension sends, checked without pydantic; None when the models must
    decide (anything unusual: a coercion, an error, a field given by its Python name)."""
    kind, message_id = raw.get("type"), raw.get("id")
    if not _plain_id(message_id):
        return None
    if kind == "reply":
        error = raw.get("error")
        return ReplyMessage(message_id, raw.get("result"), error) if _optional_str(error) else None
    event = raw.get("event")
    if kind != "event" or type(event) is not str or event not in EVENT_NAMES:
        return None
    payload = raw.get("payload", {})
    ctx = raw.get("ctx", {})
    session = raw.get("session")
    if type(payload) is not dict or type(ctx) is not dict:
        return None
    if session is not None and type(session) is not dict:
        return None
    if not _CTX_OWN_NAMES.isdisjoint(ctx):  # populate_by_name: the models decide which wins
        return None
    has_ui = ctx.get("hasUI", False)
    cwd, session_file, leaf_id = ctx.get("cwd"), ctx.get("sessionFile"), ctx.get("leafId")
    if type(has_ui) is not bool or not all(map(_optional_str, (cwd, session_file, leaf_id))):
        return None
    return EventMessage(
        message_id,
        cast(EventName, event),
        dict(payload),
        EventContext(has_ui, cwd, session_file, leaf_id),
        dict(session) if session is not None else None,
    )


def _validated(raw: dict[str, Any]) -> EventMessage | ReplyMessage:
    """The models decide (imported on this path only: pydantic is slow to import)."""
    from pydantic import ValidationError

    from ledger.bridge import protocol_models as models

    try:
        message = models.validate_host_message(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise BadHostMessage(f"{where}: {first.get('msg')}") from None
    if isinstance(message, models.ReplyMessage):
        return ReplyMessage(message.id, message.result, message.error)
    ctx = message.ctx
    return EventMessage(
        message.id,
        message.event,
        message.payload,
        EventContext(ctx.has_ui, ctx.cwd, ctx.session_file, ctx.leaf_id),
        message.session,
    )
