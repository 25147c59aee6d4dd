"""How a session is named to the user (ledger/session_names.py, issue 33 item 5): its name or
first prompt plus its id's random tail, never a UUIDv7's time-ordered prefix alone."""

from __future__ import annotations

import json

from ledger.presence import Presence, parse_presence
from ledger.session.model import Session
from ledger.session.parse import parse_session_bytes
from ledger.session_names import (
    MAX_TITLE_CHARS,
    TitleTracker,
    id_tail,
    label_from,
    session_label,
    session_title,
)

# Two UUIDv7 ids minted in the same millisecond: the first 13 characters are the clock.
FIRST = "01a22016-5c3e-7a11-9f0b-2d4c7f3a9c2e"
SECOND = "01a22016-5c3e-7b42-8e1d-6a0b11d04f57"


def test_a_named_session_is_named_by_its_name_and_its_ids_tail() -> None:
    assert (
        label_from(FIRST, "fix the login bug", "something else")
        == '"fix the login bug" (…7f3a9c2e)'
    )


def test_without_a_name_the_first_prompts_words_name_it() -> None:
    assert (
        label_from(FIRST, None, "add a cache to the parser")
        == '"add a cache to the parser" (…7f3a9c2e)'
    )
    assert label_from(FIRST, "   ", "add a cache") == '"add a cache" (…7f3a9c2e)', (
        "a blank name is none"
    )


def test_with_neither_the_tail_alone_names_it() -> None:
    assert label_from(FIRST, None, None) == "…7f3a9c2e"
    assert session_label(FIRST) == "…7f3a9c2e"
    assert label_from(FIRST, None, "\n\t \x1b") == "…7f3a9c2e", "nothing printable is no title"


def test_two_ids_sharing_their_time_prefix_get_different_labels() -> None:
    assert FIRST[:8] == SECOND[:8]
    assert label_from(FIRST, None, None) != label_from(SECOND, None, None)
    assert label_from(FIRST, None, "same") != label_from(SECOND, None, "same")
    assert FIRST[:8] not in label_from(FIRST, None, "same"), "never the time-ordered prefix"


def test_a_long_multiline_prompt_becomes_one_bounded_line_cut_at_a_word() -> None:
    prompt = "please refactor\nthe whole\tauthentication module so that " + "it " * 50
    label = label_from(FIRST, None, prompt)
    title = label[1 : label.index('" (')]
    assert "\n" not in label and "\t" not in label
    assert title.startswith("please refactor the whole authentication")
    assert title.endswith("…") and len(title) <= MAX_TITLE_CHARS + 1
    assert not title[:-1].endswith(" "), "cut at a word, no trailing space"


def test_control_and_format_characters_are_removed() -> None:
    # A terminal escape, a bell, a carriage return and a right-to-left override.
    label = label_from(FIRST, "\x1b[31mred\x07 alert\r\n\u202eevil", None)
    assert label == '"[31mred alert evil" (…7f3a9c2e)'
    assert all(ch.isprintable() for ch in label)


def test_odd_ids_keep_a_bounded_printable_tail() -> None:
    assert id_tail("s1") == "s1", "a short id whole, without an ellipsis"
    assert id_tail("abc\x1b-def-0123456789") == "…23456789"
    assert id_tail("---") == "?"


def test_a_parsed_sessions_title_is_its_latest_name_else_its_first_prompt() -> None:
    header = {"type": "session", "id": FIRST, "version": 3}
    user = {
        "type": "message",
        "id": "u1",
        "message": {"role": "user", "content": "first ask"},
        "parentId": None,
    }
    later = {
        "type": "message",
        "id": "u2",
        "parentId": "u1",
        "message": {"role": "user", "content": [{"type": "text", "text": "second ask"}]},
    }
    named = {
        "type": "session_info",
        "id": "n1",
        "name": "Fixture: hello.py project",
        "parentId": "u1",
    }
    assert session_title(_session(header, user, later)) == "first ask"
    assert session_title(_session(header, user, named)) == "Fixture: hello.py project"
    assert session_title(_session(header)) is None


def test_a_presence_entry_carries_the_title_and_pis_pid_and_old_entries_still_read() -> None:
    entry = Presence(FIRST, None, 200, None, None, "h", 1, title="fix it", pi_pid=100)
    raw = orjson_bytes(entry.to_json())
    back = parse_presence(raw, "stem")
    assert (back.title, back.pi_pid, back.shown_pid, back.label) == (
        "fix it",
        100,
        100,
        '"fix it" (…7f3a9c2e)',
    )
    old = b'{"version": 1, "sessionId": "%s", "pid": 200, "startedMs": 1, "host": "h"}' % (
        FIRST.encode()
    )
    legacy = parse_presence(old, "stem")
    assert (legacy.title, legacy.pi_pid, legacy.shown_pid) == (None, None, 200)
    odd = old[:-1] + b', "title": 7, "piPid": "x"}'
    assert parse_presence(odd, "stem").pi_pid is None, "a wrong type is dropped, never fatal"


def orjson_bytes(data: object) -> bytes:
    return json.dumps(data).encode()


def _session(*lines: dict[str, object]) -> Session:
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    return Session(parse_session_bytes(data), None)


def test_the_live_title_follows_the_session_as_it_grows_reading_only_new_entries() -> None:
    """The bridge's tracker gives what session_title gives after every append, and a session
    with fewer entries (another one, read anew) starts it over."""
    header = {"type": "session", "id": FIRST, "version": 3}
    entries = [
        {
            "type": "message",
            "id": "a1",
            "parentId": None,
            "message": {"role": "assistant", "content": "hello"},
        },
        {
            "type": "message",
            "id": "u1",
            "parentId": "a1",
            "message": {"role": "user", "content": "first ask"},
        },
        {
            "type": "message",
            "id": "u2",
            "parentId": "u1",
            "message": {"role": "user", "content": "second ask"},
        },
        {"type": "session_info", "id": "n1", "parentId": "u2", "name": "Named"},
        {
            "type": "message",
            "id": "u3",
            "parentId": "n1",
            "message": {"role": "user", "content": "third"},
        },
        {"type": "session_info", "id": "n2", "parentId": "u3", "name": "  "},
    ]
    tracker = TitleTracker()
    for count in range(len(entries) + 1):
        session = _session(header, *entries[:count])
        assert tracker.update(session) == session_title(session), count
    assert tracker.update(_session(header, entries[1])) == "first ask"


def test_a_title_from_the_head_of_a_session_file_reads_only_its_first_lines(tmp_path) -> None:
    from ledger.session_names import HEAD_TITLE_BYTES, head_title

    header = {"type": "session", "version": 3, "id": "01a2-7f3a9c2e", "cwd": "/w"}
    prompt = {
        "type": "message",
        "id": "u1",
        "message": {"role": "user", "content": [{"type": "text", "text": "fix the login bug"}]},
    }
    path = tmp_path / "s.jsonl"
    lines = [json.dumps(header), json.dumps(prompt)]
    path.write_text("\n".join(lines) + "\n")
    assert head_title(path) == "fix the login bug"
    named = {"type": "session_info", "id": "n1", "name": "  login work "}
    path.write_text("\n".join([*lines, json.dumps(named)]) + "\n")
    assert head_title(path) == "login work"
    # A name set beyond the head is not read: the cost stays bounded by the head.
    filler = json.dumps({"type": "custom", "id": "c", "data": "x" * 1000})
    far = [*lines, *([filler] * (HEAD_TITLE_BYTES // 1000 + 10)), json.dumps(named)]
    path.write_text("\n".join(far) + "\n")
    assert head_title(path) == "fix the login bug"
    assert head_title(tmp_path / "missing.jsonl") is None
