"""``/rewind`` in the real interactive Pi 0.73.1 (tmux, asserting on the screen after Pi's redraw):
the list of points with what each would change and whose work it would overwrite, a preview
naming the files with a diff of one, and every action leaving the files byte-exact and the session
file as ``/tree`` and ``/fork`` would (docs/pi.md#rewind)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ledger.engine import messages as M
from ledger.records import FORK_PENDING, OP, TURN
from ledger.session.store import read_session
from tests.e2e.pikit import FIRST, SECOND, TmuxPi, records, sessions, turns, write

StartTui = Callable[..., TmuxPi]
THIRD = "third [[done: third-ok]] " + turns([write("c.txt", "c\n")])
BEFORE_FIRST = {".gitignore": "build/\n", "README.md": "# e2e\n"}
BEFORE_SECOND = {**BEFORE_FIRST, "a.txt": "one\n", "mine.txt": "made by hand\n"}
AFTER_THIRD = {**BEFORE_SECOND, "a.txt": "two\n", "b.txt": "new\n", "c.txt": "c\n"}


def files(project: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(project.iterdir()) if p.is_file()}


def wait_files(project: Path, expected: dict[str, str], timeout: float = 30) -> None:
    """The panel of a redo reads like the undo's before it: wait for the files themselves."""
    deadline = time.monotonic() + timeout
    while files(project) != expected:
        assert time.monotonic() < deadline, files(project)
        time.sleep(0.1)


def wait_ops(path: Path, count: int, timeout: float = 30) -> list[dict]:
    """The session's op records once there are ``count``: a restore writes the files first and
    appends its record after, so files that match come a moment before the record does."""
    deadline = time.monotonic() + timeout
    while len(found := records(path, OP)) < count:
        assert time.monotonic() < deadline, found
        time.sleep(0.1)
    return found


def three_prompts(tui: TmuxPi, project: Path, agent_dir: Path) -> Path:
    tui.wait_for("◆ 0 points / 0 snapshots")
    tui.prompt(FIRST, "Done: first-ok")
    (project / "mine.txt").write_text("made by hand\n")  # between two prompts: the user's
    tui.prompt(SECOND, "Done: second-ok")
    tui.prompt(THIRD, "Done: third-ok")
    tui.wait_for("◆ 9 points")
    assert files(project) == AFTER_THIRD
    (path,) = sessions(agent_dir)
    return path


def open_rewind(tui: TmuxPi, *, key: str | None = None) -> str:
    if key is None:
        tui.type("/rewind")
    else:
        tui.keys(key)
    return tui.wait_for("Rewind: choose a point")


def _arrow(tui: TmuxPi) -> str:
    """The row the overlay's arrow is on ("" when none is)."""
    selected = [line for line in tui.settled_screen().splitlines() if "→ " in line]
    return selected[0] if selected else ""


def select(tui: TmuxPi, text: str) -> None:
    """Move the overlay's arrow to the row holding ``text`` (from the top, one row at a time,
    reading the screen after each key, as a person would). Each read waits for the key to be
    handled (not a fixed time: a loaded machine handles keys late, and a row read before the
    key's redraw could be taken for the arrow's place: Enter would then choose another row)."""
    for _ in range(12):
        tui.keys("Up")  # Up stops at the first row
        time.sleep(0.05)
    row, since = _arrow(tui), time.monotonic()
    while time.monotonic() - since < 1.0:  # every Up handled: the arrow stays put a while
        time.sleep(0.1)
        again = _arrow(tui)
        if again != row:
            row, since = again, time.monotonic()
    for _ in range(30):
        if text in row:
            return
        tui.keys("Down")
        deadline = time.monotonic() + 10
        while (again := _arrow(tui)) == row and time.monotonic() < deadline:
            time.sleep(0.05)
        if again == row:
            break  # the last row: Down moves no further
        row = again
    raise AssertionError(f"{text!r} never selected\n{tui.screen()}")


def pick(tui: TmuxPi, text: str, screen_marker: str) -> str:
    """Select the row holding ``text``, press Enter, and wait for ``screen_marker``."""
    select(tui, text)
    tui.keys("Enter")
    return tui.wait_for(screen_marker)


def preview_of(tui: TmuxPi, prompt: str) -> str:
    return pick(tui, f'"{prompt}', f'Rewind to before "{prompt}')


def choose_action(tui: TmuxPi, label: str) -> None:
    select(tui, label)
    tui.keys("Enter")


def test_the_list_previews_names_own_work_shows_a_diff_and_restores_files_then_undo_and_redo(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    path = three_prompts(tui, project, agent_dir)
    leaf = read_session(path).leaf_id
    screen = open_rewind(tui)
    rows = [line for line in screen.splitlines() if " · " in line and '"' in line]
    assert [r for r in rows if '"third' in r] and rows.index(
        next(r for r in rows if '"third' in r)
    ) < rows.index(next(r for r in rows if '"first' in r)), "newest first"
    first_row = next(r for r in rows if '"first' in r)
    assert "4 deleted" in first_row and "⚠ your own work: mine.txt" in first_row

    screen = preview_of(tui, "first")
    assert "D mine.txt" in screen and "⚠ your own work" in screen
    assert "1 file holds your own work, not the agent's" in screen
    for label in ("Restore files only", "Restore files and conversation", "Conversation only"):
        assert label in screen
    screen = pick(tui, "D mine.txt", "what the restore would change")
    assert "-made by hand" in screen and "+++ /dev/null" in screen
    tui.keys("Escape")
    tui.wait_for("Actions (Enter to choose, Esc back)")

    choose_action(tui, "Restore files only")
    screen = tui.wait_for("Rewind: files restored to user", "D mine.txt")
    assert files(project) == BEFORE_FIRST
    # In /rewind's words: undo from its own ↶ row; no fork was asked for, so none is mentioned.
    assert M.REWIND_UNDO_HINT in screen and "no fork made" not in screen, screen
    session = read_session(path)
    op = records(path, OP)[-1]
    assert list(op) == ["v", "snapshots", "current", "undo"], "the record of /fork's Code only"
    assert session.entries[-1].parent_id == leaf, "at the leaf: the conversation stays"
    assert len(records(path, TURN)) == 3

    screen = open_rewind(tui)
    assert "↶ Undo the last file rewind (restore the files as before rewinding to" in screen
    tui.keys("Enter")  # the undo is the first row
    screen = tui.wait_for("Rewind: last file rewind undone")
    assert M.REWIND_UNDO_HINT_AGAIN in screen, screen
    assert files(project) == AFTER_THIRD
    screen = open_rewind(tui)
    assert '↶ Redo: back to the files before "first' in screen
    tui.keys("Enter")
    wait_files(project, BEFORE_FIRST)
    assert len(wait_ops(path, 3)) == 3, "restore, undo, redo: one op each"


def test_files_and_conversation_records_what_tree_records_and_moves_the_conversation(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    path = three_prompts(tui, project, agent_dir)
    second = [e for e in read_session(path).entries if e.role == "user"][1]
    open_rewind(tui)
    preview_of(tui, "second")
    choose_action(tui, "Restore files and conversation")
    tui.wait_for("Rewind: files restored to user", "the conversation moved there")
    assert files(project) == BEFORE_SECOND
    session = read_session(path)
    op = session.entries[-1]
    assert op.custom_type == OP and list(op.raw["data"]) == ["v", "snapshots", "current", "undo"]
    assert op.parent_id == second.parent_id, "hung where Pi's /tree put the leaf"
    assert "Restore Options" not in tui.screen(), "no menu: /rewind already asked"


def test_conversation_only_keeps_the_files_and_fork_hands_them_to_a_new_session(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    path = three_prompts(tui, project, agent_dir)
    open_rewind(tui)
    preview_of(tui, "third")
    choose_action(tui, "Conversation only")
    tui.wait_for("Rewind: kept the current files")
    assert files(project) == AFTER_THIRD
    keep = read_session(path).entries[-1]
    assert keep.custom_type == OP and "undo" not in keep.raw["data"], "/tree's Keep current files"

    open_rewind(tui, key="M-r")  # Alt+R opens the same list
    screen = preview_of(tui, "second")
    # Pi forks only from a prompt: the label says so (issue 32).
    assert "Fork from this prompt (a new session up to before it, with these files)" in screen
    choose_action(tui, "Fork from this prompt")
    # A shortcut has no command context (Pi's /fork needs one): the action goes through the
    # editor as a command and runs at once, no Enter asked of the user.
    screen = tui.wait_for("Rewind: this fork starts with the files of its rewind point")
    assert "press Enter to run it" not in screen, screen
    assert "error" not in screen, "no extension error (a stale ctx after the fork)"
    assert files(project) == BEFORE_SECOND
    assert len(records(path, FORK_PENDING)) == 1
    assert len(sessions(agent_dir)) == 2, "a new session file: the fork"
