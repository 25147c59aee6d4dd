"""``/tree`` and ``/fork`` in the real Pi (RPC mode: menus arrive as ``extension_ui_request``),
with each restore option and "Undo last file rewind"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.engine import messages as M
from ledger.records import FORK_PENDING, OP
from ledger.session.store import read_session
from tests.e2e.pikit import RpcPi, turns, write


@pytest.fixture
def rpc(pi_cli: Path, project: Path, agent_dir: Path) -> Iterator[RpcPi]:
    client = RpcPi(pi_cli, project, agent_dir)
    yield client
    client.close()


def two_prompts(rpc: RpcPi, project: Path) -> tuple[Path, list[str], list[str]]:
    rpc.prompt("first " + turns([write("a.txt", "one\n")]))
    rpc.prompt("second " + turns([write("a.txt", "two\n"), write("b.txt", "new\n")]))
    path = Path(rpc.state()["sessionFile"])
    session = read_session(path)
    users = [e.id for e in session.entries if e.type == "message" and e.role == "user"]
    finals = [
        e.id
        for e in session.entries
        if e.type == "message"
        and e.role == "assistant"
        and not any(b.get("type") == "toolCall" for b in e.raw["message"]["content"])
    ]
    assert (project / "a.txt").read_text() == "two\n"
    return path, users, finals


def records(path: Path, custom_type: str) -> list[dict]:
    return [e.raw["data"] for e in read_session(path).entries if e.custom_type == custom_type]


def test_tree_restore_then_undo_then_cancel_then_keep(rpc: RpcPi, project: Path) -> None:
    path, users, finals = two_prompts(rpc, project)
    assert rpc.status and rpc.status.startswith("◆ ")

    rpc.choices = [M.TREE_RESTORE]
    rpc.run_command(f"/e2e-tree {finals[0]}", "e2e-tree:")
    title, options = rpc.menus[-1]
    assert options == [M.TREE_KEEP, M.TREE_RESTORE, M.TREE_CANCEL]
    assert title.splitlines()[0] == M.MENU_TITLE and M.TREE_RESTORE + ": restores" in title
    assert (project / "a.txt").read_text() == "one\n" and not (project / "b.txt").exists()
    assert ("info", M.FILES_RESTORED_TO_POINT) in rpc.notices
    assert list(records(path, OP)[-1]) == ["v", "snapshots", "current", "undo"]

    rpc.choices = [M.UNDO]
    rpc.run_command(f"/e2e-tree {finals[1]}", "e2e-tree:")
    assert M.UNDO in rpc.menus[-1][1]
    assert rpc.notices[-1] == ("info", "e2e-tree: cancelled"), (
        "undo restores the files, the conversation stays"
    )
    assert (project / "a.txt").read_text() == "two\n" and (project / "b.txt").exists()

    rpc.choices = [M.TREE_CANCEL]
    rpc.run_command(f"/e2e-tree {users[0]}", "e2e-tree:")
    assert rpc.notices[-1] == ("info", "e2e-tree: cancelled")
    assert (project / "a.txt").read_text() == "two\n"

    ops_before = len(records(path, OP))
    rpc.choices = [M.TREE_KEEP]
    rpc.run_command(f"/e2e-tree {finals[0]}", "e2e-tree:")
    assert rpc.notices[-1] == ("info", "e2e-tree: done")
    assert (project / "a.txt").read_text() == "two\n", "keep current files"
    assert len(records(path, OP)) == ops_before + 1
    assert read_session(path).leaf.parent_id == finals[0], "the op hangs under the new position"


@pytest.mark.parametrize(
    ("choice", "expected_a"),
    [
        (M.FORK_RESTORE_ALL, "one\n"),
        (M.FORK_CONVERSATION_ONLY, "two\n"),
    ],
)
def test_fork_with_each_option_hands_the_files_to_the_child(
    rpc: RpcPi, project: Path, choice: str, expected_a: str
) -> None:
    parent, users, _ = two_prompts(rpc, project)
    rpc.choices = [choice]
    reply = rpc.command({"type": "fork", "entryId": users[1]})
    assert reply["data"]["cancelled"] is False
    title, options = rpc.menus[-1]
    assert options == [M.FORK_CONVERSATION_ONLY, M.FORK_RESTORE_ALL, M.FORK_CODE_ONLY]
    assert title.splitlines()[0] == M.MENU_TITLE and ": restores" in title
    assert (project / "a.txt").read_text() == expected_a
    pending = records(parent, FORK_PENDING)
    assert len(pending) == 1
    child = Path(rpc.state()["sessionFile"])
    assert child != parent and read_session(child).parent_session is not None
    rpc.wait_idle()
    (op,) = records(child, OP)  # the child imported the parent's hand-off (D13: only this fork)
    assert op["snapshots"][op["current"]] == pending[0]["current"]
    if choice != M.FORK_CONVERSATION_ONLY:
        rpc.choices = [M.UNDO]
        rpc.run_command(f"/e2e-tree {users[0]}", "e2e-tree:")
        assert (project / "a.txt").read_text() == "two\n", "the child undoes the fork's restore"


def test_fork_code_only_restores_the_files_and_stays_in_this_session(
    rpc: RpcPi, project: Path
) -> None:
    """Pi 0.73.1 honours only ``cancel`` from session_before_fork: "Code only" restores, records
    the op here and cancels the fork, so the conversation and the undo stay."""
    parent, users, _ = two_prompts(rpc, project)
    rpc.choices = [M.FORK_CODE_ONLY]
    reply = rpc.command({"type": "fork", "entryId": users[1]})
    assert reply["data"]["cancelled"] is True
    assert (project / "a.txt").read_text() == "one\n" and not (project / "b.txt").exists()
    assert Path(rpc.state()["sessionFile"]) == parent
    assert records(parent, FORK_PENDING) == []
    assert list(records(parent, OP)[-1]) == ["v", "snapshots", "current", "undo"]
    assert ("info", M.FILES_RESTORED_FROM_POINT) in rpc.notices
    rpc.choices = [M.UNDO]
    assert rpc.command({"type": "fork", "entryId": users[1]})["data"]["cancelled"] is True
    assert (project / "a.txt").read_text() == "two\n" and (project / "b.txt").exists()


def test_fork_menu_undo_restores_the_files_before_the_last_rewind(
    rpc: RpcPi, project: Path
) -> None:
    parent, users, finals = two_prompts(rpc, project)
    rpc.choices = [M.TREE_RESTORE]
    rpc.run_command(f"/e2e-tree {finals[0]}", "e2e-tree:")
    assert (project / "a.txt").read_text() == "one\n"
    rpc.choices = [M.UNDO]
    reply = rpc.command({"type": "fork", "entryId": users[1]})
    assert M.UNDO in rpc.menus[-1][1] and reply["data"]["cancelled"] is True, "undo, then no fork"
    assert (project / "a.txt").read_text() == "two\n"
    assert ("info", M.FILES_RESTORED_BEFORE_REWIND) in rpc.notices
    assert Path(rpc.state()["sessionFile"]) == parent


def test_tree_with_a_branch_summary_binds_the_summary_to_the_restored_files(
    rpc: RpcPi, project: Path
) -> None:
    path, _, finals = two_prompts(rpc, project)
    rpc.choices = [M.TREE_RESTORE]
    rpc.run_command(f"/e2e-tree {finals[0]} summarize", "e2e-tree:")
    assert rpc.notices[-1] == ("info", "e2e-tree: done")
    assert (project / "a.txt").read_text() == "one\n" and not (project / "b.txt").exists()
    session = read_session(path)
    (summary,) = [e for e in session.entries if e.type == "branch_summary"]
    assert summary.parent_id == finals[0]
    op = records(path, OP)[-1]
    assert list(op) == ["v", "snapshots", "current", "undo", "bindings"]
    assert op["bindings"] == [[summary.id, 0]] and op["current"] == 0
    assert session.leaf.parent_id == summary.id, "the op hangs under the summary, the new leaf"
