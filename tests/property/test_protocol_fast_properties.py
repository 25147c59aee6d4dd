"""The bridge's pydantic-free decoding of host messages is the pydantic models' decoding.

``ledger.bridge.protocol.decode_host_message`` takes the messages the extension sends without
importing pydantic (issue 34: a spawned bridge answers ``session_start`` without that import)
and passes anything else to the models. For random messages, ordinary and odd, what the plain
checks accept the models accept with the same fields, and the final answer (fields, or the
``bad-message`` text) is the models' own.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ledger.bridge import protocol, protocol_models
from ledger.bridge.protocol import EVENT_NAMES, BadHostMessage

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=6)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
ids = st.integers(-(2**64), 2**64) | st.text(max_size=4) | scalars
optional_text = st.none() | st.text(max_size=8) | scalars
ctx_values = st.fixed_dictionaries(
    {},
    optional={
        "hasUI": st.booleans() | scalars,
        "cwd": optional_text,
        "sessionFile": optional_text,
        "leafId": optional_text,
        "has_ui": st.booleans() | scalars,
        "session_file": optional_text,
        "leaf_id": optional_text,
        "extra": json_values,
    },
)
events = st.fixed_dictionaries(
    {"type": st.just("event"), "event": st.sampled_from(sorted(EVENT_NAMES)) | st.text(max_size=4)},
    optional={
        "id": ids,
        "payload": st.dictionaries(st.text(max_size=5), json_values, max_size=3) | json_values,
        "ctx": ctx_values | json_values,
        "extra": json_values,
    },
)
replies = st.fixed_dictionaries(
    {"type": st.just("reply")},
    optional={"id": ids, "result": json_values, "error": optional_text, "extra": json_values},
)
odd = st.dictionaries(st.sampled_from(["type", "id", "event", "payload", "ctx"]), json_values)
ordinary_ctx = st.fixed_dictionaries(
    {
        "hasUI": st.booleans(),
        "cwd": st.none() | st.text(max_size=8),
        "sessionFile": st.none() | st.text(max_size=8),
        "leafId": st.none() | st.text(max_size=8),
    }
)
ordinary_events = st.fixed_dictionaries(
    {
        "type": st.just("event"),
        "id": st.integers(0, 2**31) | st.text(max_size=4),
        "event": st.sampled_from(sorted(EVENT_NAMES)),
        "payload": st.dictionaries(st.text(max_size=5), json_values, max_size=3),
        "ctx": ordinary_ctx,
    }
)


@st.composite
def nearly_ordinary(draw: st.DrawFn) -> dict[str, Any]:
    """What the extension sends, with at most one field (or one of ``ctx``'s) odd or gone."""
    message = draw(ordinary_events)
    where = draw(st.sampled_from(["", "id", "event", "payload", "ctx", "ctx.", "extra"]))
    odd_value = draw(scalars | json_values)
    if where == "ctx.":
        key = draw(st.sampled_from(["hasUI", "cwd", "sessionFile", "leafId", "has_ui", "leaf_id"]))
        ctx = dict(message["ctx"])
        if draw(st.booleans()):
            ctx[key] = odd_value
        else:
            ctx.pop(key, None)
        message["ctx"] = ctx
    elif where and draw(st.booleans()):
        message[where] = odd_value
    elif where:
        message.pop(where, None)
    return message


messages = events | replies | odd | nearly_ordinary() | nearly_ordinary()


def _by_the_models(raw: dict[str, Any]) -> tuple[str, Any]:
    try:
        message = protocol_models.validate_host_message(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        return ("bad", f"{where}: {first.get('msg')}")
    if isinstance(message, protocol_models.ReplyMessage):
        return ("reply", (message.id, message.result, message.error))
    ctx = message.ctx
    fields = (ctx.has_ui, ctx.cwd, ctx.session_file, ctx.leaf_id)
    return ("event", (message.id, message.event, message.payload, fields))


def _decoded(message: protocol.EventMessage | protocol.ReplyMessage) -> tuple[str, Any]:
    if isinstance(message, protocol.ReplyMessage):
        return ("reply", (message.id, message.result, message.error))
    ctx = message.ctx
    fields = (ctx.has_ui, ctx.cwd, ctx.session_file, ctx.leaf_id)
    return ("event", (message.id, message.event, message.payload, fields))


def _same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    # Types too: 1 and True, 1 and 1.0 are equal in Python but not on the wire.
    return a == b and repr(a) == repr(b)


@settings(max_examples=600, deadline=None)
@given(messages)
def test_plain_decoding_accepts_only_what_the_models_accept_unchanged(raw: dict[str, Any]) -> None:
    expected = _by_the_models(raw)
    plain = protocol._plain(raw)
    if plain is not None:
        assert _same(_decoded(plain), expected)
    try:
        decoded = _decoded(protocol.decode_host_message(raw))
    except BadHostMessage as exc:
        decoded = ("bad", exc.text)
    assert _same(decoded, expected)


def test_the_messages_the_extension_sends_take_the_plain_path() -> None:
    event = {
        "type": "event",
        "id": 7,
        "event": "session_start",
        "payload": {"reason": "startup"},
        "ctx": {"hasUI": True, "cwd": "/r", "sessionFile": None, "leafId": None},
    }
    assert protocol._plain(event) == protocol.EventMessage(
        7, "session_start", {"reason": "startup"}, protocol.EventContext(True, "/r", None, None)
    )
    reply = {"type": "reply", "id": "c1", "result": {"entryId": "e"}}
    assert protocol._plain(reply) == protocol.ReplyMessage("c1", {"entryId": "e"})
    assert protocol._plain({"type": "reply", "id": "c2", "error": "no"}) is not None


def test_a_context_field_given_by_its_python_name_is_read_as_the_models_read_it() -> None:
    for ctx in ({"has_ui": True}, {"hasUI": False, "has_ui": True}, {"leaf_id": "e1"}):
        raw = {"type": "event", "id": 1, "event": "ping", "ctx": ctx}
        assert _same(_decoded(protocol.decode_host_message(raw)), _by_the_models(raw)), ctx
