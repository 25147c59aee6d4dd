"""/tree and /fork menus as behaviours: the reference cases 1–3, 9, 15, 16, 19 and undo of undo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.engine import messages as M
from ledger.records import FORK_PENDING, OP
from tests.enginekit import Agent
from tests.gitkit import git, source_repo


def choose(*answers: str):
    """A menu that answers in order and remembers what it was offered."""
    queue = list(answers)
    offered: list[list[str]] = []

    def pick(title: str, options: list[str]) -> str | None:
        assert title.split("\n")[0] == M.MENU_TITLE  # a second line may name outside changes
        offered.append(options)
        return queue.pop(0) if queue else None

    pick.offered = offered  # type: ignore[attr-defined]
    return pick


def notes(repo: Path) -> str:
    return (repo / "notes.txt").read_text()


@pytest.fixture
def agent(repo: Path, tmp_path: Path) -> Agent:
    (repo / "notes.txt").write_text("target state\n")
    agent = Agent.start(repo, tmp_path / "agent")
    agent.prompt("Fork from here", lambda r: (r / "notes.txt").write_text("current state\n"))
    return agent


def user_id(agent: Agent) -> str:
    return next(e.id for e in agent.session().entries if e.role == "user")


def test_tree_restore_brings_back_the_files_and_records_current_and_undo(
    agent: Agent, repo: Path
) -> None:
    pick = choose(M.TREE_RESTORE)
    result = agent.engine.before_tree(user_id(agent), pick)
    assert not result.cancel and result.notices == [M.Notice("info", M.FILES_RESTORED_TO_POINT)]
    assert pick.offered == [[M.TREE_KEEP, M.TREE_RESTORE, M.TREE_CANCEL]]
    assert notes(agent.repo) == "target state\n"
    agent.engine.record_navigation(None)
    op = agent.records(OP)[-1]
    assert (
        list(op) == ["v", "snapshots", "current", "undo"] and op["current"] == 0 and op["undo"] == 1
    )


def test_tree_undo_swaps_back_and_forth_and_cancels_navigation(agent: Agent) -> None:
    agent.engine.before_tree(user_id(agent), choose(M.TREE_RESTORE))
    agent.engine.record_navigation(None)
    result = agent.engine.before_tree(user_id(agent), choose(M.UNDO))
    assert result.cancel and M.Notice("info", M.FILES_RESTORED_BEFORE_REWIND) in result.notices
    assert notes(agent.repo) == "current state\n"
    agent.engine.before_tree(user_id(agent), choose(M.UNDO))
    assert notes(agent.repo) == "target state\n", "undo of the undo"


def test_tree_cancel_and_escape_change_nothing(agent: Agent) -> None:
    for pick in (choose(M.TREE_CANCEL), choose()):
        result = agent.engine.before_tree(user_id(agent), pick)
        assert result.cancel and result.notices == [M.Notice("info", M.NAVIGATION_CANCELLED)]
    assert notes(agent.repo) == "current state\n"
    assert agent.records(OP) == []


def test_tree_cancels_cleanly_when_the_restore_fails(agent: Agent) -> None:
    """Reference case 3, with D13: the files are as before."""

    def fail(step: str) -> None:
        raise OSError(f"forced failure at {step}")

    agent.engine.restore_fault = fail
    result = agent.engine.before_tree(user_id(agent), choose(M.TREE_RESTORE))
    assert result.cancel
    assert any(
        n.level == "error" and "Rewind failed before tree navigation" in n.text
        for n in result.notices
    )
    assert notes(agent.repo) == "current state\n"


def test_fork_cancels_cleanly_when_the_restore_fails(agent: Agent) -> None:
    """Reference case 2."""
    agent.engine.restore_fault = lambda step: (_ for _ in ()).throw(OSError("forced"))
    result = agent.engine.before_fork(user_id(agent), choose(M.FORK_RESTORE_ALL))
    assert result.cancel and any("Rewind failed before fork" in n.text for n in result.notices)
    assert notes(agent.repo) == "current state\n"
    assert agent.records(FORK_PENDING) == []


def test_fork_undo_undoes_here_records_it_and_cancels_the_fork(agent: Agent, repo: Path) -> None:
    """Pi 0.73.1 cannot fork without the conversation: the undo is a file action, done and
    recorded in this session (undoable again), and the fork is cancelled (not the reference's 1.8)."""
    agent.engine.before_tree(user_id(agent), choose(M.TREE_RESTORE))
    agent.engine.record_navigation(None)
    current, undo = agent.records(OP)[-1]["snapshots"]
    result = agent.engine.before_fork(user_id(agent), choose(M.UNDO))
    assert result.cancel and not result.skip_conversation_restore
    assert notes(repo) == "current state\n"
    assert agent.records(FORK_PENDING) == []
    op = agent.records(OP)[-1]
    assert op == {"v": 2, "snapshots": [undo, current], "current": 0, "undo": 1}
    assert result.panel is not None and result.panel[0].startswith(
        "Rewind: last file rewind undone: 1 modified;"
    )
    assert "no fork made" in result.panel[0]
    agent.engine.before_fork(user_id(agent), choose(M.UNDO))
    assert notes(repo) == "target state\n", "undo of the undo, still in this session"


def test_fork_code_only_restores_here_records_it_and_cancels_the_fork(
    agent: Agent, repo: Path
) -> None:
    """Pi 0.73.1 ignores skipConversationRestore: "Code only" stays in this conversation."""
    pick = choose(M.FORK_CODE_ONLY)
    result = agent.engine.before_fork(user_id(agent), pick)
    assert pick.offered == [[M.FORK_CONVERSATION_ONLY, M.FORK_RESTORE_ALL, M.FORK_CODE_ONLY]]
    assert result.cancel and not result.skip_conversation_restore
    assert M.Notice("info", M.FILES_RESTORED_FROM_POINT) in result.notices
    assert notes(repo) == "target state\n"
    assert agent.records(FORK_PENDING) == []
    op = agent.records(OP)[-1]
    assert list(op) == ["v", "snapshots", "current", "undo"]
    assert result.panel == [
        (
            f'Rewind: files restored to user "Fork from here" ({user_id(agent)}): 1 modified; '
            "no fork made, the conversation is unchanged"
        ),
        "  M notes.txt",
        M.UNDO_HINT,
    ]
    undo = agent.engine.before_tree(user_id(agent), choose(M.UNDO))
    assert undo.cancel and notes(repo) == "current state\n", "the code-only restore is undoable"


def test_fork_options_follow_the_reference_order(agent: Agent) -> None:
    pick = choose(M.FORK_RESTORE_ALL)
    result = agent.engine.before_fork(user_id(agent), pick)
    assert pick.offered == [[M.FORK_CONVERSATION_ONLY, M.FORK_RESTORE_ALL, M.FORK_CODE_ONLY]]
    assert not result.cancel and notes(agent.repo) == "target state\n"
    pick = choose(M.FORK_CONVERSATION_ONLY)
    agent.engine.before_fork(user_id(agent), pick)
    assert pick.offered[0][-1] == M.UNDO


def test_fork_restore_all_hands_the_undo_to_the_child(
    agent: Agent, repo: Path, tmp_path: Path
) -> None:
    result = agent.engine.before_fork(user_id(agent), choose(M.FORK_RESTORE_ALL))
    assert not result.cancel
    (pending,) = agent.records(FORK_PENDING)
    agent.engine.shutdown("fork")
    child = Agent(
        repo,
        tmp_path / "agent",
        Agent.start(repo, tmp_path / "agent", parent=agent.session_file).session_file,
    )
    started = child.engine.session_start("fork", str(agent.session_file))
    (op,) = child.records(OP)
    assert op == {
        "v": 2,
        "snapshots": [pending["current"], pending["undo"]],
        "current": 0,
        "undo": 1,
    }
    # What the fork's restore changed, with counts and names, as every panel says it.
    assert started.panel == [f"{M.PANEL_FORK_RESTORED}: 1 modified", "  M notes.txt", M.UNDO_HINT]


def test_panels_say_what_each_tree_action_did(agent: Agent) -> None:
    restored = agent.engine.before_tree(user_id(agent), choose(M.TREE_RESTORE))
    assert (
        restored.panel is not None
        and "1 modified; the conversation moved there" in restored.panel[0]
    )
    agent.engine.record_navigation(None)
    undone = agent.engine.before_tree(user_id(agent), choose(M.UNDO))
    assert undone.panel is not None
    # Which files are back, named (issue 33): the state before the rewind it undid.
    back = undone.panel.pop(2)
    assert back.startswith('  back to the files as before rewinding to "Fork from here" at ')
    assert undone.panel == [
        (
            "Rewind: last file rewind undone: 1 modified; the conversation stays where it was "
            "(navigation cancelled)"
        ),
        "  M notes.txt",
        M.UNDO_HINT_AGAIN,
    ]
    assert agent.engine.before_tree(user_id(agent), choose(M.TREE_CANCEL)).panel == []
    assert agent.engine.before_tree(user_id(agent), choose(M.TREE_KEEP)).panel == [M.PANEL_KEPT]
    agent.engine.record_navigation(None)


def test_a_pruned_point_is_explained_instead_of_silently_missing(agent: Agent) -> None:
    turn = agent.records("rewind-turn")[0]
    user_commit = {e: turn["snapshots"][i] for e, i in turn["bindings"]}[user_id(agent)]
    agent.engine.repo.commit_exists = lambda sha: sha != user_commit  # type: ignore[method-assign]  # pruned
    pick = choose(M.TREE_KEEP)
    result = agent.engine.before_tree(user_id(agent), pick)
    assert M.TREE_RESTORE not in pick.offered[0]
    assert result.panel == [M.PANEL_KEPT, M.PRUNED_POINT] and result.panel_is_problem


def test_refusals_stay_on_screen(agent: Agent) -> None:
    agent.engine.restore_fault = lambda step: (_ for _ in ()).throw(OSError("forced"))
    result = agent.engine.before_tree(user_id(agent), choose(M.TREE_RESTORE))
    assert result.panel_is_problem and result.panel is not None
    assert result.panel[0].startswith("Rewind: Rewind failed before tree navigation:")


def test_a_fork_that_did_not_happen_keeps_its_restore_undoable(agent: Agent) -> None:
    """D13: another extension cancelled the fork after we restored; the next event records it."""
    agent.engine.before_fork(user_id(agent), choose(M.FORK_RESTORE_ALL))
    assert notes(agent.repo) == "target state\n"
    agent.engine.turn_start(0)
    op = agent.records(OP)[-1]
    assert "undo" in op
    agent.engine.agent_end()  # the prompt that turn started never came
    agent.engine.before_tree(user_id(agent), choose(M.UNDO))
    assert notes(agent.repo) == "current state\n"


def test_tree_restores_directly_from_a_custom_message_checkpoint(agent: Agent) -> None:
    """Reference cases 9 and 10."""
    marker = agent.writer.append_entry(
        {
            "type": "custom_message",
            "customType": "pi-custom-compaction.virtual-summary-marker",
            "content": "m",
            "display": True,
        }
    )["id"]
    agent.engine.checkpoint_entry(marker, source="pi-custom-compaction")
    (agent.repo / "notes.txt").write_text("later state\n")
    pick = choose(M.TREE_RESTORE)
    result = agent.engine.before_tree(marker, pick)
    assert not result.cancel
    assert pick.offered == [[M.TREE_KEEP, M.TREE_RESTORE, M.TREE_CANCEL]]
    assert notes(agent.repo) == "current state\n"


def test_non_restorable_targets_offer_no_restore(agent: Agent) -> None:
    record = next(e.id for e in agent.session().entries if e.type == "custom")
    pick = choose(M.TREE_KEEP)
    agent.engine.before_tree(record, pick)
    assert pick.offered == [[M.TREE_KEEP, M.TREE_CANCEL]]


def _superproject(repo: Path, tmp_path: Path) -> tuple[str, str, str, str]:
    source = source_repo(tmp_path)
    v1 = git(source, "rev-parse", "HEAD").strip()
    (source / "file.txt").write_text("submodule v2\n")
    git(source, "commit", "-qam", "v2")
    v2 = git(source, "rev-parse", "HEAD").strip()
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source), "nested")
    git(repo / "nested", "checkout", "-q", v1)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pin v1")
    return v1, v2, str(source), git(repo, "rev-parse", "HEAD").strip()


def test_tree_restores_a_submodule_gitlink_commit(repo: Path, tmp_path: Path) -> None:
    """Reference case 15."""
    v1, v2, _, _ = _superproject(repo, tmp_path)
    agent = Agent.start(repo, tmp_path / "agent")
    u1, _ = agent.prompt("move the submodule", lambda r: git(r / "nested", "checkout", "-q", v2))
    result = agent.engine.before_tree(u1, choose(M.TREE_RESTORE))
    assert not result.cancel, result.notices
    assert git(repo / "nested", "rev-parse", "HEAD").strip() == v1
    assert (repo / "nested" / "file.txt").read_text() == "submodule v1\n"


def test_tree_refuses_to_remove_a_submodule(repo: Path, tmp_path: Path) -> None:
    """Reference case 16."""
    agent = Agent.start(repo, tmp_path / "agent")
    u0, _ = agent.prompt("a rewind point from before the submodule existed")
    _superproject(repo, tmp_path)
    result = agent.engine.before_tree(u0, choose(M.TREE_RESTORE))
    assert result.cancel
    assert any("adding or removing submodules" in n.text for n in result.notices)
    assert (repo / "nested" / "file.txt").read_text() == "submodule v1\n"


def test_exact_bytes_come_back_with_autocrlf(repo: Path, tmp_path: Path) -> None:
    """Reference case 19 (D10)."""
    git(repo, "config", "core.autocrlf", "true")
    originals = {
        "run.sh": b"#!/bin/sh\necho before\n",
        "windows.txt": b"one\r\ntwo\r\n",
        "untouched.sh": b"echo same\n",
    }
    for name, data in originals.items():
        (repo / name).write_bytes(data)
    agent = Agent.start(repo, tmp_path / "agent")

    def change(r: Path) -> None:
        (r / "run.sh").write_bytes(b"#!/bin/sh\necho after\n")
        (r / "windows.txt").write_bytes(b"three\r\n")

    u1, _ = agent.prompt("edit", change)
    agent.engine.before_tree(u1, choose(M.TREE_RESTORE))
    for name, data in originals.items():
        assert (repo / name).read_bytes() == data, name


def doctor_json(agent: Agent) -> dict:
    """``rewind doctor --json`` in another process, as a user would run it meanwhile."""
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "doctor", "--json", "--agent-dir", agent.agent_dir],
        cwd=agent.repo,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(proc.stdout)


def test_a_tree_restore_waiting_for_its_navigation_is_running_not_interrupted(
    agent: Agent,
) -> None:
    # Pi writes the /tree navigation between session_before_tree (files restored) and
    # session_tree (the op record): meanwhile another process must not call it interrupted.
    agent.engine.before_tree(user_id(agent), choose(M.TREE_RESTORE))
    waiting = doctor_json(agent)
    assert waiting["interruptedRestores"] == [], "not interrupted while its record is on the way"
    assert [r["pid"] for r in waiting["runningRestores"]] == [os.getpid()]
    agent.engine.record_navigation(None)
    after = doctor_json(agent)
    assert after["interruptedRestores"] == [] and after["runningRestores"] == []


def test_a_tree_restore_whose_navigation_never_comes_is_interrupted_at_shutdown(
    agent: Agent,
) -> None:
    agent.engine.before_tree(user_id(agent), choose(M.TREE_RESTORE))
    agent.engine.shutdown()
    report = doctor_json(agent)
    assert report["runningRestores"] == [] and len(report["interruptedRestores"]) == 1
