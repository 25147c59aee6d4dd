"""Two agents in one work tree (issue 27): real bridges for two Pi sessions on one repository.

- **Attribute**: a restore plan in one session names the files the other session's agent wrote,
  apart from the user's own edits: in the CLI (text and ``--json``), the ``/rewind`` list and
  preview, and the ``/tree`` menu.
- **Never mid-turn**: while one session's turn is in flight, the other's restore is refused
  inside Pi and waited for on the command line (then refused, or done once the turn ends), and
  nothing is written meanwhile; a turn that starts after a restore records what it changed as a
  change made outside its agent; ``kill -9`` of the busy session frees the work tree at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.bridgekit import FakePi, restore_that_waits_for_a_turn


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _rewind(
    agent_dir: Path, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The real CLI in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(agent_dir), *args],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _pid(pi: FakePi) -> int:
    assert isinstance(pi.proc, subprocess.Popen)
    return pi.proc.pid


@pytest.fixture
def two(repo: Path, isolated_env: Path) -> Iterator[tuple[FakePi, FakePi, str]]:
    """Session A's agent wrote ``a.txt``; then session B's agent wrote ``b.txt`` and changed
    ``README.md``; then the user wrote ``mine.txt`` by hand. Yields A, B and A's first prompt."""
    agent_dir = isolated_env / ".pi" / "agent"
    first, second = FakePi(repo, agent_dir), FakePi(repo, agent_dir)
    for pi in (first, second):
        assert pi.event("session_start", {"reason": "startup"}).error is None
    point, _ = first.prompt("make a", act=lambda: _write(repo / "a.txt", "a by A\n"))
    first.write_file()

    def b_works() -> None:
        _write(repo / "b.txt", "b by B\n")
        _write(repo / "README.md", "readme by B\n")

    second.prompt("make b", act=b_works)
    second.write_file()
    _write(repo / "mine.txt", "by hand\n")
    yield first, second, point
    for pi in (first, second):
        if isinstance(pi.proc, subprocess.Popen) and pi.proc.poll() is None:
            pi.close()


# --- attribution -------------------------------------------------------------------------------


def test_the_cli_plan_names_the_other_sessions_files_apart_from_the_users(
    two: tuple[FakePi, FakePi, str], repo: Path
) -> None:
    first, second, point = two
    args = ("restore", str(first.session_file), point, "--mode", "files", "--dry-run")
    done = _rewind(first.agent_dir, repo, *args, "--json")
    assert done.returncode == 0, done.stderr.decode()
    plan = orjson.loads(done.stdout.splitlines()[0])
    assert plan["writtenByOtherSessions"] == [
        {
            "sessionId": second.header["id"],
            "sessionFile": str(second.session_file),
            "running": True,
            "busy": False,
            "paths": ["README.md", "b.txt"],
        }
    ]
    assert [c["path"] for c in plan["changedOutsideAgent"]] == ["mine.txt"]
    assert sorted(plan["deleted"]) == ["a.txt", "b.txt", "mine.txt"]

    text = _rewind(first.agent_dir, repo, *args).stdout.decode()
    short = second.label()
    assert (
        f"2 files written by session {short} (still running) will be overwritten: "
        "README.md, b.txt; 'rewind undo " in text
    )
    assert "1 file holds your own work, not the agent's, and will be overwritten: mine.txt" in text
    assert "a.txt" not in text.split("will be overwritten")[1], "A's own agent's file is not named"


def test_an_ended_session_is_still_named_from_its_recent_file(
    two: tuple[FakePi, FakePi, str], repo: Path
) -> None:
    first, second, point = two
    second.event("session_shutdown", {"reason": "quit"})
    assert second.close() == 0
    args = ("restore", str(first.session_file), point, "--mode", "files", "--dry-run", "--json")
    plan = orjson.loads(_rewind(first.agent_dir, repo, *args).stdout.splitlines()[0])
    [group] = plan["writtenByOtherSessions"]
    assert group["sessionId"] == second.header["id"] and group["running"] is False
    assert group["paths"] == ["README.md", "b.txt"]


def test_the_rewind_list_preview_and_tree_menu_say_whose_files_they_are(
    two: tuple[FakePi, FakePi, str],
) -> None:
    first, second, point = two
    short = second.label()
    listing = first.event("rewind_list").result["list"]
    oldest = next(p for p in listing["points"] if p["entryId"] == point)
    assert oldest["others"] == ["README.md", "b.txt"]
    assert oldest["own"] == ["mine.txt"]

    preview = first.event("rewind_preview", {"entryId": point}).result["preview"]
    by = {f["path"]: f["by"] for f in preview["files"]}
    assert by == {
        "README.md": second.header["id"],
        "a.txt": None,
        "b.txt": second.header["id"],
        "mine.txt": None,
    }
    labels = {f["path"]: f["byLabel"] for f in preview["files"] if f["by"]}
    assert labels == {"README.md": short, "b.txt": short}, "the /rewind mark names it too"
    assert preview["otherLines"] == [
        f"2 files written by session {short} (still running) will be overwritten: README.md, "
        'b.txt; "Undo last file rewind" brings them back'
    ]

    first.choices = [None]  # look at the menu, choose nothing
    first.event("session_before_tree", {"targetId": point})
    title = first.menus[-1][0]
    assert f"2 files written by session {short} (still running) will be overwritten" in title
    assert "mine.txt" in title


# --- never mid-turn ------------------------------------------------------------------------------


def _files(repo: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def test_inside_pi_a_restore_during_the_other_sessions_turn_is_refused_and_changes_nothing(
    two: tuple[FakePi, FakePi, str], repo: Path
) -> None:
    first, second, point = two
    second.event("before_agent_start", {"prompt": "long task"})
    second.event("turn_start", {"turnIndex": 0})
    before = _files(repo)
    reply = first.navigate(point, "Restore files to that point")
    texts = " ".join(n["text"] for n in reply.notices)
    assert f"a turn of session {second.label()} (pid {second.pi_pid}) is running" in texts
    assert reply.result.get("cancel") is True
    assert _files(repo) == before, "nothing written under a running turn"
    preview = first.event("rewind_preview", {"entryId": point}).result["preview"]
    offered = {a["id"]: (a["available"], a["why"]) for a in preview["actions"]}
    why = f"a turn of session {second.label()} (pid {second.pi_pid}) is running here"
    assert offered["files"][0] is False and offered["files"][1].startswith(why)
    assert offered["conversation"] == (True, None), "the conversation alone is still offered"
    applied = first.event("rewind_apply", {"action": "files", "entryId": point})
    assert "is running" in str(applied.error), "refused even if asked directly"
    assert _files(repo) == before

    # The turn ends: the same restore goes through.
    second.user("long task")
    second.assistant("done")
    second.event("turn_end", {"turnIndex": 0, "role": "assistant"})
    second.event("agent_end", {})
    done = first.event("rewind_apply", {"action": "files", "entryId": point})
    assert not any("is running" in n["text"] for n in done.notices)
    assert not (repo / "b.txt").exists() and not (repo / "a.txt").exists()


def test_the_cli_waits_for_the_other_turn_and_restores_once_it_ends(
    two: tuple[FakePi, FakePi, str], repo: Path
) -> None:
    first, second, point = two
    second.event("before_agent_start", {"prompt": "long task"})
    args = ("restore", str(first.session_file), point, "--mode", "files", "--yes")

    refused = _rewind(first.agent_dir, repo, *args, env={"REWIND_TURN_WAIT": "1"})
    assert refused.returncode == 1
    err = refused.stderr.decode()
    assert "waiting for it to end before writing files (up to 1 s; Ctrl-C cancels" in err
    assert f"error: a turn of session {second.label()} (pid {second.pi_pid})" in err
    assert "hint: nothing was changed" in err
    assert (repo / "b.txt").exists()

    # The turn ends once the command says it waits (not after a fixed time: a command that
    # starts slowly under load would find the turn over already and never wait), and a while
    # after that, during which it must still be waiting.
    def end_turn() -> None:
        second.user("long task")
        second.assistant("done")
        second.event("turn_end", {"turnIndex": 0, "role": "assistant"})
        second.event("agent_end", {})

    code, said = restore_that_waits_for_a_turn(
        ["--agent-dir", str(first.agent_dir), *args],
        repo,
        unchanged=lambda: (repo / "b.txt").exists(),
        end_turn=end_turn,
    )
    assert code == 0, said
    assert not (repo / "b.txt").exists()

    # B's next prompt keeps what the restore changed as a change made outside its agent.
    second.event("before_agent_start", {"prompt": "next"})
    reply = second.event("turn_start", {"turnIndex": 0})
    assert reply.status is not None
    # Issue 33: not "your changed files": they are what the other session's restore changed.
    kept = f"rewind: kept 4 files restored by session {first.label()} as a point before this prompt"
    assert f" · {kept}" in reply.status


def test_a_killed_busy_session_frees_the_work_tree_at_once(
    two: tuple[FakePi, FakePi, str], repo: Path
) -> None:
    first, second, point = two
    second.event("before_agent_start", {"prompt": "long task"})
    assert isinstance(second.proc, subprocess.Popen)
    os.kill(second.proc.pid, signal.SIGKILL)
    second.proc.wait(timeout=30)
    args = ("restore", str(first.session_file), point, "--mode", "files", "--yes")
    done = _rewind(first.agent_dir, repo, *args, env={"REWIND_TURN_WAIT": "0"})
    assert done.returncode == 0, done.stderr.decode()
    assert "waiting" not in done.stderr.decode()
    assert not (repo / "b.txt").exists()
    status = _rewind(first.agent_dir, repo, "status", str(first.session_file), "--json")
    live: list[dict[str, Any]] = orjson.loads(status.stdout.splitlines()[0])["liveSessions"]
    assert [entry["pid"] for entry in live] == [_pid(first)], "the killed session's entry went"
