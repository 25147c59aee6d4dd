"""The real interactive Pi 0.73.1 (its terminal UI, in tmux) with our extension, as a user drives
it: ``/tree`` and ``/fork`` with each option, what the screen says after Pi's redraw, the session
file and the exact work tree; a bridge killed between prompts (restarted at the next one); a menu
left open longer than the bridge timeout; and pi-rewind-hook loaded next to ours, in either order."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.engine import messages as M
from ledger.records import FORK_PENDING, OP, TURN
from ledger.session.store import read_session
from tests.e2e.pikit import (
    FIRST,
    HERE,
    SECOND,
    TmuxPi,
    open_fork,
    open_tree,
    pi_args,
    records,
    sessions,
    turns,
    write,
)

StartTui = Callable[..., TmuxPi]


def files(project: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(project.iterdir()) if p.is_file()}


BEFORE = {".gitignore": "build/\n", "README.md": "# e2e\n"}
AFTER_FIRST = {**BEFORE, "a.txt": "one\n"}
AFTER_SECOND = {**BEFORE, "a.txt": "two\n", "b.txt": "new\n"}


def two_prompts(tui: TmuxPi, project: Path, agent_dir: Path) -> Path:
    tui.wait_for("◆ 0 points / 0 snapshots")
    tui.prompt(FIRST, "Done: first-ok")
    tui.prompt(SECOND, "Done: second-ok")
    tui.wait_for("◆ 6 points")
    assert files(project) == AFTER_SECOND
    (path,) = sessions(agent_dir)
    return path


def test_tree_restore_then_undo_say_what_happened_after_the_redraw(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    path = two_prompts(tui, project, agent_dir)
    leaf_before = read_session(path).leaf_id

    open_tree(tui, "second")
    tui.choose(M.MENU_TITLE, M.TREE_RESTORE)
    screen = tui.wait_for("Navigated to selected point", "Rewind: files restored to user")
    assert "1 modified, 1 deleted; the conversation moved there" in screen
    assert M.UNDO_HINT in screen
    assert files(project) == AFTER_FIRST
    session = read_session(path)
    op = records(path, OP)[-1]
    assert list(op) == ["v", "snapshots", "current", "undo"]
    assert session.leaf.custom_type == OP, "the op hangs at the new position"
    tui.wait_for("◆ 3 points")  # the footer counts the branch the user is on now

    tui.keys("C-c")  # Pi put the re-asked prompt in the editor: clear it
    open_tree(tui, "first")
    tui.choose(M.MENU_TITLE, M.UNDO)
    screen = tui.wait_for(
        "Navigation cancelled",
        "Rewind: last file rewind undone: 1 added, 1 modified; "
        "the conversation stays where it was (navigation cancelled)",
    )
    assert M.UNDO_HINT_AGAIN in screen
    assert files(project) == AFTER_SECOND
    after = read_session(path)
    assert after.leaf.custom_type == OP and after.leaf.parent_id == session.leaf_id, (
        "recorded where the user is"
    )
    assert after.leaf_id != leaf_before


def test_fork_code_only_and_undo_stay_in_the_same_conversation(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    path = two_prompts(tui, project, agent_dir)
    conversation = [e.id for e in read_session(path).entries if e.type == "message"]

    open_fork(tui)  # the last user message ("second") is preselected
    tui.choose(M.MENU_TITLE, M.FORK_CODE_ONLY)
    screen = tui.wait_for(
        "Rewind: files restored to user", "no fork made, the conversation is unchanged"
    )
    assert "Forked to new session" not in screen and M.UNDO_HINT in screen
    assert files(project) == AFTER_FIRST
    assert sessions(agent_dir) == [path], "still the same session file"
    session = read_session(path)
    assert [e.id for e in session.entries if e.type == "message"] == conversation, (
        "conversation unchanged"
    )
    assert records(path, FORK_PENDING) == []
    assert list(records(path, OP)[-1]) == ["v", "snapshots", "current", "undo"]

    open_fork(tui)
    tui.choose(M.MENU_TITLE, M.UNDO)
    tui.wait_for("Rewind: last file rewind undone: 1 added, 1 modified; no fork made")
    assert files(project) == AFTER_SECOND, "the code-only restore was undone"
    assert sessions(agent_dir) == [path]
    # The conversation goes on in the same session.
    tui.prompt("third [[done: third-ok]] " + turns([write("c.txt", "3\n")]), "Done: third-ok")
    assert len(records(path, TURN)) == 3 and sessions(agent_dir) == [path]


def test_fork_restore_all_and_conversation_only_fork_with_the_promised_files(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    parent = two_prompts(tui, project, agent_dir)

    open_fork(tui)
    tui.choose(M.MENU_TITLE, M.FORK_RESTORE_ALL)
    screen = tui.wait_for("Forked to new session", M.PANEL_FORK_RESTORED)
    assert M.UNDO_HINT in screen
    assert files(project) == AFTER_FIRST
    tui.keys("C-c")
    tui.prompt(
        "child [[done: child-ok]] " + turns([write("c.txt", "3\n")]), "Done: child-ok"
    )  # Pi writes the child's file now
    child = next(p for p in sessions(agent_dir) if p != parent)
    copied = {e.id for e in read_session(parent).entries}
    (imported, _turn) = [
        e for e in read_session(child).entries if e.custom_type in (OP, TURN) and e.id not in copied
    ]
    assert imported.custom_type == OP
    (pending,) = records(parent, FORK_PENDING)
    assert imported.raw["data"]["snapshots"] == [pending["current"], pending["undo"]]

    open_fork(tui)
    tui.choose(M.MENU_TITLE, M.FORK_CONVERSATION_ONLY)
    tui.wait_for("Forked to new session")
    assert files(project) == {**AFTER_FIRST, "c.txt": "3\n"}, "conversation only keeps the files"
    # Pi persists the hand-off record of the fork asynchronously, after the screen says "Forked".
    assert len(eventually(lambda: records(child, FORK_PENDING))) == 1


def eventually(read: Callable[[], list[dict]], timeout_s: float = 10.0) -> list[dict]:
    """What ``read`` returns once it is non-empty (or at the timeout): for files Pi writes after
    it has drawn the screen."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = read()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def counted_bridge(pid_file: Path) -> dict[str, str]:
    script = f'echo $$ >> "{pid_file}"; exec "$0" -m ledger serve --stdio'
    return {"REWIND_BRIDGE_CMD": json.dumps(["sh", "-c", script, sys.executable])}


def test_a_bridge_killed_between_prompts_is_restarted_and_the_screen_says_so(
    start_tui: StartTui, project: Path, agent_dir: Path, tmp_path: Path
) -> None:
    """What the user sees after a kill -9 of the bridge: at the next prompt one warning that it
    was restarted and that nothing is missing, the prompt recorded, the footer counting it."""
    pid_file = tmp_path / "bridges"
    tui = start_tui(env=counted_bridge(pid_file))
    tui.wait_for("◆ 0 points / 0 snapshots")
    tui.prompt(FIRST, "Done: first-ok")
    tui.wait_for("◆ 3 points")
    (pid,) = [int(x) for x in pid_file.read_text().split()]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and Path("/proc/self").exists():  # until Pi reaps it
        assert time.monotonic() < deadline, "Pi never reaped the killed bridge"
        time.sleep(0.05)
    time.sleep(0.5)  # Pi has seen it end (else the next event is the one that finds it dead)
    tui.prompt(SECOND, "Done: second-ok")
    screen = tui.wait_for(
        "Rewind: the bridge stopped (killed, SIGKILL) between prompts; restarted — rewind is "
        "running again; nothing is missing",
        "◆ 6 points",  # the footer is back, with the second prompt's points
    )
    assert "pip install" not in screen and "bridge unavailable" not in screen
    assert screen.count("Rewind: the bridge stopped") == 1, "one warning"
    assert files(project) == AFTER_SECOND
    (path,) = sessions(agent_dir)
    assert len(eventually(lambda: records(path, TURN))) == 2
    assert len(pid_file.read_text().split()) == 2, "one restart"


def test_a_menu_left_open_longer_than_the_timeout_keeps_the_bridge(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    import time

    tui = start_tui(env={"REWIND_BRIDGE_TIMEOUT_MS": "2000"})
    two_prompts(tui, project, agent_dir)
    open_tree(tui, "second")
    tui.wait_for(M.MENU_TITLE, M.TREE_RESTORE)
    time.sleep(3.5)  # the user reads the menu for longer than the bridge's timeout
    tui.choose(M.MENU_TITLE, M.TREE_RESTORE)
    screen = tui.wait_for("Rewind: files restored to user")
    assert "bridge unavailable" not in screen
    assert files(project) == AFTER_FIRST


@pytest.mark.parametrize("standin_first", [True, False], ids=["stand-in first", "ours first"])
def test_with_pi_rewind_hook_loaded_too_it_warns_before_the_first_prompt_and_records_once(
    start_tui: StartTui, pi_cli: Path, project: Path, agent_dir: Path, standin_first: bool
) -> None:
    """Either load order: ours sees the other extension at session start (its event-bus
    listeners), warns before any prompt, and records nothing; each prompt has one record."""
    standin = HERE / "pi" / "rewind-hook-standin.ts"
    tui = start_tui(args=_with_standin(pi_args(pi_cli), standin, first=standin_first))
    tui.wait_for(OTHER_WRITER)  # before any prompt: nothing is recorded yet
    (path,) = sessions(agent_dir) or [None]
    assert path is None or records(path, TURN) == [], "the warning came before any record"
    tui.prompt(FIRST, "Done: first-ok")
    tui.wait_for("◆ stand-in 1")  # the stand-in's footer; ours leaves it alone
    tui.prompt(SECOND, "Done: second-ok")
    tui.wait_for("◆ stand-in 2")
    (path,) = sessions(agent_dir)
    users = [e.id for e in read_session(path).entries if e.type == "message" and e.role == "user"]
    turn_records = records(path, TURN)
    assert len(turn_records) == 2 == len(users), "one rewind-turn per prompt"
    assert [r["bindings"][0][0] for r in turn_records] == users
    screen = tui.screen()
    assert screen.count(OTHER_WRITER) == 1 and "◆ 0 points" not in screen
    open_tree(tui, "first")
    tui.wait_for(M.MENU_TITLE)
    tui.keys("Escape")  # the stand-in's menu; ours shows none
    tui.wait_for(M.MENU_TITLE, gone=True)


OTHER_WRITER = "another rewind extension is recording this session too"


def _with_standin(args: list[str], standin: Path, *, first: bool = True) -> list[str]:
    """Pi's argv with the stand-in loaded before our extension (as a package loads before -e),
    or after it."""
    ours = args.index("-e", args.index("-e") + 1)  # the second -e: ours
    if first:
        return [*args[:ours], "-e", str(standin), *args[ours:]]
    return [*args, "-e", str(standin)]
