"""Files changed by hand between prompts, in the real Pi 0.73.1: the footer says the pre-prompt
snapshot kept them, and "Restore Options" names those a restore would overwrite (issue 14)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ledger.engine import messages as M
from ledger.session.store import read_session
from tests.e2e.pikit import RpcPi, TmuxPi, turns, write

StartTui = Callable[..., TmuxPi]
NOTE = "rewind: kept your 2 changed files as a point before this prompt"
# c.txt was made by hand before the third prompt: older than the latest point, still the user's.
MENU_LINE = (  # under the choice it is about (issue 35)
    "  ⚠ 2 files hold your own work, not the agent's, and will be overwritten: a.txt, c.txt; "
    '"Undo last file rewind" brings them back'
)


def test_footer_and_menu_name_the_changes_made_by_hand(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    tui.wait_for("◆ 0 points / 0 snapshots")
    tui.prompt("first [[done: first-ok]] " + turns([write("a.txt", "one\n")]), "Done: first-ok")
    tui.prompt("second [[done: second-ok]] " + turns([write("a.txt", "two\n")]), "Done: second-ok")
    assert NOTE not in tui.screen()

    (project / "a.txt").write_text("by hand\n")
    (project / "c.txt").write_text("by hand\n")
    tui.prompt("third [[done: third-ok]] " + turns([write("d.txt", "d\n")]), "Done: third-ok")
    tui.wait_for(NOTE)

    (project / "a.txt").write_text("by hand again\n")
    tui.type("/tree")
    tui.wait_for("Session Tree")
    tui.type("second")
    screen = tui.wait_for(M.MENU_TITLE, MENU_LINE)
    assert M.TREE_RESTORE in screen
    tui.choose(M.MENU_TITLE, M.TREE_CANCEL)
    tui.wait_for(MENU_LINE, gone=True)
    assert (project / "a.txt").read_text() == "by hand again\n"


@pytest.fixture
def rpc(pi_cli: Path, project: Path, agent_dir: Path) -> Iterator[RpcPi]:
    client = RpcPi(pi_cli, project, agent_dir)
    yield client
    client.close()


def test_rpc_menu_title_and_status_carry_the_outside_changes(rpc: RpcPi, project: Path) -> None:
    rpc.prompt("first " + turns([write("a.txt", "one\n")]))
    rpc.prompt("second " + turns([write("a.txt", "two\n")]))
    assert rpc.status is not None and "kept your" not in rpc.status
    (project / "a.txt").write_text("by hand\n")
    (project / "c.txt").write_text("by hand\n")
    rpc.prompt("third " + turns([write("d.txt", "d\n")]))
    assert rpc.status is not None and rpc.status.endswith(f" · {NOTE}")

    (project / "a.txt").write_text("by hand again\n")
    session = read_session(Path(rpc.state()["sessionFile"]))
    second = [e.id for e in session.entries if e.type == "message" and e.role == "user"][1]
    rpc.choices = [M.TREE_CANCEL]
    rpc.run_command(f"/e2e-tree {second}", "e2e-tree:")
    title = rpc.menus[-1][0]
    assert title.splitlines()[0] == M.MENU_TITLE and MENU_LINE in title.splitlines()
    assert (project / "a.txt").read_text() == "by hand again\n"
