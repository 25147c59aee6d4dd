"""``/rewind``'s undo row and earlier file states in the real interactive Pi 0.73.1 (tmux, reading
the screen after Pi's redraw): each label names the state it leads to and stays true after an
undo, a redo and new prompts; the panel says undone or redone; a state before an earlier rewind
is a point with a preview, restored as ``rewind undo --to OP`` (docs/pi.md#rewind).

Before: the row read "Undo last file rewind", then "Redo the last file rewind (undo the undo)"
after an undo and after a redo alike (choosing it then undid), the panel always said "last file
rewind undone", and new work the row would take back was not mentioned."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ledger.records import OP
from tests.e2e.pikit import SECOND, TmuxPi, records, turns, write
from tests.e2e.test_pi_rewind import (
    AFTER_THIRD,
    BEFORE_SECOND,
    choose_action,
    files,
    open_rewind,
    pick,
    preview_of,
    three_prompts,
    wait_files,
)

StartTui = Callable[..., TmuxPi]
FOURTH = "fourth [[done: fourth-ok]] " + turns([write("d.txt", "d\n")])
FIFTH = "fifth [[done: fifth-ok]] " + turns([write("e.txt", "e\n")])
NAMED = f'"{SECOND[:31]}…"'  # the prompt as a label names it (cut at 32 characters)


def overlay(screen: str) -> str:
    """The overlay's text, its rows joined (a long row is wrapped over several)."""
    rows = [line.split("│")[1] for line in screen.splitlines() if line.count("│") >= 2]
    return " ".join(" ".join(rows).split())


def test_the_undo_row_says_undo_then_redo_then_undo_and_what_new_prompts_it_takes_back(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    path = three_prompts(tui, project, agent_dir)
    open_rewind(tui)
    preview_of(tui, "second")
    choose_action(tui, "Restore files only")
    tui.wait_for("Rewind: files restored to user")
    assert files(project) == BEFORE_SECOND

    # After the rewind: the row undoes it, back to the files before it.
    text = overlay(open_rewind(tui))
    undo = f"↶ Undo the last file rewind (restore the files as before rewinding to {NAMED} at "
    assert undo in text, text
    tui.keys("Enter")
    screen = tui.wait_for("Rewind: last file rewind undone")
    assert f"back to the files as before rewinding to {NAMED} at" in screen
    assert files(project) == AFTER_THIRD

    # After the undo: the row redoes the rewind, back to the prompt's files.
    text = overlay(open_rewind(tui))
    assert f"↶ Redo: back to the files before {NAMED} (the file rewind at " in text, text
    tui.keys("Enter")
    screen = tui.wait_for("Rewind: file rewind redone")
    assert f"back to the files before {NAMED}" in screen
    wait_files(project, BEFORE_SECOND)

    # After the redo: an undo again (not "Redo … (undo the undo)").
    text = overlay(open_rewind(tui))
    assert undo in text and "Redo" not in text, text
    tui.keys("Escape")
    tui.wait_for("Rewind: choose a point", gone=True)

    # Two new prompts: the row says it also takes back the agent's two new files.
    tui.prompt(FOURTH, "Done: fourth-ok")
    tui.prompt(FIFTH, "Done: fifth-ok")
    text = overlay(open_rewind(tui))
    assert undo in text, text
    assert "— also takes back the 2 files the agent wrote since" in text, text
    assert len(records(path, OP)) == 3, "restore, undo, redo; the list appends nothing"


def test_a_state_before_an_earlier_rewind_is_a_point_with_a_preview_and_an_undoable_restore(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    path = three_prompts(tui, project, agent_dir)
    open_rewind(tui)
    preview_of(tui, "second")
    choose_action(tui, "Restore files only")
    tui.wait_for("Rewind: files restored to user")
    open_rewind(tui)
    preview_of(tui, "first")
    choose_action(tui, "Restore files only")
    tui.wait_for("Rewind: files restored to user", "D mine.txt")

    text = overlay(open_rewind(tui))
    # The state before the first rewind (to "second"): its own row, told apart by ⟲.
    assert re.search(rf"⟲ Files before rewinding to {re.escape(NAMED)} \(\d\d:\d\d\)", text), text
    screen = pick(tui, "⟲ Files before rewinding to", "Restore the files before rewinding to")
    assert "A c.txt" in screen and "Restore these files (keep the conversation)" in screen
    choose_action(tui, "Restore these files")
    tui.wait_for("Rewind: files restored to the state before a past operation")
    wait_files(project, AFTER_THIRD)
    assert len(records(path, OP)) == 3, "one more operation"
    assert records(path, OP)[-1]["undo"] is not None, "undoable"
