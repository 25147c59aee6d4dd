"""The bridge's wire reads and writes JSON as orjson does, before orjson is loaded too.

``ledger.bridge.wire_json`` lets a spawned bridge answer Pi's first ``session_start`` with the
standard library's ``json`` (issue 34: importing orjson costs ~7-10 ms of that answer) and hands
everything that ``json`` would read or write differently to orjson. For random values and
random bytes, ordinary and odd (lone surrogates, 64-bit edges, NaN, bad UTF-8, a BOM), what the
standard library's path accepts it reads as orjson does, and whatever orjson refuses it does not
accept; what it writes orjson reads back as the value.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.bridge.wire_json import STDLIB_MAX_BYTES, stdlib_dumps_line, stdlib_loads

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**65), 2**65)
    | st.sampled_from([-(2**63), -(2**63) - 1, 2**63 - 1, 2**64 - 1, 2**64])
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["\ud800", "a\udfffb", "\ufeff", "\u2028", "\x00", "é", "😀"])
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=10,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, floats by their bits (``-0.0`` and ``0.0`` are two values here)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.copysign(1.0, a) == math.copysign(1.0, b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _orjson(line: bytes) -> tuple[bool, Any]:
    try:
        return True, orjson.loads(line)
    except orjson.JSONDecodeError:
        return False, None


def _check_line(line: bytes) -> None:
    read = stdlib_loads(line)
    accepted, value = _orjson(line)
    if read is not None:
        assert accepted, f"json took what orjson refuses: {line!r}"
        assert _same(read[0], value), line


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_what_the_standard_library_reads_orjson_reads_alike(value: Any) -> None:
    for text in (
        json.dumps(value, ensure_ascii=False),
        json.dumps(value, ensure_ascii=True),  # \\u escapes, lone surrogates among them
        json.dumps(value, ensure_ascii=True).replace("\\ud", "\\uD"),
    ):
        _check_line(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=24) | st.text(max_size=12).map(lambda t: t.encode("utf-8", "replace")))
def test_random_bytes_are_refused_as_orjson_refuses_them(line: bytes) -> None:
    _check_line(line)


@pytest.mark.parametrize(
    "line",
    [
        b"NaN",
        b"[Infinity]",
        b'{"a":-Infinity}',
        b"1e400",
        b"-1e400",
        b"18446744073709551616",
        b"-9223372036854775809",
        b"18446744073709551615",
        b"-9223372036854775808",
        b'"\\ud800"',
        b'"\\uDFFF"',
        b'"\\ud83d\\ude00"',
        b"\xef\xbb\xbf{}",
        b'"\xff"',
        b"[" * 2000 + b"]" * 2000,
        b"\x00\x00\x00{",
        b'{"a":1,"a":2}',
        b" \t\r\n{} \n",
        b'"a\x01"',
        b"-0",
        b"-0.0",
        b"",
    ],
)
def test_the_edges_orjson_reads_differently_go_to_orjson(line: bytes) -> None:
    _check_line(line)


def test_a_line_longer_than_the_bound_goes_to_orjson() -> None:
    line = json.dumps({"entries": ["x" * 1000] * (STDLIB_MAX_BYTES // 1000)}).encode()
    assert len(line) > STDLIB_MAX_BYTES
    assert stdlib_loads(line) is None
    assert stdlib_loads(line[: STDLIB_MAX_BYTES // 2]) is None  # cut: not JSON either way


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=5), json_values, max_size=5))
def test_what_the_standard_library_writes_orjson_reads_back_as_the_value(
    message: dict[str, Any],
) -> None:
    written = stdlib_dumps_line(message)
    try:
        expected = orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        expected = None
    if written is None:
        return  # orjson writes it (or raises, as it always did)
    assert written.endswith(b"\n") and written.count(b"\n") == 1
    if expected is None:
        # orjson would have raised: only an integer beyond 64 bits gets here (module docstring:
        # this protocol has none); anything else orjson refuses, json refuses too.
        assert "out of range" in _orjson_error(message) or "Integer" in _orjson_error(message)
        return
    assert _same(orjson.loads(written), orjson.loads(expected))


def _orjson_error(message: dict[str, Any]) -> str:
    try:
        orjson.dumps(message)
    except orjson.JSONEncodeError as exc:
        return str(exc)
    return ""


def test_nan_lone_surrogates_and_unknown_objects_are_left_to_orjson() -> None:
    assert stdlib_dumps_line({"a": float("nan")}) is None
    assert stdlib_dumps_line({"a": "\ud800"}) is None
    assert stdlib_dumps_line({"a": object()}) is None
    assert stdlib_dumps_line({"a": "é\n"}) == '{"a":"é\\n"}\n'.encode()
