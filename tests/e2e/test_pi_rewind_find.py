"""Finding a point in ``/rewind`` in the real interactive Pi 0.73.1 (tmux, asserting on the screen
after Pi's redraw), issue 35: typing filters the rows by prompt text and file name, Home, End,
PgUp and PgDn move, the position and count are shown, and a row keeps its marks and file names
when the window is narrow, cutting the prompt text instead (docs/pi.md#rewind)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.pikit import TmuxPi
from tests.e2e.test_pi_rewind import open_rewind, three_prompts

StartTui = Callable[..., TmuxPi]


def overlay_rows(screen: str) -> list[str]:
    """The overlay's body lines (between its side borders), stripped."""
    return [line.split("│")[1].strip() for line in screen.splitlines() if line.count("│") >= 2]


def selected(screen: str) -> str:
    rows = [row for row in overlay_rows(screen) if row.startswith("→ ")]
    assert len(rows) == 1, screen
    return rows[0]


def press(tui: TmuxPi, *keys: str) -> str:
    tui.keys(*keys)
    time.sleep(0.3)
    return tui.settled_screen()


def test_typing_filters_the_points_by_prompt_text_and_file_name_and_esc_clears_it_first(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    three_prompts(tui, project, agent_dir)
    screen = open_rewind(tui)
    assert "1 of " in screen, screen
    total = int(screen.split("1 of ", 1)[1].split()[0])
    assert total >= 3, screen

    tui._tmux("send-keys", "-t", "pi", "-l", "mine")  # a file name: only the first prompt's row
    screen = tui.wait_for("Filter: mine")
    rows = [row for row in overlay_rows(screen) if ' · "' in row]
    assert len(rows) == 1 and '"first' in rows[0] and "mine.txt" in rows[0], screen
    assert f"1 of 1 (of {total})" in screen, screen

    tui._tmux("send-keys", "-t", "pi", "-l", "zz")
    screen = tui.wait_for('No point matches "minezz"')
    screen = press(tui, "BSpace", "BSpace")
    assert "No point matches" not in screen and "Filter: mine" in screen, screen

    screen = press(tui, "Escape")  # clears the filter; the list stays open
    assert "Rewind: choose a point" in screen and "Filter:" not in screen, screen
    assert f"1 of {total}" in screen, screen
    tui._tmux("send-keys", "-t", "pi", "-l", "SECOND")  # prompt text, in any case
    screen = tui.wait_for("Filter: SECOND")
    rows = [row for row in overlay_rows(screen) if ' · "' in row]
    assert len(rows) == 1 and '"second' in selected(screen), screen
    press(tui, "Escape")
    screen = press(tui, "Escape")  # now closes
    assert "Rewind: choose a point" not in screen, screen


def test_home_end_and_pages_move_and_the_position_follows(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    three_prompts(tui, project, agent_dir)
    screen = open_rewind(tui)
    total = int(screen.split("1 of ", 1)[1].split()[0])
    assert '"third' in selected(screen), "the newest point is first"
    screen = press(tui, "End")
    assert f"{total} of {total}" in screen, screen
    assert '"first' in selected(screen), "the oldest point is last"
    screen = press(tui, "Home")
    assert f"1 of {total}" in screen and '"third' in selected(screen), screen
    screen = press(tui, "PageDown")
    assert f"{total} of {total}" in screen, "a page is longer than this list"
    screen = press(tui, "PageUp")
    assert f"1 of {total}" in screen, screen
    screen = press(tui, "Down")
    assert f"2 of {total}" in screen, screen


def test_a_narrow_row_keeps_its_marks_and_files_and_cuts_the_prompt_text(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    three_prompts(tui, project, agent_dir)
    for columns in (160, 100):
        tui._tmux("resize-window", "-t", "pi", "-x", str(columns))
        time.sleep(0.5)
        screen = open_rewind(tui)
        row = next(r for r in overlay_rows(screen) if '"first' in r)
        # The first prompt's point: every file deleted, one of them the user's own.
        assert "4 deleted" in row and "⚠ your own work: mine.txt" in row, (columns, screen)
        assert "D mine.txt" in row or "D a.txt" in row, (columns, screen)
        assert row.endswith(("…", '"')), (columns, row)
        assert row.index("⚠ your own work") < row.index('"first'), (columns, row)
        if columns == 100:  # the window really is narrow: the prompt text is what was cut
            assert len(row) < 100 and len(row.split('"first', 1)[1]) < 30, row
        press(tui, "Escape")


def test_the_rewind_key_setting_binds_another_key_and_alt_r_then_types_nothing_special(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui(settings={"rewind": {"key": "alt+j"}})
    three_prompts(tui, project, agent_dir)
    open_rewind(tui, key="M-j")
    press(tui, "Escape")
    screen = press(tui, "M-r")  # no longer bound: the list does not open
    time.sleep(1)
    assert "Rewind: choose a point" not in tui.settled_screen(), screen


def test_a_binary_files_row_in_the_preview_gives_both_sizes(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    from tests.e2e.pikit import turns, write
    from tests.e2e.test_pi_rewind import preview_of

    tui = start_tui()
    tui.wait_for("◆ 0 points / 0 snapshots")
    tui.prompt(
        "draw [[done: drawn]] " + turns([write("pic.bin", "x" * 1500 + "\0")]), "Done: drawn"
    )
    tui.prompt(
        "redraw [[done: redrawn]] " + turns([write("pic.bin", "\0\1" * 10)]), "Done: redrawn"
    )
    assert (project / "pic.bin").stat().st_size == 20
    open_rewind(tui)
    screen = preview_of(tui, "redraw")
    row = next(r for r in overlay_rows(screen) if r.lstrip("→ ").startswith("M pic.bin"))
    assert "M pic.bin  binary 20 B → 1.5 KB" in row, screen
