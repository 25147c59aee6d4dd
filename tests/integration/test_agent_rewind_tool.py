"""The model's ``rewind`` tool on a real ``rewind serve --stdio`` (docs/pi.md#the-agents-rewind-tool):
a checkpoint mid-turn, then a restore that takes back only this conversation's agent's files,
leaves the user's and another session's work alone and names it, refuses while another
session's turn runs, and is undone like any files-only restore."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.records import OP
from tests.bridgekit import FakePi
from tests.gitkit import write


@pytest.fixture
def pi(bridge_pi: FakePi) -> FakePi:
    return bridge_pi


def _write(path: Path, text: str) -> None:
    write(path.parent, path.name, text)


def tool_call(pi: FakePi, payload: dict[str, Any]) -> dict[str, Any]:
    """One call of the tool in the current turn, as Pi runs it: the assistant message that
    calls it is the leaf; the tool's result is appended after the tool returns."""
    reply = pi.event("rewind_tool", payload)
    assert reply.error is None, reply.error
    data = reply.result
    pi._append(
        {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": f"call-{len(pi.entries)}",
                "toolName": "rewind",
                "content": [{"type": "text", "text": data["text"]}],
                "details": data["details"],
                "isError": False,
                "timestamp": 3,
            },
        }
    )
    if "label" in data:  # the extension labels the entry (pi.setLabel): a Pi label entry
        pi._append(
            {"type": "label", "targetId": data["label"]["entryId"], "label": data["label"]["label"]}
        )
    data["_reply"] = reply
    return data


def turn(pi: FakePi, index: int, act: Callable[[], Any] | None = None, text: str = "step") -> Any:
    """One turn of a prompt: an assistant message, then what its tools do."""
    if index:
        pi.event("turn_start", {"turnIndex": index})
    pi.assistant(f"{text} {index}")
    got = act() if act is not None else None
    pi.event("turn_end", {"turnIndex": index, "role": "assistant"})
    return got


def begin(pi: FakePi, text: str) -> str:
    pi.event("before_agent_start", {"prompt": text})
    pi.event("turn_start", {"turnIndex": 0})
    return pi.user(text)


def end(pi: FakePi) -> None:
    pi.event("agent_end", {})


def checkpoint_then_edit(pi: FakePi) -> dict[str, Any]:
    repo = pi.cwd
    pi.prompt("set up", lambda: (_write(repo / "app.py", "v1\n"), _write(repo / "util.py", "u\n")))
    begin(pi, "refactor, carefully")
    made = turn(pi, 0, lambda: tool_call(pi, {"action": "checkpoint", "label": "before refactor"}))
    turn(
        pi,
        1,
        lambda: (
            _write(repo / "app.py", "v2 broken\n"),
            (repo / "util.py").unlink(),
            _write(repo / "new.py", "n\n"),
        ),
    )
    turn(pi, 2)
    end(pi)
    return made


def test_a_checkpoint_binds_the_calling_message_and_survives_its_turn(pi: FakePi) -> None:
    made = checkpoint_then_edit(pi)
    entry = made["details"]["point"]["id"]
    assert made["label"] == {"entryId": entry, "label": "before refactor"}
    assert "before refactor" in made["text"] and entry in made["text"]
    called_from = next(e for e in pi.entries if e["id"] == entry)
    assert called_from["message"]["role"] == "assistant"
    # The turn that called it did not rebind it to its post-turn snapshot (the edits).
    turns = pi.custom("rewind-turn")
    assert all(entry not in {b[0] for b in t["bindings"]} for t in turns)
    ops = pi.custom(OP)
    assert [b[0] for b in ops[-1]["bindings"]] == [entry]


def test_restore_takes_back_only_the_agents_files_and_names_the_users(pi: FakePi) -> None:
    repo = pi.cwd
    made = checkpoint_then_edit(pi)
    (repo / "notes.md").write_text("the user's notes\n")
    (repo / "util.py").write_text("the user brought it back, differently\n")
    begin(pi, "the tests fail: go back")
    shown = turn(pi, 0, lambda: tool_call(pi, {"action": "diff", "point": "before refactor"}))
    assert "app.py" in shown["text"] and "new.py" in shown["text"]
    assert "notes.md" in shown["text"] and "the user's own work" in shown["text"]
    assert "-v2 broken" in shown["text"] and "+v1" in shown["text"]
    done = turn(pi, 1, lambda: tool_call(pi, {"action": "restore", "point": "before refactor"}))
    turn(pi, 2)
    end(pi)
    assert (repo / "app.py").read_text() == "v1\n"
    assert not (repo / "new.py").exists()
    assert (repo / "notes.md").read_text() == "the user's notes\n", "the user's file stays"
    assert (repo / "util.py").read_text() == "the user brought it back, differently\n"
    left = {f["path"]: f["author"] for f in done["details"]["leftAlone"]}
    assert left == {"notes.md": "the user's own work", "util.py": "the user's own work"}
    assert "Left alone, not your work: notes.md" in done["text"]
    assert sorted(f["path"] for f in done["details"]["restored"]) == ["app.py", "new.py"]
    op = pi.custom(OP)[-1]
    assert op["snapshots"][op["current"]] == done["details"]["current"] and op["undo"] == 1
    reply = done["_reply"]
    assert reply.panel and "the agent restored files" in reply.panel[0]
    assert any("notes.md (your own work)" in line for line in reply.panel)
    assert made["details"]["point"]["id"] == done["details"]["point"]["id"]
    # The user undoes it from /rewind: the agent's broken files come back, nothing else moves.
    assert pi.event("rewind_apply", {"action": "undo"}).error is None
    assert (repo / "app.py").read_text() == "v2 broken\n"
    assert (repo / "new.py").read_text() == "n\n"
    assert (repo / "notes.md").read_text() == "the user's notes\n"


def test_restore_leaves_another_sessions_file_and_refuses_during_its_turn(
    pi: FakePi, repo: Path
) -> None:
    checkpoint_then_edit(pi)
    other = FakePi(repo, pi.agent_dir)
    try:
        assert other.event("session_start", {"reason": "startup"}).error is None
        other.prompt("theirs", lambda: _write(repo / "app.py", "written by B\n"))
        other.event("before_agent_start", {"prompt": "still going"})
        other.event("turn_start", {"turnIndex": 0})
        other.user("still going")
        begin(pi, "go back")
        refused = turn(
            pi, 0, lambda: tool_call(pi, {"action": "restore", "point": "before refactor"})
        )
        assert refused["details"]["refused"] is True
        assert "is in a turn" in refused["text"] and "Nothing was changed" in refused["text"]
        assert (repo / "app.py").read_text() == "written by B\n"
        assert (repo / "new.py").exists()
        other.assistant("done")
        other.event("turn_end", {"turnIndex": 0, "role": "assistant"})
        other.event("agent_end", {})
        done = turn(pi, 1, lambda: tool_call(pi, {"action": "restore", "point": "before refactor"}))
        end(pi)
    finally:
        other.close()
    assert (repo / "app.py").read_text() == "written by B\n", "another session's work stays"
    assert not (repo / "new.py").exists() and (repo / "util.py").read_text() == "u\n"
    left = done["details"]["leftAlone"]
    assert [f["path"] for f in left] == ["app.py"]
    assert "session" in left[0]["author"] and "theirs" in left[0]["author"]


def test_list_shows_points_newest_first_and_unknown_points_are_refused(pi: FakePi) -> None:
    checkpoint_then_edit(pi)
    begin(pi, "what can I go back to")
    listed = turn(pi, 0, lambda: tool_call(pi, {"action": "list"}))
    nowhere = turn(pi, 1, lambda: tool_call(pi, {"action": "restore", "point": "no such thing"}))
    end(pi)
    points = listed["details"]["points"]
    kinds = [p["kind"] for p in points]
    # The running prompt's own point first: "before this prompt" (recorded at its end).
    assert kinds == ["prompt", "checkpoint", "prompt", "prompt"]
    assert "what can I go back to" in listed["text"].splitlines()[1]
    assert 'checkpoint "before refactor"' in listed["text"]
    assert "a restore would change 3 of your files" in listed["text"]
    assert nowhere["details"]["refused"] is True
    assert "no point of this conversation" in nowhere["text"]


def test_a_second_restore_may_take_back_what_the_first_restore_put_back(pi: FakePi) -> None:
    repo = pi.cwd
    (repo / "readme.md").write_text("the user's readme\n")
    begin(pi, "try something")
    turn(pi, 0, lambda: tool_call(pi, {"action": "checkpoint", "label": "start"}))
    turn(pi, 1, lambda: _write(repo / "readme.md", "the agent's readme\n"))
    turn(pi, 2, lambda: tool_call(pi, {"action": "checkpoint", "label": "tried"}))
    first = turn(pi, 3, lambda: tool_call(pi, {"action": "restore", "point": "start"}))
    assert (repo / "readme.md").read_text() == "the user's readme\n"
    # The user's bytes, put back by the agent's own restore: the agent may take them back again.
    again = turn(pi, 4, lambda: tool_call(pi, {"action": "restore", "point": "tried"}))
    end(pi)
    assert [f["path"] for f in first["details"]["restored"]] == ["readme.md"]
    assert again["details"]["leftAlone"] == []
    assert [f["author"] for f in again["details"]["restored"]] == [
        "your work (put back by an earlier rewind of yours)"
    ]
    assert (repo / "readme.md").read_text() == "the agent's readme\n"


def test_the_running_prompts_point_takes_back_this_prompts_work(pi: FakePi) -> None:
    repo = pi.cwd
    pi.prompt("set up", lambda: _write(repo / "app.py", "v1\n"))
    user = begin(pi, "try it")
    turn(pi, 0, lambda: _write(repo / "app.py", "v2\n"))
    done = turn(pi, 1, lambda: tool_call(pi, {"action": "restore", "point": user}))
    end(pi)
    assert (repo / "app.py").read_text() == "v1\n"
    assert done["details"]["point"]["kind"] == "prompt"
    # The prompt's binding is still recorded once, at its end, to its pre-prompt snapshot.
    bound = [dict(t["bindings"]).get(user) for t in pi.custom("rewind-turn")]
    assert bound.count(0) == 1


def test_a_users_rewind_to_the_point_the_agent_restored_gives_the_agent_no_claim(
    pi: FakePi,
) -> None:
    """Found in review: the tool counted content put back by any restore to a snapshot it had
    restored as its own, so a user's later rewind to the same point made the user's notes the
    agent's to delete. Now a tool restore has a snapshot of its own, and only the paths it took
    back there count."""
    repo = pi.cwd
    first, _ = pi.prompt(
        "set up", lambda: (_write(repo / "app.py", "A0\n"), _write(repo / "notes.md", "N0\n"))
    )
    (repo / "notes.md").write_text("N1 user\n")  # the user's, between prompts
    second = begin(pi, "work")
    turn(pi, 0, lambda: _write(repo / "app.py", "A2\n"))
    done = turn(pi, 1, lambda: tool_call(pi, {"action": "restore", "point": second}))
    end(pi)
    assert done["details"]["leftAlone"] == [] and (repo / "app.py").read_text() == "A0\n"
    assert done["details"]["current"] != done["details"]["point"]["snapshot"]
    (repo / "notes.md").write_text("N2 user\n")
    # The user rewinds the files to the same point from /rewind: their N1 comes back.
    assert pi.event("rewind_apply", {"action": "files", "entryId": second}).error is None
    assert (repo / "notes.md").read_text() == "N1 user\n"
    begin(pi, "more")
    shown = turn(pi, 0, lambda: tool_call(pi, {"action": "diff", "point": first}))
    again = turn(pi, 1, lambda: tool_call(pi, {"action": "restore", "point": first}))
    end(pi)
    authors = {f["path"]: f["author"] for f in shown["details"]["files"]}
    assert authors["notes.md"] == "put back by the user's rewind"
    assert [f["path"] for f in again["details"]["leftAlone"]] == ["notes.md"]
    assert (repo / "notes.md").read_text() == "N1 user\n", "the user's notes stay"


def test_a_label_wins_over_an_id_it_happens_to_begin(pi: FakePi) -> None:
    repo = pi.cwd
    first, _ = pi.prompt("set up", lambda: _write(repo / "app.py", "A0\n"))
    begin(pi, "work")
    label = first[:4]  # ids are hex: a label such as "cafe" can begin one
    made = turn(pi, 0, lambda: tool_call(pi, {"action": "checkpoint", "label": label}))
    turn(pi, 1, lambda: _write(repo / "app.py", "A1\n"))
    shown = turn(pi, 2, lambda: tool_call(pi, {"action": "diff", "point": label}))
    end(pi)
    assert shown["details"]["point"]["id"] == made["details"]["point"]["id"] != first


def test_a_huge_point_name_is_quoted_back_short(pi: FakePi) -> None:
    pi.prompt("set up", lambda: _write(pi.cwd / "app.py", "A0\n"))
    begin(pi, "work")
    nowhere = turn(pi, 0, lambda: tool_call(pi, {"action": "diff", "point": "x" * 100_000}))
    end(pi)
    assert nowhere["details"]["refused"] is True and len(nowhere["text"]) < 1000


def test_a_file_of_the_agents_blocked_by_a_file_left_alone_is_named_not_restored(
    pi: FakePi,
) -> None:
    """Found by the composed-target property test: where the user's file stands where the
    point has a directory, the user's file wins and the model is told which of its own files
    could not come back."""
    repo = pi.cwd
    pi.prompt("set up", lambda: _write(repo / "a" / "inner.txt", "agent's\n"))
    second = begin(pi, "work")
    turn(pi, 0, lambda: ((repo / "a" / "inner.txt").unlink(), (repo / "a").rmdir()))
    end(pi)
    _write(repo / "a", "the user's file where the directory was\n")
    begin(pi, "back")
    done = turn(pi, 0, lambda: tool_call(pi, {"action": "restore", "point": second}))
    end(pi)
    assert (repo / "a").read_text() == "the user's file where the directory was\n"
    left = {f["path"]: f["author"] for f in done["details"]["leftAlone"]}
    assert left["a"] == "the user's own work"
    assert left["a/inner.txt"].endswith("not restored: a file left alone is in its way")
    assert done["details"]["restored"] == []
