"""``/rewind``'s events on a real ``rewind serve --stdio`` (docs/pi.md#rewind): the list of points
with what each would change and whose work it would overwrite, a preview with line counts and
actions, one file's diff, and every action writing exactly the records of the menu choice it
stands for (``/fork`` "Code only", "Undo last file rewind", ``/tree`` restore and keep, ``/fork``
"Restore all")."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.engine import messages as M
from ledger.records import FORK_PENDING, OP
from tests.bridgekit import FakePi


@pytest.fixture
def pi(repo: Path, isolated_env: Path) -> Iterator[FakePi]:
    fake = FakePi(repo, isolated_env / ".pi" / "agent")
    assert fake.event("session_start", {"reason": "startup"}).error is None
    yield fake
    fake.close()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def three_prompts(pi: FakePi) -> list[str]:
    repo = pi.cwd
    first, _ = pi.prompt(
        "create a and b", lambda: (_write(repo / "a.txt", "1\n"), _write(repo / "b.txt", "b\n"))
    )
    (repo / "mine.txt").write_text("made by hand\n")
    second, _ = pi.prompt("edit a", lambda: _write(repo / "a.txt", "1\n2\n3\n"))
    third, _ = pi.prompt("delete b", lambda: (repo / "b.txt").unlink())
    return [first, second, third]


def test_the_list_names_each_prompt_newest_first_with_counts_and_own_work(pi: FakePi) -> None:
    first, second, third = three_prompts(pi)
    (pi.cwd / "a.txt").write_text("edited by hand\n")
    reply = pi.event("rewind_list")
    assert reply.error is None
    listing = reply.result["list"]
    assert [p["entryId"] for p in listing["points"]] == [third, second, first]
    assert [p["text"] for p in listing["points"]] == ["delete b", "edit a", "create a and b"]
    newest, middle, oldest = listing["points"]
    assert newest["counts"]["words"] == "1 added, 1 modified"  # b.txt back, a.txt
    assert newest["own"] == ["a.txt"]
    # Before the first prompt: a.txt, b.txt are gone, and so is mine.txt, made by hand before
    # the second prompt (older than the latest point, still the user's).
    assert oldest["counts"]["words"] == "2 deleted"
    assert oldest["own"] == ["a.txt", "mine.txt"]
    assert middle["counts"]["words"] == "1 added, 1 modified" and middle["own"] == ["a.txt"]
    assert listing["undo"] is None and listing["shadow"] is None
    assert reply.calls and all(c["method"] == "session" for c in reply.calls), "appends nothing"


def test_the_preview_lists_files_with_line_counts_marks_own_work_and_offers_actions(
    pi: FakePi,
) -> None:
    first, second, _ = three_prompts(pi)
    preview = pi.event("rewind_preview", {"entryId": second}).result["preview"]
    by_path = {f["path"]: f for f in preview["files"]}
    assert by_path["a.txt"] == {
        "path": "a.txt",
        "change": "M",
        "additions": 0,
        "deletions": 2,
        "binary": False,
        "own": False,
        "by": None,
        "byLabel": None,
        "sizes": None,
    }
    assert by_path["b.txt"]["change"] == "A" and preview["counts"]["words"] == "1 added, 1 modified"
    assert [a["id"] for a in preview["actions"] if a["available"]] == [
        "files",
        "both",
        "conversation",
        "fork",
        "cancel",
    ]
    preview = pi.event("rewind_preview", {"entryId": first}).result["preview"]
    assert {f["path"]: f["own"] for f in preview["files"]} == {
        "a.txt": False,
        "mine.txt": True,
    }
    assert preview["ownLine"].startswith("1 file holds your own work, not the agent's")


def test_one_files_diff_is_what_the_restore_would_do_to_it(pi: FakePi) -> None:
    _, second, _ = three_prompts(pi)
    reply = pi.event("rewind_diff", {"entryId": second, "path": "a.txt"})
    assert reply.error is None and not reply.result["cut"]
    diff = reply.result["diff"]
    assert "--- a/a.txt" in diff and "-2\n-3\n" in diff and "b.txt" not in diff


def test_a_binary_files_preview_gives_its_sizes_now_and_after_the_restore(pi: FakePi) -> None:
    repo = pi.cwd
    first, _ = pi.prompt("make a picture", lambda: _write_bytes(repo / "pic.bin", b"\0" * 3000))
    second, _ = pi.prompt("redraw it", lambda: _write_bytes(repo / "pic.bin", b"\0\1" * 10))
    preview = pi.event("rewind_preview", {"entryId": second}).result["preview"]
    (row,) = preview["files"]
    assert row["binary"] and row["change"] == "M" and row["sizes"] == [20, 3000], row
    preview = pi.event("rewind_preview", {"entryId": first}).result["preview"]
    (row,) = preview["files"]
    assert row["change"] == "D" and row["sizes"] == [20, 0], row


def _write_bytes(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def test_files_only_and_undo_write_the_records_of_code_only_and_undo(pi: FakePi) -> None:
    _, second, _ = three_prompts(pi)
    leaf = pi.leaf
    reply = pi.event("rewind_apply", {"action": "files", "entryId": second})
    assert reply.error is None and reply.result["applied"] == "files"
    assert (pi.cwd / "a.txt").read_text() == "1\n" and (pi.cwd / "b.txt").exists()
    op = pi.custom(OP)[-1]
    assert list(op) == ["v", "snapshots", "current", "undo"]
    assert pi.entries[-1]["parentId"] == leaf, "recorded at the leaf, the conversation stays"
    assert reply.panel is not None and reply.panel[0].startswith("Rewind: files restored to user")
    assert "  A b.txt  M a.txt" in reply.panel
    # Said in /rewind's words: how to undo from /rewind itself, and no fork that was never asked.
    assert reply.panel[-1] == M.REWIND_UNDO_HINT and "/rewind" in reply.panel[-1]
    assert not any("no fork made" in line for line in reply.panel), reply.panel
    listing = pi.event("rewind_list").result["list"]
    assert listing["undo"]["label"].startswith("Undo the last file rewind (restore the files as")
    assert not listing["undo"]["redo"]
    undone = pi.event("rewind_apply", {"action": "undo"})
    assert undone.error is None and (pi.cwd / "a.txt").read_text() == "1\n2\n3\n"
    assert undone.panel is not None and undone.panel[-1] == M.REWIND_UNDO_HINT_AGAIN
    listing = pi.event("rewind_list").result["list"]
    assert listing["undo"]["redo"] is True, "undo again redoes the rewind"


def test_an_intent_answers_the_next_tree_menu_for_that_entry_without_showing_it(
    pi: FakePi,
) -> None:
    _, second, _ = three_prompts(pi)
    assert pi.event("rewind_intent", {"action": "both", "entryId": second}).error is None
    reply = pi.navigate(second, "never asked")
    assert pi.menus == [], "no menu was shown"
    assert reply.result == {} and (pi.cwd / "a.txt").read_text() == "1\n"
    assert pi.custom(OP)[-1]["undo"] is not None, "the /tree restore's op, undoable"
    # Used once: the next /tree shows the menu again.
    pi.navigate(second, M.TREE_CANCEL)
    assert len(pi.menus) == 1


def test_a_fork_intent_restores_all_and_hands_the_files_to_the_fork(pi: FakePi) -> None:
    _, second, _ = three_prompts(pi)
    pi.event("rewind_intent", {"action": "fork", "entryId": second})
    reply = pi.event("session_before_fork", {"entryId": second})
    assert reply.error is None and pi.menus == []
    assert (pi.cwd / "a.txt").read_text() == "1\n"
    assert len(pi.custom(FORK_PENDING)) == 1


def test_an_unknown_action_is_an_error_reply_and_changes_nothing(pi: FakePi) -> None:
    _, second, _ = three_prompts(pi)
    before = (pi.cwd / "a.txt").read_text()
    reply = pi.event("rewind_apply", {"action": "explode", "entryId": second})
    assert reply.error is not None and reply.error["code"] == "failed"
    assert (pi.cwd / "a.txt").read_text() == before and pi.custom(OP) == []


def test_a_symlink_that_became_a_file_is_one_preview_row_with_its_lines(pi: FakePi) -> None:
    repo = pi.cwd
    os.symlink("README.md", repo / "link")
    before, _ = pi.prompt(
        "make link a file",
        lambda: (
            (repo / "link").unlink(),
            (repo / "link").write_text("one\ntwo\n"),
        ),
    )
    preview = pi.event("rewind_preview", {"entryId": before}).result["preview"]
    (row,) = [f for f in preview["files"] if f["path"] == "link"]
    assert row["change"] == "M" and row["deletions"] == 2 and not row["binary"]


def test_a_missing_diff_order_file_fails_no_preview(pi: FakePi) -> None:
    _, second, _ = three_prompts(pi)
    import subprocess

    subprocess.run(
        ["git", "config", "diff.orderFile", str(pi.cwd / "no-such-order-file")],
        cwd=pi.cwd,
        check=True,
    )
    reply = pi.event("rewind_preview", {"entryId": second})
    assert reply.error is None, reply.error
    assert {f["path"] for f in reply.result["preview"]["files"]} == {"a.txt", "b.txt"}
