"""Wire format of the three records: exact bytes, key orders, and the reference validators."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ledger.record_models import ForkPendingData, RewindOpData, build_op, build_turn
from ledger.records import (
    FORK_PENDING,
    OP,
    TURN,
    DecodedRecord,
    InvalidRecord,
    custom_entry,
    decode_record,
    serialize_entry,
)

A = "3f7228a02b59208f42f3604cd995be94337caeb9"
B = "db05b2c535f04ced9ad73683033ff7b521ce0979"


def test_turn_record_bytes_equal_the_reference_example() -> None:
    data = build_turn([("e0000001", A), ("e0000002", B)]).to_data()
    line = serialize_entry(
        custom_entry(TURN, data, "e0000003", "e0000002", "2026-11-22T03:05:05.461Z")
    )
    assert line == (
        b'{"type":"custom","customType":"rewind-turn","data":{"v":2,"snapshots":["'
        + A.encode()
        + b'","'
        + B.encode()
        + b'"],"bindings":[["e0000001",0],["e0000002",1]]},"id":"e0000003",'
        b'"parentId":"e0000002","timestamp":"2026-11-22T03:05:05.461Z"}\n'
    )


def test_turn_record_deduplicates_snapshots_and_reuses_positions() -> None:
    data = build_turn([("u1", A), ("a1", A), ("a2", B)]).to_data()
    assert data == {"v": 2, "snapshots": [A, B], "bindings": [["u1", 0], ["a1", 0], ["a2", 1]]}


def test_op_record_keys_follow_the_reference_order_with_bindings_last() -> None:
    data = build_op(current=A, undo=B, bindings=[("sum00001", A)]).to_data()
    assert list(data) == ["v", "snapshots", "current", "undo", "bindings"]
    assert data == {
        "v": 2,
        "snapshots": [A, B],
        "current": 0,
        "undo": 1,
        "bindings": [["sum00001", 0]],
    }
    assert build_op(current=B).to_data() == {"v": 2, "snapshots": [B], "current": 0}
    assert build_op(bindings=[("c1", A)]).to_data() == {
        "v": 2,
        "snapshots": [A],
        "bindings": [["c1", 0]],
    }


def test_op_record_without_current_undo_or_bindings_is_refused() -> None:
    with pytest.raises(ValidationError):
        RewindOpData(v=2, snapshots=[A])


def test_fork_pending_keys_are_v_current_undo() -> None:
    data = ForkPendingData(v=2, current=B, undo=A).to_data()
    line = serialize_entry(
        custom_entry(FORK_PENDING, data, "e0000005", "e0000004", "2026-11-22T03:05:06.000Z")
    )
    assert line.startswith(
        b'{"type":"custom","customType":"rewind-fork-pending","data":{"v":2,"current":"'
        + B.encode()
        + b'","undo":"'
        + A.encode()
        + b'"},"id":"e0000005"'
    )
    assert list(ForkPendingData(v=2, current=B).to_data()) == ["v", "current"]


def test_models_refuse_short_shas() -> None:
    with pytest.raises(ValidationError):
        ForkPendingData(v=2, current="abc")


def decode(custom_type: str, data: object) -> DecodedRecord | InvalidRecord:
    return decode_record(custom_type, data, "r1", "p1", "2026-11-22T03:05:05.461Z")


@pytest.mark.parametrize(
    ("custom_type", "data", "reason"),
    [
        (TURN, {"v": 1, "snapshots": [A], "bindings": []}, "v is 1"),
        (TURN, {"v": "2", "snapshots": [A], "bindings": []}, "not 2"),
        (TURN, {"v": True, "snapshots": [A], "bindings": []}, "not 2"),
        (TURN, {"v": 2, "snapshots": A, "bindings": []}, "snapshots is not an array"),
        (TURN, {"v": 2, "snapshots": [A]}, "bindings is not an array"),
        (OP, {"v": 2}, "snapshots is not an array"),
        (FORK_PENDING, {"v": 2, "current": ""}, "current is not a non-empty string"),
        (OP, "not an object", "data is not an object"),
    ],
)
def test_invalid_records_are_reported_not_raised(
    custom_type: str, data: object, reason: str
) -> None:
    result = decode(custom_type, data)
    assert isinstance(result, InvalidRecord)
    assert reason in result.reason


def test_unusable_bindings_are_dropped_with_a_problem_each() -> None:
    result = decode(
        TURN,
        {"v": 2, "snapshots": [A], "bindings": [["u1", 0], ["", 0], ["u2", 5], "x", ["u3", True]]},
    )
    assert isinstance(result, DecodedRecord)
    assert result.bindings == (("u1", A),)
    assert len(result.problems) == 4


def test_op_current_and_undo_resolve_to_shas() -> None:
    result = decode(OP, {"v": 2, "snapshots": [A, B], "current": 0, "undo": 1})
    assert isinstance(result, DecodedRecord)
    assert (result.current, result.undo) == (A, B)


def test_records_accept_any_key_order_and_extra_keys() -> None:
    result = decode(TURN, {"bindings": [["u1", 0]], "extra": 1, "snapshots": [A], "v": 2.0})
    assert isinstance(result, DecodedRecord)
    assert result.bindings == (("u1", A),)
