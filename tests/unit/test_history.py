"""The operation history read from the records (:mod:`ledger.history`): which records are file
operations, their kind, before/after snapshots, order, and OP name resolution."""

from __future__ import annotations

import pytest

from ledger.errors import NameResolutionError
from ledger.history import lineage_operations, resolve_operation, session_operations
from ledger.ledgerview import LedgerView
from ledger.record_models import build_op, build_turn
from ledger.records import FORK_PENDING, OP, TURN
from tests.unit.test_ledger_view import HEADER, S1, S2, S3, S4, Builder


def _prompt(b: Builder, text: str, before: str, after: str) -> tuple[str, str]:
    user = b.user(text)
    reply = b.assistant("done")
    b.record(TURN, build_turn([(user, before), (reply, after)]).to_data())
    return user, reply


def test_restores_undos_and_moves_are_listed_newest_first_with_before_and_after() -> None:
    b = Builder()
    u1, _ = _prompt(b, "P1", S1, S2)
    _prompt(b, "P2", S2, S3)
    both = b.record(OP, build_op(current=S1, undo=S3).to_data(), parent=u1)
    files = b.record(OP, build_op(current=S2, undo=S1).to_data())
    undo = b.record(OP, build_op(current=S1, undo=S2).to_data())
    b.record(OP, build_op(bindings=[(u1, S4)]).to_data())  # a checkpoint: no file change
    keep = b.record(OP, build_op(current=S1).to_data())
    move = b.record(OP, build_op(current=S1).to_data(), parent=u1)
    session = b.session()
    ops = session_operations(LedgerView.of(session), session)
    assert [(op.record, op.kind, op.before, op.after) for op in ops] == [
        (move, "move", None, S1),
        (keep, "keep-files", None, S1),
        (undo, "undo", S2, S1),
        (files, "restore-files", S1, S2),
        (both, "restore-both", S3, S1),
    ]
    assert ops[-1].parent == u1 and ops[-1].session == "s1"
    assert [op.changed_files for op in ops] == [False, False, True, True, True]


def test_a_fork_restore_is_an_operation_and_a_fork_without_one_is_not() -> None:
    b = Builder()
    _prompt(b, "P1", S1, S2)
    b.record(FORK_PENDING, {"v": 2, "current": S2})
    restored = b.record(FORK_PENDING, {"v": 2, "current": S1, "undo": S2})
    session = b.session()
    ops = session_operations(LedgerView.of(session), session)
    assert [(op.record, op.kind, op.before, op.after) for op in ops] == [
        (restored, "fork-restore", S2, S1)
    ]


def test_a_forks_first_record_is_its_import() -> None:
    b = Builder()
    b.lines[0] = {**HEADER, "parentSession": "/elsewhere/parent.jsonl"}
    imported = b.record(OP, build_op(current=S1, undo=S2).to_data())
    later = b.record(OP, build_op(current=S2, undo=S1).to_data())
    session = b.session()
    ops = session_operations(LedgerView.of(session), session)
    assert [(op.record, op.kind) for op in ops] == [(later, "undo"), (imported, "fork-import")]


def test_lineage_merges_by_timestamp_newest_first() -> None:
    parent, child = Builder(), Builder()
    first = parent.record(OP, build_op(current=S1, undo=S2).to_data())
    child.n = 1  # one second later
    second = child.record(OP, build_op(current=S3, undo=S1).to_data())
    parent.n = 5
    third = parent.record(OP, build_op(current=S4, undo=S1).to_data())
    p, c = parent.session(), child.session()
    ops = lineage_operations([(LedgerView.of(c), c), (LedgerView.of(p), p)])
    assert [op.record for op in ops] == [third, second, first]


def test_an_op_name_is_an_id_or_a_unique_prefix_else_an_error_listing_candidates() -> None:
    b = Builder()
    ids = [
        b.record(OP, build_op(current=S1, undo=S2).to_data()),
        b.record(OP, build_op(current=S2, undo=S1).to_data()),
    ]
    session = b.session()
    ops = session_operations(LedgerView.of(session), session)
    assert resolve_operation(ops, ids[0], scope="s1").record == ids[0]
    with pytest.raises(NameResolutionError) as unknown:
        resolve_operation(ops, "zz", scope="s1")
    assert not unknown.value.ambiguous and set(unknown.value.candidates) == set(ids)
    with pytest.raises(NameResolutionError) as ambiguous:
        resolve_operation(ops, "r", scope="s1")
    assert ambiguous.value.ambiguous and set(ambiguous.value.candidates) == set(ids)
