"""Reading messy session files: skips are reported, the file is never changed."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from ledger.errors import SessionFileError
from ledger.session.store import read_session

HEADER = b'{"type":"session","version":3,"id":"s1","timestamp":"2026-11-22T03:00:00.000Z","cwd":"/repo"}\n'


def entry(i: int, parent: str | None) -> bytes:
    return (
        orjson.dumps(
            {
                "type": "message",
                "id": f"e{i:07d}",
                "parentId": parent,
                "timestamp": "2026-11-22T03:00:01.000Z",
                "message": {"role": "user", "content": "x", "timestamp": 1},
            }
        )
        + b"\n"
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    return path


def test_garbage_lines_are_skipped_and_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + entry(1, None) + b'not json\n[1,2]\n{"type":"x"}\n' + entry(2, "e0000001"),
    )
    before = digest(path)
    session = read_session(path)
    assert [e.id for e in session.entries] == ["e0000001", "e0000002"]
    assert [(s.line, s.reason) for s in session.skipped] == [
        (3, "not valid JSON"),
        (4, "not a JSON object"),
        (5, "entry without a string id"),
    ]
    assert digest(path) == before


def test_a_torn_last_line_is_skipped_and_named(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + entry(1, None) + entry(2, "e0000001")[:30])
    session = read_session(path)
    assert session.leaf_id == "e0000001"
    assert [s.reason for s in session.skipped] == ["torn last line"]
    assert not session.ends_with_newline


def test_blank_lines_and_crlf_are_tolerated(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER.replace(b"\n", b"\r\n") + b"\n\n" + entry(1, None))
    assert read_session(path).leaf_id == "e0000001"


def test_non_utf8_bytes_are_replaced_like_pi_does(tmp_path: Path) -> None:
    bad = entry(1, None).replace(b'"content":"x"', b'"content":"\xff\xfe"')
    session = read_session(write(tmp_path, HEADER + bad))
    assert session.entries[0].raw["message"]["content"] == "\ufffd\ufffd"
    assert session.skipped[0].reason == "invalid UTF-8 replaced with U+FFFD"


def test_a_ten_megabyte_line_is_read(tmp_path: Path) -> None:
    big = (
        orjson.dumps(
            {
                "type": "message",
                "id": "big00001",
                "parentId": None,
                "timestamp": "t",
                "message": {"role": "user", "content": "y" * 10_000_000, "timestamp": 1},
            }
        )
        + b"\n"
    )
    session = read_session(write(tmp_path, HEADER + big))
    assert session.leaf_id == "big00001"


@pytest.mark.parametrize(
    "data", [b"", b"\n\n", b"garbage\n", entry(1, None), b'{"type":"session"}\n']
)
def test_a_file_without_a_header_is_a_clear_error(tmp_path: Path, data: bytes) -> None:
    path = write(tmp_path, data)
    with pytest.raises(SessionFileError) as err:
        read_session(path)
    assert "not a Pi session file" in err.value.message
    assert err.value.hint


def test_a_directory_or_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SessionFileError, match="is a directory"):
        read_session(tmp_path)
    with pytest.raises(SessionFileError, match="no such file"):
        read_session(tmp_path / "missing.jsonl")


def test_repeated_ids_keep_the_first_occurrence(tmp_path: Path) -> None:
    first = entry(1, None)
    second = first.replace(b'"content":"x"', b'"content":"second"')
    session = read_session(write(tmp_path, HEADER + first + second))
    assert len(session.entries) == 2
    assert session.by_id["e0000001"].raw["message"]["content"] == "x"


def test_parent_cycles_do_not_hang_branch_or_tree(tmp_path: Path) -> None:
    a = (
        orjson.dumps(
            {
                "type": "custom",
                "customType": "x",
                "id": "aaaaaaaa",
                "parentId": "bbbbbbbb",
                "timestamp": "t",
            }
        )
        + b"\n"
    )
    b = (
        orjson.dumps(
            {
                "type": "custom",
                "customType": "x",
                "id": "bbbbbbbb",
                "parentId": "aaaaaaaa",
                "timestamp": "t",
            }
        )
        + b"\n"
    )
    session = read_session(write(tmp_path, HEADER + a + b))
    assert [e.id for e in session.branch()] == ["aaaaaaaa", "bbbbbbbb"]
    assert sorted(e.id for _, e in session.tree()) == ["aaaaaaaa", "bbbbbbbb"]


def test_unknown_entry_types_and_fields_are_kept(tmp_path: Path) -> None:
    odd = (
        orjson.dumps(
            {
                "type": "future_thing",
                "id": "f0000001",
                "parentId": None,
                "timestamp": "t",
                "extra": {"k": [1]},
            }
        )
        + b"\n"
    )
    session = read_session(write(tmp_path, HEADER + odd))
    assert session.entries[0].raw["extra"] == {"k": [1]}
    assert session.entries[0].type == "future_thing"
