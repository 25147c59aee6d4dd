"""Telling the other session (issue 33): real bridges for two Pi sessions on one repository.

When session A restores (the CLI, ``/rewind``, ``/tree``, ``/fork``) over files session B's
agent wrote, B's next event shows it (a warning, the panel, the footer): who restored, which
files, and the command that brings them back, which really does. Nothing is shown when A's
restore touched nothing B's agent wrote, and B's next prompt does not call the restored files
"your changed files".
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ledger.overwrite_notices import addressee_dir
from tests.bridgekit import FakePi, Reply


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _rewind(agent_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(agent_dir), *args],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, "REWIND_TURN_WAIT": "5"},
    )


@pytest.fixture
def two(repo: Path, isolated_env: Path) -> Iterator[tuple[FakePi, FakePi, str]]:
    """A's agent wrote ``a.txt``; then B's agent wrote ``b.txt`` and changed ``README.md``.
    Yields A, B and A's first prompt (its point: before all of that)."""
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
    yield first, second, point
    for pi in (first, second):
        if isinstance(pi.proc, subprocess.Popen) and pi.proc.poll() is None:
            pi.close()


def _told(reply: Reply) -> list[str]:
    return [n["text"] for n in reply.notices if "your agent wrote" in n["text"]]


def _git_dir(repo: Path) -> Path:
    return repo / ".git"


def _last_op(pi: FakePi) -> str:
    ops = [e for e in pi.entries if e["type"] == "custom" and e["customType"] == "rewind-op"]
    return str(ops[-1]["id"])


def test_a_cli_restore_over_the_other_agents_files_is_shown_there_with_the_command_that_undoes_it(
    two: tuple[FakePi, FakePi, str], repo: Path
) -> None:
    first, second, point = two
    args = ("restore", str(first.session_file), point, "--mode", "files", "--yes")
    done = _rewind(first.agent_dir, repo, *args, "--json")
    assert done.returncode == 0, done.stderr.decode()
    op = orjson.loads(done.stdout.splitlines()[0])["record"]
    assert not (repo / "b.txt").exists()

    reply = second.event("before_agent_start", {"prompt": "next"})
    label = first.label()
    command = f"rewind undo {os.path.realpath(first.session_file)} --to {op}"
    [line] = _told(reply)
    assert line == (
        f"Rewind: session {label} restored files: overwrote 2 files your agent wrote: "
        f"README.md, b.txt · get them back: {command}"
    )
    assert reply.panel is not None
    assert reply.panel[:4] == [
        f"Rewind: session {label} restored files: overwrote 2 files your agent wrote:",
        "  README.md",
        "  b.txt",
        f"  get them back (every file as just before that restore): {command}",
    ]
    assert reply.status is not None and line in reply.status, "the footer says it too"

    # The prompt's note does not call the restored files the user's changes.
    started = second.event("turn_start", {"turnIndex": 0})
    assert started.status is not None
    assert "kept your" not in started.status
    assert f"rewind: kept 3 files restored by session {label} as a point before this prompt" in (
        started.status
    )
    assert line in started.status, "still in the footer during this prompt"
    second.user("next")
    second.assistant("done")
    second.event("turn_end", {"turnIndex": 0, "role": "assistant"})
    second.event("agent_end", {})
    again = second.event("ping")
    assert not _told(again), "taken once"
    assert again.status is not None and line in again.status, "kept until the next prompt"
    assert line not in str(second.event("before_agent_start", {"prompt": "again"}).status)
    second.user("again")
    second.assistant("done")
    second.event("turn_end", {"turnIndex": 0, "role": "assistant"})
    second.event("agent_end", {})

    # The command in the notice brings B's agent's files back.
    back = _rewind(first.agent_dir, repo, *shlex.split(command)[1:], "--yes")
    assert back.returncode == 0, back.stderr.decode()
    assert (repo / "b.txt").read_text() == "b by B\n"
    assert (repo / "README.md").read_text() == "readme by B\n"


def test_a_tree_restore_in_pi_is_shown_in_the_other_session_with_its_record(
    two: tuple[FakePi, FakePi, str], repo: Path
) -> None:
    first, second, point = two
    first.navigate(point, "Restore files to that point")
    assert not (repo / "b.txt").exists()
    reply = second.event("ping")
    [line] = _told(reply)
    assert f"--to {_last_op(first)}" in line, "the /tree's op record is named"
    assert line.startswith(f"Rewind: session {first.label()} restored files: overwrote 2 files")


def test_a_rewind_files_restore_and_a_fork_restore_are_shown_and_an_undo_of_ones_own_is_not(
    two: tuple[FakePi, FakePi, str], repo: Path
) -> None:
    first, second, point = two
    first.event("rewind_apply", {"action": "files", "entryId": point})
    [line] = _told(second.event("ping"))
    assert f"--to {_last_op(first)}" in line

    # The undo puts B's files back: what it overwrites is A's restore, not B's agent's work.
    first.event("rewind_apply", {"action": "undo"})
    assert (repo / "b.txt").read_text() == "b by B\n"
    assert not _told(second.event("ping"))

    # What the undo put back is the undo's (whoever produced the content last: a rewind, never
    # a warning). B's agent writes again; A's /fork "Restore all" (a user entry of A) overwrites
    # that: the fork-pending record is the operation.
    second.prompt("b again", act=lambda: _write(repo / "b.txt", "b again by B\n"))
    first.choices = ["Restore all (files + conversation)"]
    reply = first.event("session_before_fork", {"entryId": point})
    assert reply.error is None
    pending = [e for e in first.entries if e.get("customType") == "rewind-fork-pending"]
    [line] = _told(second.event("ping"))
    assert f"--to {pending[-1]['id']}" in line


def test_only_the_files_the_other_agent_wrote_are_named_and_nothing_when_there_are_none(
    repo: Path, isolated_env: Path
) -> None:
    agent_dir = isolated_env / ".pi" / "agent"
    first, second = FakePi(repo, agent_dir), FakePi(repo, agent_dir)
    try:
        for pi in (first, second):
            assert pi.event("session_start", {"reason": "startup"}).error is None
        point, _ = first.prompt("make a", act=lambda: _write(repo / "a.txt", "a by A\n"))
        first.write_file()
        second.prompt("look", act=lambda: _write(repo / "b.txt", "b by B\n"))
        second.write_file()
        _write(repo / "b.txt", "b by hand\n")  # the user's now, not B's agent's
        first.navigate(point, "Restore files to that point")
        assert not (repo / "a.txt").exists() and not (repo / "b.txt").exists()
        reply = second.event("before_agent_start", {"prompt": "next"})
        assert not _told(reply)
        assert reply.status is not None and "your agent wrote" not in reply.status
        assert not addressee_dir(_git_dir(repo), second.header["id"]).exists()

        # B's agent writes c.txt; A's next restore deletes it: only that file is named.
        second.event("agent_end", {})  # the prompt above ends (nothing to record)
        second.prompt("make c", act=lambda: _write(repo / "c.txt", "c by B\n"))
        second.write_file()
        first.navigate(point, "Restore files to that point")
        [line] = _told(second.event("ping"))
        assert "overwrote 1 file your agent wrote: c.txt · get them back" in line
    finally:
        for pi in (first, second):
            pi.close()
