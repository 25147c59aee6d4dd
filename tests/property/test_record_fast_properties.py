"""The records built without pydantic are the pydantic models' records, for arbitrary inputs.

``ledger.record_fast`` is what the engine writes with (issue 34: no pydantic import per
process); ``ledger.record_models`` is the definition (and generates ``schemas/``). For random
inputs, valid and not, both give the same ``data`` (same bytes, same key order) or both refuse,
and every record built validates against the checked-in schema.
"""

from __future__ import annotations

import json
import re
import string
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import record_fast, record_models
from tests.gitkit import ROOT

valid_shas = st.text(alphabet="0123456789abcdef", min_size=40, max_size=40)
# Near misses: upper case, wrong length, a trailing newline, empty, not a string at all.
odd_shas = (
    valid_shas.map(str.upper)
    | st.text(alphabet="0123456789abcdef", min_size=39, max_size=41)
    | valid_shas.map(lambda s: s + "\n")
    | st.just("")
    | st.integers()
    | st.none()
)
shas = st.one_of(valid_shas, valid_shas, valid_shas, odd_shas)
valid_entries = st.text(alphabet=string.hexdigits.lower()[:16], min_size=1, max_size=8)
entries = st.one_of(valid_entries, valid_entries, st.just(""), st.integers(), st.text(max_size=3))
pairs = st.lists(st.tuples(entries, st.sampled_from(["a" * 40, "b" * 40]) | shas), max_size=6)


def _outcome(build: Any) -> tuple[str, Any]:
    """``("data", bytes)`` or ``("refused", None)``: an error is a refusal either way."""
    try:
        record = build()
    except ValueError:  # pydantic's ValidationError is a ValueError
        return ("refused", None)
    return ("data", orjson.dumps(record.to_data()))


def _schema(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "schemas" / name).read_text())


def _valid(value: Any, schema: dict[str, Any]) -> bool:
    """The subset of JSON Schema the record schemas use (no jsonschema dependency)."""
    kind = schema.get("type")
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    }
    if kind is not None and not checks[kind](value):
        return False
    if "const" in schema and value != schema["const"]:
        return False
    if "pattern" in schema and not re.fullmatch(schema["pattern"].strip("^$"), value):
        return False
    if "minLength" in schema and len(value) < schema["minLength"]:
        return False
    if "minimum" in schema and value < schema["minimum"]:
        return False
    if kind == "array":
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            return False
        prefix = schema.get("prefixItems", [])
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else schema.get("items", {})
            if not _valid(item, sub):
                return False
    if kind == "object":
        properties = schema.get("properties", {})
        if not set(schema.get("required", [])) <= set(value):
            return False
        if schema.get("additionalProperties") is False and not set(value) <= set(properties):
            return False
        order = [key for key in properties if key in value]
        if list(value) != order:  # the reference key order
            return False
        return all(_valid(value[key], properties[key]) for key in value)
    return True


@settings(max_examples=300, deadline=None)
@given(pairs)
def test_a_turn_is_the_models_turn(given_pairs: list[tuple[Any, Any]]) -> None:
    fast = _outcome(lambda: record_fast.build_turn(given_pairs))
    assert fast == _outcome(lambda: record_models.build_turn(given_pairs))
    if fast[0] == "data":
        assert _valid(orjson.loads(fast[1]), _schema("rewind-turn.schema.json"))


@settings(max_examples=300, deadline=None)
@given(st.none() | shas, st.none() | shas, st.none() | pairs)
def test_an_op_is_the_models_op(current: Any, undo: Any, bindings: Any) -> None:
    fast = _outcome(lambda: record_fast.build_op(current=current, undo=undo, bindings=bindings))
    models = _outcome(lambda: record_models.build_op(current=current, undo=undo, bindings=bindings))
    assert fast == models
    if fast[0] == "data":
        assert _valid(orjson.loads(fast[1]), _schema("rewind-op.schema.json"))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([2, 2, 2, 1, 2.0, True]), shas, st.none() | shas)
def test_a_fork_pending_record_is_the_models_record(v: Any, current: Any, undo: Any) -> None:
    fast = _outcome(lambda: record_fast.ForkPendingData(v=v, current=current, undo=undo))
    assert fast == _outcome(lambda: record_models.ForkPendingData(v=v, current=current, undo=undo))
    if fast[0] == "data":
        assert _valid(orjson.loads(fast[1]), _schema("rewind-fork-pending.schema.json"))


@pytest.mark.parametrize(
    "build",
    [
        lambda m: m.build_op(current="a" * 40, undo="b" * 40),
        lambda m: m.build_op(bindings=[("e1", "a" * 40), ("e2", "a" * 40), ("e3", "c" * 40)]),
        lambda m: m.build_turn([("u", "a" * 40), ("x", "b" * 40)]),
        lambda m: m.ForkPendingData(v=2, current="a" * 40),
    ],
)
def test_to_data_gives_a_fresh_object_each_time(build: Any) -> None:
    record = build(record_fast)
    first = record.to_data()
    for value in first.values():
        if isinstance(value, list):
            value.append("changed by a caller")
    assert record.to_data() == build(record_models).to_data()
