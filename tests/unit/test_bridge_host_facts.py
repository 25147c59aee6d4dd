"""``BridgeHost`` takes the session facts an extension sends with an event (or with an append's
answer) exactly as it takes a ``session`` call's answer, and only when they continue its mirror."""

from __future__ import annotations

from typing import Any

from ledger.bridge.host import BridgeHost

HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00Z"}


def _entry(n: int) -> dict[str, Any]:
    parent = f"e{n - 1}" if n else None
    return {"type": "message", "id": f"e{n}", "parentId": parent, "timestamp": "t", "message": {}}


class Pi:
    """The extension's answers to the bridge's calls, over a list of entries."""

    def __init__(self, count: int) -> None:
        self.entries = [_entry(n) for n in range(count)]
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def facts(self, start: int) -> dict[str, Any]:
        facts = {
            "from": start,
            "entries": self.entries[start:],
            "total": len(self.entries),
            "leafId": self.entries[-1]["id"] if self.entries else None,
            "sessionFile": "/s.jsonl",
        }
        return {**facts, "header": HEADER} if start == 0 else facts

    def call(self, method: str, params: dict[str, Any]) -> Any:
        self.calls.append((method, params))
        if method == "session":
            answer = self.facts(int(params["from"]))
            return {**answer, "header": HEADER}
        if method == "appendEntry":
            self.entries.append({**_entry(len(self.entries)), "type": "custom"})
            return {"entryId": self.entries[-1]["id"], "session": self.facts(len(self.entries) - 1)}
        raise AssertionError(method)


def _mirror(host: BridgeHost) -> list[tuple[str, int]]:
    return [(entry.id, entry.line) for entry in host.session().entries]


def test_a_mirror_built_from_facts_equals_one_built_by_calls() -> None:
    told, asked = Pi(3), Pi(3)
    by_facts, by_calls = BridgeHost(told.call), BridgeHost(asked.call)
    by_facts.begin_event("/s.jsonl", "e2", told.facts(0))
    by_calls.begin_event("/s.jsonl", "e2")
    assert _mirror(by_facts) == _mirror(by_calls) == [("e0", 2), ("e1", 3), ("e2", 4)]
    for pi in (told, asked):
        pi.entries += [_entry(3), _entry(4)]
    by_facts.begin_event("/s.jsonl", "e4", told.facts(3))
    by_calls.begin_event("/s.jsonl", "e4")
    assert _mirror(by_facts) == _mirror(by_calls)
    assert by_facts.leaf_id() == by_calls.leaf_id() == "e4"
    assert by_facts.session().header == by_calls.session().header == HEADER
    assert told.calls == [] and [m for m, _ in asked.calls] == ["session", "session"]


def test_an_append_answer_with_facts_spares_the_next_sync() -> None:
    pi = Pi(2)
    host = BridgeHost(pi.call)
    host.begin_event("/s.jsonl", "e1", pi.facts(0))
    entry_id = host.append_custom("rewind-turn", {})
    assert [entry.id for entry in host.session_for_status().entries] == ["e0", "e1", entry_id]
    assert host.leaf_id() == entry_id
    assert [m for m, _ in pi.calls] == ["appendEntry"]


def test_facts_that_do_not_continue_the_mirror_are_not_taken() -> None:
    pi = Pi(3)
    host = BridgeHost(pi.call)
    host.begin_event("/s.jsonl", "e2", pi.facts(0))
    pi.entries.append(_entry(3))
    for wrong in (
        {**pi.facts(3), "from": 4},  # a gap
        {**pi.facts(3), "from": 2, "entries": pi.entries[2:]},  # an overlap
        {**pi.facts(3), "total": 5},  # not the whole rest
        {**pi.facts(3), "from": "3"},  # not a number
        {**pi.facts(3), "entries": None},
    ):
        assert host.take_facts(wrong) is False
    host.begin_event("/s.jsonl", "e3", {**pi.facts(3), "from": 4})
    assert [entry.id for entry in host.session().entries] == ["e0", "e1", "e2", "e3"]
    assert pi.calls == [("session", {"from": 3})]
