"""The real interactive Pi 0.73.1 (tmux) with our extension in a directory that is not a git
repository (docs/shadow.md): prompts are recorded into a shadow repository, ``/tree`` restores
and undoes files, and nothing but the user's files ever appears in the directory."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.engine import messages as M
from ledger.records import OP, TURN
from tests.e2e.pikit import FIRST, SECOND, TmuxPi, open_tree, records, sessions

StartTui = Callable[..., TmuxPi]
BEFORE = {"README.md": "# plain\n"}
AFTER_FIRST = {**BEFORE, "a.txt": "one\n"}
AFTER_SECOND = {**BEFORE, "a.txt": "two\n", "b.txt": "new\n"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A plain directory (no git anywhere above it) with one file."""
    path = tmp_path / "plain-project"
    path.mkdir()
    (path / "README.md").write_text("# plain\n")
    return path.resolve()


def everything(directory: Path) -> dict[str, str]:
    """Every path below ``directory``, hidden ones included (directories as ``/``)."""
    found = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs:
            found[str(Path(root, name).relative_to(directory)) + "/"] = ""
        for name in files:
            found[str(Path(root, name).relative_to(directory))] = Path(root, name).read_text()
    return found


def test_a_plain_directory_records_restores_and_undoes_through_a_shadow(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    tui.wait_for("◆ 0 points / 0 snapshots · shadow repository")  # the footer says how
    tui.prompt(FIRST, "Done: first-ok")
    tui.prompt(SECOND, "Done: second-ok")
    tui.wait_for("◆ 6 points")
    assert everything(project) == AFTER_SECOND
    (path,) = sessions(agent_dir)
    assert len(records(path, TURN)) == 2
    assert list((agent_dir / "rewind" / "shadow").iterdir()), "the shadow lives in the agent dir"

    open_tree(tui, "second")
    tui.choose(M.MENU_TITLE, M.TREE_RESTORE)
    tui.wait_for("Navigated to selected point", "Rewind: files restored to user")
    assert everything(project) == AFTER_FIRST
    assert list(records(path, OP)[-1]) == ["v", "snapshots", "current", "undo"]

    tui.keys("C-c")
    open_tree(tui, "first")
    tui.choose(M.MENU_TITLE, M.UNDO)
    tui.wait_for("Navigation cancelled", "Rewind: last file rewind undone")
    assert everything(project) == AFTER_SECOND
