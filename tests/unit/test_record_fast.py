"""Golden records of the pydantic-free builders: the exact bytes the reference writes."""

from __future__ import annotations

import orjson
import pytest

from ledger.record_fast import ForkPendingData, build_op, build_turn

A, B, C = "a" * 40, "b" * 40, "c" * 40


def test_records_are_written_byte_for_byte_as_the_reference_writes_them() -> None:
    golden = {
        "turn": (
            build_turn([("u1", A), ("t1", B), ("a1", B)]),
            b'{"v":2,"snapshots":["' + A.encode() + b'","' + B.encode() + b'"],'
            b'"bindings":[["u1",0],["t1",1],["a1",1]]}',
        ),
        "undo op": (
            build_op(current=A, undo=B),
            b'{"v":2,"snapshots":["'
            + A.encode()
            + b'","'
            + B.encode()
            + b'"],"current":0,"undo":1}',
        ),
        "checkpoint op": (
            build_op(bindings=[("e", C)]),
            b'{"v":2,"snapshots":["' + C.encode() + b'"],"bindings":[["e",0]]}',
        ),
        "restore op with binding": (
            build_op(current=A, undo=B, bindings=[("e", B), ("f", C)]),
            b'{"v":2,"snapshots":["'
            + A.encode()
            + b'","'
            + B.encode()
            + b'","'
            + C.encode()
            + b'"],"current":0,"undo":1,"bindings":[["e",1],["f",2]]}',
        ),
        "fork pending": (
            ForkPendingData(v=2, current=A, undo=B),
            b'{"v":2,"current":"' + A.encode() + b'","undo":"' + B.encode() + b'"}',
        ),
        "fork pending, no undo": (
            ForkPendingData(v=2, current=A),
            b'{"v":2,"current":"' + A.encode() + b'"}',
        ),
    }
    for name, (record, expected) in golden.items():
        assert orjson.dumps(record.to_data()) == expected, name


def test_records_the_models_refuse_are_refused() -> None:
    with pytest.raises(ValueError, match="an undo needs a current"):
        build_op(undo=A)
    with pytest.raises(ValueError, match="needs bindings, current or undo"):
        build_op(bindings=[])
    with pytest.raises(ValueError, match="String should match pattern"):
        build_turn([("u", A.upper())])
    with pytest.raises(ValueError, match="at least 1 character"):
        build_op(bindings=[("", A)])
