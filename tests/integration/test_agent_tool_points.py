"""How the model's ``rewind`` tool finds the point it names (docs/pi.md#the-agents-rewind-tool):
by id, by a unique id prefix, by a checkpoint label (exact, then ignoring case, the newest
first); an ambiguous prefix or a name nothing matches is refused with the newest points. Only
the matching points are resolved (:func:`ledger.engine.agent_points.find_point`), which must
answer as if every point had been."""

from __future__ import annotations

from pathlib import Path

from tests.bridgekit import FakePi
from tests.integration.test_agent_rewind_tool import begin, end, pi, tool_call, turn

__all__ = ["pi"]  # the fixture


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def test_points_are_found_by_id_prefix_and_label_and_refused_when_ambiguous(pi: FakePi) -> None:
    repo = pi.cwd
    pi.prompt("one", lambda: _write(repo / "a.txt", "1\n"))
    begin(pi, "two")
    first = turn(pi, 0, lambda: tool_call(pi, {"action": "checkpoint", "label": "Old"}))
    turn(pi, 1, lambda: _write(repo / "a.txt", "2\n"))
    second = turn(pi, 2, lambda: tool_call(pi, {"action": "checkpoint", "label": "old"}))
    turn(pi, 3, lambda: _write(repo / "a.txt", "3\n"))
    end(pi)
    begin(pi, "three")
    ids = [first["details"]["point"]["id"], second["details"]["point"]["id"]]

    def diff(point: str) -> dict[str, object]:
        return turn(pi, 0, lambda: tool_call(pi, {"action": "diff", "point": point}))

    by_id = diff(ids[0])
    assert by_id["details"]["point"]["id"] == ids[0]  # type: ignore[index]
    exact = diff("Old")
    assert exact["details"]["point"]["id"] == ids[0]  # type: ignore[index]
    folded = diff("OLD")  # no exact match: ignoring case, the newest
    assert folded["details"]["point"]["id"] == ids[1]  # type: ignore[index]
    # FakePi's ids are 8 hex digits counting up: "0000" is a prefix of every one of them.
    ambiguous = diff("0000")
    assert ambiguous["details"]["refused"] is True  # type: ignore[index]
    assert "more than one point" in str(ambiguous["text"])
    listed = turn(pi, 0, lambda: tool_call(pi, {"action": "list"}))
    every = [p["id"] for p in listed["details"]["points"]]
    prefixes = [
        i[:n]
        for i in every
        for n in range(4, len(i))
        if sum(j.startswith(i[:n]) for j in every) == 1
    ]
    assert prefixes, every
    unique = diff(prefixes[0])
    assert unique["details"]["point"]["id"] == next(i for i in every if i.startswith(prefixes[0]))  # type: ignore[index]
    nowhere = diff("no such point")
    assert nowhere["details"]["refused"] is True  # type: ignore[index]
    assert f'{ids[1]} ("old")' in str(nowhere["text"])  # the newest points, named
    end(pi)
