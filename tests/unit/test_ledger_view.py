"""The ledger view of one session: bindings, references, branch state (D3 fixed)."""

from __future__ import annotations

import orjson

from ledger.ledgerview import LedgerView
from ledger.record_models import build_op, build_turn
from ledger.records import FORK_PENDING, OP, TURN, custom_entry
from ledger.session.model import Session
from ledger.session.parse import parse_session_bytes

S1, S2, S3, S4 = ("1" * 40, "2" * 40, "3" * 40, "4" * 40)
HEADER = {
    "type": "session",
    "version": 3,
    "id": "s1",
    "timestamp": "2026-11-22T03:00:00.000Z",
    "cwd": "/repo",
}


class Builder:
    def __init__(self) -> None:
        self.lines = [HEADER]
        self.leaf: str | None = None
        self.n = 0

    def add(self, entry: dict, parent: str | bool | None = True) -> str:
        self.n += 1
        entry = {
            **entry,
            "id": entry.get("id", f"e{self.n:07d}"),
            "parentId": self.leaf if parent is True else parent,
            "timestamp": f"2026-11-22T03:00:{self.n:02d}.000Z",
        }
        self.lines.append(entry)
        self.leaf = entry["id"]
        return entry["id"]

    def user(self, text: str, parent: str | bool | None = True) -> str:
        return self.add(
            {
                "type": "message",
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": text}],
                    "timestamp": 1,
                },
            },
            parent,
        )

    def assistant(self, text: str) -> str:
        return self.add(
            {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": text}],
                    "timestamp": 2,
                },
            }
        )

    def record(self, custom_type: str, data: dict, parent: str | bool | None = True) -> str:
        self.n += 1
        entry = custom_entry(
            custom_type,
            data,
            f"r{self.n:07d}",
            self.leaf if parent is True else parent,
            f"2026-11-22T03:00:{self.n:02d}.000Z",
        )
        self.lines.append(entry)
        self.leaf = entry["id"]
        return entry["id"]

    def session(self) -> Session:
        data = b"".join(orjson.dumps(line) + b"\n" for line in self.lines)
        return Session(parse_session_bytes(data))


def test_bindings_from_every_branch_later_binding_wins() -> None:
    b = Builder()
    u1 = b.user("P1")
    a1 = b.assistant("done")
    b.record(TURN, build_turn([(u1, S1), (a1, S2)]).to_data())
    b.record(OP, build_op(bindings=[(u1, S3)]).to_data(), parent=u1)  # a side branch
    view = LedgerView.of(b.session())
    assert view.entry_to_commit == {u1: S3, a1: S2}
    assert [r.kind for r in view.references] == ["binding", "binding", "binding"]


def test_a_later_turn_beats_an_earlier_tree_op_current() -> None:
    """D3: after a /tree op and new prompts, current is the new prompt's post-turn state."""
    b = Builder()
    u1 = b.user("P1")
    a1 = b.assistant("one")
    b.record(TURN, build_turn([(u1, S1), (a1, S2)]).to_data())
    b.record(OP, build_op(current=S1, undo=S2).to_data())
    u2 = b.user("P2")
    a2 = b.assistant("two")
    turn2 = b.record(TURN, build_turn([(u2, S1), (a2, S3)]).to_data())
    session = b.session()
    view = LedgerView.of(session)
    state = view.branch_state(session)
    assert (state.current, state.current_from) == (S3, turn2)
    assert state.undo == S2
    # The reference rule (file-order latest op) still describes what retention pins.
    assert view.latest_current == S1 and view.latest_undo == S2


def test_branch_state_follows_the_branch_not_the_file() -> None:
    b = Builder()
    u1 = b.user("P1")
    a1 = b.assistant("one")
    t1 = b.record(TURN, build_turn([(u1, S1), (a1, S2)]).to_data())
    b.user("P2 on a branch", parent=t1)
    b.record(OP, build_op(current=S4).to_data())
    side = b.session()
    view = LedgerView.of(side)
    assert view.branch_state(side).current == S4
    assert view.branch_state(side, leaf_id=t1).current == S2
    assert view.branch_state(side, leaf_id=u1).current == S1


def test_fork_pending_latest_wins_and_is_not_a_retention_reference() -> None:
    b = Builder()
    b.user("P1")
    b.record(FORK_PENDING, {"v": 2, "current": S1})
    b.record(FORK_PENDING, {"v": 2, "current": S2, "undo": S3})
    view = LedgerView.of(b.session())
    assert view.fork_pending is not None and (
        view.fork_pending.current,
        view.fork_pending.undo,
    ) == (S2, S3)
    assert view.snapshots == []
    assert all(not r.is_retention_reference for r in view.references)


def test_reference_examples_read_back_to_the_documented_state() -> None:
    """docs/formats.md#rewind-fork-pending: a /tree restore op, then /fork + Undo; the child imports the pending state."""
    b = Builder()
    u1 = b.user("Fork from here")
    summary = b.add({"type": "branch_summary", "fromId": u1, "summary": "s"}, parent=u1)
    b.record(
        OP, {"v": 2, "snapshots": [S1, S2], "current": 0, "undo": 1, "bindings": [[summary, 0]]}
    )
    b.record(FORK_PENDING, {"v": 2, "current": S2, "undo": S1})
    parent = b.session()
    view = LedgerView.of(parent)
    assert view.entry_to_commit == {summary: S1}
    state = view.branch_state(parent)
    assert (state.current, state.undo) == (S1, S2)
    assert (view.fork_pending.current, view.fork_pending.undo) == (S2, S1)

    child = Builder()
    child.record(OP, {"v": 2, "snapshots": [S2, S1], "current": 0, "undo": 1}, parent=None)
    child_session = child.session()
    child_state = LedgerView.of(child_session).branch_state(child_session)
    assert (child_state.current, child_state.undo) == (S2, S1)


def test_references_carry_the_record_timestamp() -> None:
    b = Builder()
    u1 = b.user("P1")
    b.record(TURN, build_turn([(u1, S1)]).to_data())
    (ref,) = LedgerView.of(b.session()).references
    assert ref.timestamp == "2026-11-22T03:00:02.000Z"
    assert ref.timestamp_ms == 1795316402000


def test_invalid_records_are_listed_and_ignored() -> None:
    b = Builder()
    u1 = b.user("P1")
    b.record(TURN, {"v": 1, "snapshots": [S1], "bindings": [[u1, 0]]})
    view = LedgerView.of(b.session())
    assert view.entry_to_commit == {}
    assert len(view.invalid) == 1
