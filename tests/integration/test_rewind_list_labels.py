"""``/rewind``'s labels stay true after an undo, a redo and new prompts, and the states before
past file rewinds are points of the list with a preview and an undoable restore
(docs/pi.md#rewind), on a real ``rewind serve --stdio`` and a real git repository.

Before: the top row read "Redo the last file rewind (undo the undo)" after a redo too (and
choosing it undid), the panel always said "last file rewind undone", the row took back the
agent's new work without saying so, and no state before an earlier rewind was listed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.records import OP
from tests.bridgekit import FakePi

TIME = r"(\w{3} \d\d )?\d\d:\d\d"


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
    second, _ = pi.prompt("edit a", lambda: _write(repo / "a.txt", "1\n2\n3\n"))
    third, _ = pi.prompt("delete b", lambda: (repo / "b.txt").unlink())
    return [first, second, third]


def listing(pi: FakePi) -> dict[str, Any]:
    reply = pi.event("rewind_list")
    assert reply.error is None, reply.error
    result: dict[str, Any] = reply.result["list"]
    return result


def apply(pi: FakePi, payload: dict[str, str]) -> list[str]:
    reply = pi.event("rewind_apply", payload)
    assert reply.error is None, reply.error
    assert reply.panel is not None
    return reply.panel


def files(repo: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(repo.glob("*.txt"))}


def test_the_undo_row_names_the_state_before_the_rewind_and_the_panel_says_undone(
    pi: FakePi,
) -> None:
    _, second, _ = three_prompts(pi)
    apply(pi, {"action": "files", "entryId": second})
    undo = listing(pi)["undo"]
    assert undo["kind"] == "undo" and not undo["redo"]
    assert re.fullmatch(
        rf'Undo the last file rewind \(restore the files as before rewinding to "edit a" at {TIME}\)',
        undo["label"],
    ), undo["label"]
    panel = apply(pi, {"action": "undo"})
    assert panel[0].startswith("Rewind: last file rewind undone: 1 modified, 1 deleted")
    assert re.fullmatch(
        rf'  back to the files as before rewinding to "edit a" at {TIME}', panel[-2]
    ), panel


def test_after_an_undo_the_row_is_a_redo_back_to_the_prompts_files_and_says_redone(
    pi: FakePi,
) -> None:
    _, second, _ = three_prompts(pi)
    apply(pi, {"action": "files", "entryId": second})
    after_rewind = files(pi.cwd)
    apply(pi, {"action": "undo"})
    undo = listing(pi)["undo"]
    assert undo["kind"] == "redo" and undo["redo"]
    assert re.fullmatch(
        rf'Redo: back to the files before "edit a" \(the file rewind at {TIME}\)', undo["label"]
    ), undo["label"]
    panel = apply(pi, {"action": "undo"})
    assert panel[0].startswith("Rewind: file rewind redone: "), panel
    assert '  back to the files before "edit a"' in panel
    assert files(pi.cwd) == after_rewind


def test_after_a_redo_the_row_is_an_undo_again_not_a_redo(pi: FakePi) -> None:
    """A rewind, its undo, the redo: the files are the rewind's again, so the row undoes it
    (the old row kept saying "Redo … (undo the undo)" here, and choosing it undid)."""
    _, second, _ = three_prompts(pi)
    before = files(pi.cwd)
    apply(pi, {"action": "files", "entryId": second})
    apply(pi, {"action": "undo"})
    apply(pi, {"action": "undo"})  # the redo
    undo = listing(pi)["undo"]
    assert undo["label"].startswith(
        'Undo the last file rewind (restore the files as before rewinding to "edit a" at '
    ), undo["label"]
    assert undo["kind"] == "undo" and not undo["redo"], undo
    panel = apply(pi, {"action": "undo"})
    assert panel[0].startswith("Rewind: last file rewind undone: "), panel
    assert files(pi.cwd) == before


def test_after_new_prompts_the_undo_row_says_it_takes_back_the_agents_new_files(
    pi: FakePi,
) -> None:
    first, _, _ = three_prompts(pi)
    repo = pi.cwd
    apply(pi, {"action": "files", "entryId": first})
    pi.prompt("write c", lambda: _write(repo / "c.txt", "c\n"))
    pi.prompt("write d", lambda: _write(repo / "d.txt", "d\n"))
    (repo / "mine.txt").write_text("by hand\n")  # the user's: not counted as the agent's
    undo = listing(pi)["undo"]
    assert undo["agentSince"] == 2
    assert undo["label"].endswith(" — also takes back the 2 files the agent wrote since")
    assert undo["own"] == ["mine.txt"]


def test_states_before_past_rewinds_are_listed_previewed_and_restored_as_undo_to(
    pi: FakePi,
) -> None:
    first, second, _ = three_prompts(pi)
    start = files(pi.cwd)
    apply(pi, {"action": "files", "entryId": second})
    apply(pi, {"action": "files", "entryId": first})
    listed = listing(pi)
    assert listed["undo"]["label"].startswith(
        'Undo the last file rewind (restore the files as before rewinding to "create a and b" at '
    )
    # The state before the rewind to "create a and b" is the undo row's; the one before the
    # rewind to "edit a" is an earlier file state.
    (state,) = listed["states"]
    assert re.fullmatch(rf'Files before rewinding to "edit a" \({TIME}\)', state["label"])
    assert state["counts"]["words"] == "1 added" and state["kind"] == "restore-files"
    history_ops = [e["id"] for e in pi.entries if e.get("customType") == OP]
    assert state["operation"] == history_ops[0]

    preview = pi.event("rewind_preview", {"operation": state["operation"]}).result["preview"]
    assert preview["operation"] == state["operation"]
    assert preview["title"].startswith('Restore the files before rewinding to "edit a" (')
    assert [(f["path"], f["change"]) for f in preview["files"]] == [("a.txt", "A")]
    assert [(a["id"], a["available"]) for a in preview["actions"]] == [
        ("undo-to", True),
        ("cancel", True),
    ]
    diff = pi.event(
        "rewind_diff",
        {"entryId": state["operation"], "operation": state["operation"], "path": "a.txt"},
    ).result["diff"]
    assert "+2\n+3\n" in diff

    panel = apply(pi, {"action": "undo-to", "operation": state["operation"]})
    assert panel[0].startswith("Rewind: files restored to the state before a past operation")
    assert files(pi.cwd) == start
    op = pi.custom(OP)[-1]
    assert op["undo"] is not None, "one more undoable operation at the leaf"
    # The top row now undoes that restore: back to where the files were before it.
    undo = listing(pi)["undo"]
    assert undo["kind"] == "undo" and undo["label"].startswith(
        "Undo the last file rewind (restore the files as before going back to the files before "
        "the file rewind at "
    ), undo["label"]
    apply(pi, {"action": "undo"})
    assert files(pi.cwd) == {}, 'back to the files before "create a and b"'


def test_a_state_before_a_rewind_after_new_prompts_says_it_takes_back_the_agents_work(
    pi: FakePi,
) -> None:
    first, second, _ = three_prompts(pi)
    repo = pi.cwd
    apply(pi, {"action": "files", "entryId": second})
    apply(pi, {"action": "files", "entryId": first})
    pi.prompt("write c", lambda: _write(repo / "c.txt", "c\n"))
    (state,) = listing(pi)["states"]
    assert state["agentSince"] == 1
    assert state["label"].endswith(
        " — also takes back the file the agent wrote since the last file rewind"
    )
    preview = pi.event("rewind_preview", {"operation": state["operation"]}).result["preview"]
    assert preview["note"] == "Also takes back the file the agent wrote since the last file rewind"
