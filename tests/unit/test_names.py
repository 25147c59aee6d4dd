"""SESSION and ENTRY names: exact, unique prefix, @, and errors that list candidates."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ledger.errors import NameResolutionError
from ledger.session.agent_dir import resolve_agent_dir
from ledger.session.discovery import SessionInfo, resolve_entry, resolve_session
from ledger.session.model import Session
from ledger.session.parse import parse_session_bytes


def info(session_id: str, name: str) -> SessionInfo:
    return SessionInfo(Path(f"/s/{name}.jsonl"), session_id, "/r", None, None, 0)


CANDIDATES = [info("01a2-bbbb", "newest"), info("01a2-aaaa", "older"), info("ffff-0000", "oldest")]


def test_session_names_resolve_to_one_file() -> None:
    assert resolve_session("@", CANDIDATES, scope="x") == Path("/s/newest.jsonl")
    assert resolve_session("01a2-a", CANDIDATES, scope="x") == Path("/s/older.jsonl")
    assert resolve_session("ffff-0000", CANDIDATES, scope="x") == Path("/s/oldest.jsonl")
    assert resolve_session("some/file.jsonl", CANDIDATES, scope="x") == Path("some/file.jsonl")


def test_ambiguous_and_unknown_session_names_list_candidates() -> None:
    with pytest.raises(NameResolutionError) as err:
        resolve_session("01a2", CANDIDATES, scope="repo")
    assert err.value.ambiguous and len(err.value.candidates) == 2
    with pytest.raises(NameResolutionError) as err:
        resolve_session("zz", CANDIDATES, scope="repo")
    assert not err.value.ambiguous and err.value.candidates == [
        "01a2-bbbb",
        "01a2-aaaa",
        "ffff-0000",
    ]
    with pytest.raises(NameResolutionError, match="no session matches '@'"):
        resolve_session("@", [], scope="repo")


def session() -> Session:
    lines = [{"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/r"}]
    for n, entry_id in enumerate(["abc00001", "abc00002", "def00003"]):
        lines.append(
            {
                "type": "custom",
                "customType": "x",
                "id": entry_id,
                "parentId": lines[-1].get("id") if n else None,
                "timestamp": "t",
            }
        )
    return Session(parse_session_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines)))


def test_entry_names_resolve_by_id_prefix_and_leaf() -> None:
    s = session()
    assert resolve_entry(s, "@") == "def00003"
    assert resolve_entry(s, "abc00001") == "abc00001"
    assert resolve_entry(s, "def") == "def00003"
    with pytest.raises(NameResolutionError) as err:
        resolve_entry(s, "abc")
    assert err.value.ambiguous and err.value.candidates == ["abc00001", "abc00002"]
    with pytest.raises(NameResolutionError) as err:
        resolve_entry(s, "999")
    assert "no entry matches '999' in session s" in err.value.message and err.value.hint


def test_agent_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "~/custom-agent")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_agent_dir("/explicit") == Path("/explicit")
    assert resolve_agent_dir(None) == tmp_path / "custom-agent"
    monkeypatch.delenv("PI_CODING_AGENT_DIR")
    assert resolve_agent_dir(None) == tmp_path / ".pi" / "agent"
