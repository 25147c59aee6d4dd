"""Forks only where Pi 0.73.1 can fork (the real Pi, ``pi --mode rpc``; issue 32, item 3).

Pi forks only from a prompt (a user message; any entry only for ``/clone``) and checks the entry
*after* ``session_before_fork``. A fork asked for at an assistant entry used to restore the files
and append a ``rewind-fork-pending`` in the parent, then Pi answered ``Invalid entry ID for
forking`` (and interactive Pi exits through its fatal-error path when an extension's
``ctx.fork`` throws). Now such a fork changes no file and appends nothing, ``/rewind fork`` at
such an entry is refused before Pi is asked (in the terminal UI too, where Pi keeps running),
and at a prompt it still forks with its files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ledger.engine import messages as M
from ledger.records import FORK_PENDING
from ledger.session.store import read_session
from tests.e2e.pikit import FIRST, SECOND, RpcPi, TmuxPi, records, sessions, turns, write
from tests.e2e.test_pi_rpc_session import turn_count, wait_for

StartRpc = Callable[..., RpcPi]


def two_prompts(rpc: RpcPi) -> tuple[Path, list[str], list[str]]:
    """Two prompts (a.txt "one", then "two" and b.txt): the session file, user ids, and the
    final assistant reply of each prompt."""
    rpc.prompt("first " + turns([write("a.txt", "one\n")]))
    rpc.prompt("second " + turns([write("a.txt", "two\n"), write("b.txt", "new\n")]))
    path = Path(rpc.state()["sessionFile"])
    assert turn_count(path, 2) == 2
    entries = read_session(path).entries
    users = [e.id for e in entries if e.type == "message" and e.role == "user"]
    replies = [e.id for e in entries if e.type == "message" and e.role == "assistant"]
    # Each prompt: one tool-call message, then its final answer.
    return path, users, [replies[1], replies[3]]


def project_files(project: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(project.iterdir()) if p.is_file()}


def session_files(agent_dir: Path) -> list[Path]:
    return list((agent_dir / "sessions").rglob("*.jsonl"))


def test_a_fork_requested_at_an_assistant_entry_changes_no_file_and_appends_no_hand_off(
    start_rpc: StartRpc, project: Path, agent_dir: Path
) -> None:
    rpc = start_rpc()
    path, _, replies = two_prompts(rpc)
    before = project_files(project)
    entries = len(read_session(path).entries)
    rpc.choices = [M.FORK_RESTORE_ALL]  # were a menu shown, the user would pick "Restore all"
    try:
        rpc.command({"type": "fork", "entryId": replies[0]})
        raise AssertionError("Pi forked at an assistant entry")
    except AssertionError as refused:
        assert "Invalid entry ID for forking" in str(refused), refused
    assert rpc.menus == [], "no Restore Options menu for a fork Pi refuses"
    assert project_files(project) == before, "no file restored"
    assert records(path, FORK_PENDING) == [], "no stray rewind-fork-pending in the parent"
    assert len(read_session(path).entries) == entries
    assert session_files(agent_dir) == [path]
    # Pi and rewind carry on: the next prompt is recorded as usual.
    rpc.prompt("third " + turns([write("c.txt", "3\n")]))
    assert turn_count(path, 3) == 3


def test_rewind_fork_at_an_assistant_entry_is_refused_and_says_where_pi_can_fork(
    start_rpc: StartRpc, project: Path, agent_dir: Path
) -> None:
    rpc = start_rpc()
    path, _, replies = two_prompts(rpc)
    before = project_files(project)
    rpc.run_command(f"/rewind fork {replies[0]}", "Rewind: ", timeout=60)
    notice = next(text for _, text in reversed(rpc.notices) if text.startswith("Rewind: "))
    assert notice.startswith("Rewind: no fork made, nothing changed: Pi forks only from a prompt")
    assert f"{replies[0]} is an assistant" in notice
    assert "Restore files and conversation" in notice, "says what can be done instead"
    assert project_files(project) == before
    assert records(path, FORK_PENDING) == [] and session_files(agent_dir) == [path]
    assert rpc.state()["sessionFile"] == str(path), "still in the same session, Pi running"


def test_rewind_fork_at_a_prompt_forks_with_that_prompts_files(
    start_rpc: StartRpc, project: Path, agent_dir: Path
) -> None:
    rpc = start_rpc()
    path, users, _ = two_prompts(rpc)
    rpc.command({"type": "prompt", "message": f"/rewind fork {users[1]}"})
    wait_for(lambda: len(session_files(agent_dir)) == 2, "the fork's new session", timeout=60)
    wait_for(lambda: rpc.state()["sessionFile"] != str(path), "Pi to switch to the fork")
    assert project_files(project) == {
        ".gitignore": "build/\n",
        "README.md": "# e2e\n",
        "a.txt": "one\n",
    }, "the files before the second prompt"
    assert len(records(path, FORK_PENDING)) == 1, "the hand-off the fork imports"


def test_interactive_rewind_fork_at_an_assistant_entry_leaves_pi_running_and_files_alone(
    start_tui: Callable[..., TmuxPi], project: Path, agent_dir: Path
) -> None:
    """Interactive Pi exits through its fatal-error path when an extension's ``ctx.fork`` throws
    (``Invalid entry ID for forking``): ``/rewind fork`` at a reply must not get that far."""
    tui = start_tui()
    tui.wait_for("◆ 0 points / 0 snapshots")
    tui.prompt(FIRST, "Done: first-ok")
    tui.prompt(SECOND, "Done: second-ok")
    (path,) = sessions(agent_dir)
    before = project_files(project)
    reply = next(
        e.id
        for e in read_session(path).entries
        if e.type == "message" and e.role == "assistant" and "first-ok" in str(e.raw)
    )
    tui.type(f"/rewind fork {reply}")
    screen = tui.wait_for("no fork made, nothing changed")
    assert "Pi forks only from a prompt" in screen
    assert tui.alive(), "Pi is still running"
    assert project_files(project) == before
    assert records(path, FORK_PENDING) == [] and sessions(agent_dir) == [path]
    tui.prompt("third [[done: third-ok]] " + turns([write("c.txt", "c\n")]), "Done: third-ok")
    assert turn_count(path, 3) == 3, "rewind carries on"
