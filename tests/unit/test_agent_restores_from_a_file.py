"""The agent tool's own restores are found in a session read from its file (the bytes path:
lines are filtered by their bytes before they are decoded, docs/pi.md#the-agents-rewind-tool),
and a line that does not mention the tool is never decoded for it."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.engine.agent_points import agent_restores, tool_restores
from ledger.session.store import read_session


def _line(obj: dict[str, object]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def test_restores_are_found_in_a_file_and_other_lines_stay_undecoded(tmp_path: Path) -> None:
    header = {
        "type": "session",
        "version": 3,
        "id": "s1",
        "timestamp": "2026-11-28T00:00:00Z",
        "cwd": "/x",
    }

    def message(i: str, parent: str | None, body: dict[str, object]) -> dict[str, object]:
        return {
            "type": "message",
            "id": i,
            "parentId": parent,
            "timestamp": "2026-11-28T00:00:01Z",
            "message": body,
        }

    result = {
        "role": "toolResult",
        "toolCallId": "c",
        "toolName": "rewind",
        "content": [],
        "details": {
            "current": "c" * 40,
            "point": {"id": "a1", "label": "before"},
            "restored": [{"path": "app.py"}],
        },
    }
    lines = [
        _line(header),
        _line(message("u1", None, {"role": "user", "content": "hi"})),
        _line(message("a1", "u1", {"role": "assistant", "content": []})),
        _line(message("t1", "a1", result)),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    session = read_session(path)
    assert tool_restores(session) == {"c" * 40: frozenset({"app.py"})}
    assert agent_restores(session)["c" * 40]["label"] == "before"
    user = session.get("u1")
    assert user is not None and not user.may_hold(b'"rewind"')
    assert user._raw is None, "a line without the tool's name is never decoded for it"
