"""Round trips of records and entries, and invariants of the log, for arbitrary values."""

from __future__ import annotations

import string
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.clock import FixedClock, RandomIds
from ledger.ledgerview import LedgerView
from ledger.record_models import build_op, build_turn
from ledger.records import OP, TURN, DecodedRecord, custom_entry, decode_record, serialize_entry
from ledger.session.model import Session
from ledger.session.parse import parse_session_bytes
from ledger.session.store import SessionAppender, read_session

shas = st.text(alphabet="0123456789abcdef", min_size=40, max_size=40)
entry_ids = st.text(alphabet=string.hexdigits.lower()[:16], min_size=8, max_size=8)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
HEADER = (
    b'{"type":"session","version":3,"id":"s","timestamp":"2026-11-22T03:00:00.000Z","cwd":"/r"}\n'
)


@given(st.lists(st.tuples(entry_ids, shas), min_size=1, max_size=12))
def test_turn_records_round_trip_through_the_wire(pairs: list[tuple[str, str]]) -> None:
    data = build_turn(pairs).to_data()
    line = serialize_entry(custom_entry(TURN, data, "r0000001", None, "2026-11-22T03:00:00.000Z"))
    decoded = decode_record(TURN, orjson.loads(line)["data"], "r0000001", None, "t")
    assert isinstance(decoded, DecodedRecord)
    assert list(decoded.bindings) == pairs
    assert len(data["snapshots"]) == len(set(data["snapshots"]))


@given(shas, st.none() | shas, st.lists(st.tuples(entry_ids, shas), max_size=5))
def test_op_records_round_trip(
    current: str, undo: str | None, bindings: list[tuple[str, str]]
) -> None:
    data = build_op(current=current, undo=undo, bindings=bindings or None).to_data()
    decoded = decode_record(OP, orjson.loads(orjson.dumps(data)), "r", None, "t")
    assert isinstance(decoded, DecodedRecord)
    assert decoded.current == current
    assert decoded.undo == undo
    assert list(decoded.bindings) == bindings
    assert list(data)[0] == "v" and (not bindings or list(data)[-1] == "bindings")


@given(
    st.dictionaries(st.text(min_size=1, max_size=10), json_values, max_size=6),
    st.text(min_size=1, max_size=20),
)
def test_custom_entries_read_back_exactly(data: dict, custom_type: str) -> None:
    line = serialize_entry(
        custom_entry(custom_type, data, "abcdef01", None, "2026-11-22T03:00:00.000Z")
    )
    session = Session(parse_session_bytes(HEADER + line))
    (entry,) = session.entries
    assert entry.raw == {
        "type": "custom",
        "customType": custom_type,
        "data": data,
        "id": "abcdef01",
        "parentId": None,
        "timestamp": "2026-11-22T03:00:00.000Z",
    }
    assert serialize_entry(entry.raw) == line


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.dictionaries(st.text(max_size=5), json_values, max_size=3), min_size=1, max_size=15
    ),
    st.binary(max_size=40),
)
def test_appends_always_form_one_chain_after_any_garbage_tail(
    tmp_path: Path, payloads: list[dict], tail: bytes
) -> None:
    path = tmp_path / "chain.jsonl"
    path.write_bytes(HEADER + tail.replace(b"\n", b" "))
    app = SessionAppender(path, clock=FixedClock(1795316400000), ids=RandomIds())
    written = [app.append_custom("x", payload) for payload in payloads]
    session = read_session(path)
    ours = [e for e in session.entries if e.custom_type == "x"]
    assert [e.id for e in ours][-len(written) :] == [w["id"] for w in written]
    for previous, current in zip(written, written[1:]):
        assert current["parentId"] == previous["id"]
    assert [e.raw["data"] for e in ours][-len(written) :] == payloads
    assert session.leaf_id == written[-1]["id"]


@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "turn", "op"]), shas),
        min_size=1,
        max_size=25,
    )
)
def test_branch_current_is_the_last_state_recorded_on_the_branch(
    steps: list[tuple[str, str]],
) -> None:
    """Invariant of the log (D3): walking the branch, the last recorded state wins."""
    lines = [HEADER]
    parent = None
    expected_current = None
    pending: list[tuple[str, str]] = []
    for n, (kind, sha) in enumerate(steps):
        entry_id = f"{n:08x}"
        if kind in ("user", "assistant"):
            obj = {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": "t",
                "message": {"role": kind, "content": "x", "timestamp": n},
            }
            pending.append((entry_id, sha))
        elif kind == "turn" and pending:
            obj = custom_entry(TURN, build_turn(pending).to_data(), entry_id, parent, "t")
            expected_current = pending[-1][1]
            pending = []
        else:
            obj = custom_entry(OP, build_op(current=sha).to_data(), entry_id, parent, "t")
            expected_current = sha
        lines.append(orjson.dumps(obj) + b"\n")
        parent = entry_id
    session = Session(parse_session_bytes(b"".join(lines)))
    assert LedgerView.of(session).branch_state(session).current == expected_current
