"""Appending like Pi: exact bytes, parent = leaf, torn lines, refusal of legacy files."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ledger.clock import FixedClock, SequentialIds
from ledger.errors import SessionAppendError
from ledger.record_models import build_turn
from ledger.session.store import SessionAppender, create_session_file, encode_cwd, read_session

HEADER = b'{"type":"session","version":3,"id":"s1","timestamp":"2026-11-22T03:00:00.000Z","cwd":"/repo"}\n'
USER = b'{"type":"message","id":"e0000001","parentId":null,"timestamp":"2026-11-22T03:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}\n'
SHA = "3f7228a02b59208f42f3604cd995be94337caeb9"
START_MS = 1795316705461  # 2026-11-22T03:05:05.461Z


def appender(path: Path) -> SessionAppender:
    return SessionAppender(path, clock=FixedClock(START_MS), ids=SequentialIds(0xE0000003))


def test_appended_custom_entry_has_pi_bytes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + USER)
    written = appender(path).append_custom("rewind-turn", build_turn([("e0000001", SHA)]).to_data())
    assert written["parentId"] == "e0000001"
    assert path.read_bytes() == HEADER + USER + (
        b'{"type":"custom","customType":"rewind-turn","data":{"v":2,"snapshots":["'
        + SHA.encode()
        + b'"],"bindings":[["e0000001",0]]},"id":"e0000003","parentId":"e0000001","timestamp":"2026-11-22T03:05:05.461Z"}\n'
    )


def test_consecutive_appends_chain_and_see_other_writers(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + USER)
    ours = appender(path)
    first = ours.append_custom("x", {"n": 1})
    with path.open("ab") as other:  # another writer appends behind our back
        other.write(
            b'{"type":"custom","customType":"x","data":{},"id":"abcdef01","parentId":"'
            + first["id"].encode()
            + b'","timestamp":"t"}\n'
        )
    second = ours.append_custom("x", {"n": 2})
    assert second["parentId"] == "abcdef01"
    assert read_session(path).leaf_id == second["id"]


def test_ids_are_unique_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + USER)
    clash = SessionAppender(path, clock=FixedClock(START_MS), ids=SequentialIds(0xE0000001))
    assert clash.append_custom("x", {})["id"] == "e0000002"


def test_a_torn_last_line_gets_a_newline_before_our_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + USER + b'{"type":"message","id":"torn')
    written = appender(path).append_custom("x", {})
    session = read_session(path)
    assert session.leaf_id == written["id"]
    assert written["parentId"] == "e0000001"
    assert [s.reason for s in session.skipped] == ["not valid JSON"]


def test_explicit_parent_makes_a_side_branch(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + USER)
    app = appender(path)
    app.append_custom("x", {})
    side = app.append_custom("x", {}, parent_id=None)
    assert side["parentId"] is None


def test_legacy_files_are_refused_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    data = b'{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/r"}\n{"type":"message","timestamp":"t","message":{"role":"user","content":"x"}}\n'
    path.write_bytes(data)
    with pytest.raises(SessionAppendError, match="version 1") as err:
        appender(path).append_custom("x", {})
    assert err.value.hint
    assert path.read_bytes() == data


def test_appending_to_a_missing_file_or_directory_fails_cleanly(tmp_path: Path) -> None:
    with pytest.raises(SessionAppendError, match="no such file"):
        appender(tmp_path / "nope.jsonl").append_custom("x", {})
    with pytest.raises(SessionAppendError, match="directory"):
        appender(tmp_path).append_custom("x", {})


def test_a_rewritten_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + USER)
    app = appender(path)
    app.append_custom("x", {})
    path.write_bytes(HEADER + USER)  # rewritten (e.g. by a migration) behind our back
    again = app.append_custom("x", {})
    assert again["parentId"] == "e0000001"


def test_created_session_files_follow_pi_naming_and_headers(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    parent = "/home/dev/.pi/agent/sessions/--home-dev-proj--/x.jsonl"
    entries = [orjson.loads(USER)]
    path = create_session_file(
        sessions,
        "/home/dev/proj",
        entries,
        parent_session=parent,
        clock=FixedClock(START_MS),
        ids=SequentialIds(7),
    )
    assert path.parent.name == "--home-dev-proj--" == encode_cwd("/home/dev/proj")
    assert path.name == "2026-11-22T03-05-05-461Z_00000000-0000-0000-0000-000000000007.jsonl"
    session = read_session(path)
    assert session.header == {
        "type": "session",
        "version": 3,
        "id": "00000000-0000-0000-0000-000000000007",
        "timestamp": "2026-11-22T03:05:05.461Z",
        "cwd": "/home/dev/proj",
        "parentSession": parent,
    }
    assert path.read_bytes().splitlines()[1] + b"\n" == USER
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    ("cwd", "encoded"),
    [
        ("/home/dev/proj", "--home-dev-proj--"),
        ("C:\\Users\\x", "--C--Users-x--"),
        ("/a-b/c", "--a-b-c--"),
        ("//srv/x", "---srv-x--"),
    ],
)
def test_cwd_encoding_matches_pi(cwd: str, encoded: str) -> None:
    assert encode_cwd(cwd) == encoded
