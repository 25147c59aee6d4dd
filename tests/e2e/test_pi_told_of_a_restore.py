"""Issue 33: a restore in one session over files another live session's agent wrote is shown on
that other session's screen (the real interactive Pi in tmux, read after its redraw): who
restored, which files, and the command that brings them back; its prompt note does not call
them "your changed files"."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ledger.session.store import read_session
from tests.e2e.pikit import TmuxPi, turns, write
from tests.e2e.test_pi_rpc_session import StartRpc


def _rewind(agent_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(agent_dir), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "REWIND_TURN_WAIT": "60"},
    )


def test_the_other_sessions_screen_says_who_restored_over_its_agents_file_and_how_to_get_it_back(
    start_tui: Callable[..., TmuxPi], start_rpc: StartRpc, project: Path, agent_dir: Path
) -> None:
    first = start_rpc()  # session A, over RPC
    first.prompt("make a " + turns([write("a.txt", "a by A\n")]))
    first_file = Path(first.state()["sessionFile"])
    first_id = read_session(first_file).header["id"]
    tui = start_tui()  # session B, in a real terminal
    tui.wait_for("◆ 0 points / 0 snapshots")
    tui.prompt("make b [[done: b-ok]] " + turns([write("b.txt", "b by B\n")]), "Done: b-ok")

    point = next(
        e.id for e in read_session(first_file).entries if e.type == "message" and e.role == "user"
    )
    args = ("restore", str(first_file), point, "--mode", "files", "--yes", "--json")
    done = _rewind(agent_dir, project, *args)
    assert done.returncode == 0, done.stderr
    op = json.loads(done.stdout.splitlines()[0])["record"]
    assert not (project / "b.txt").exists()

    # B's next prompt: its screen says it, and the note does not call b.txt the user's.
    tui.prompt("look [[done: look-ok]] " + turns([write("c.txt", "c\n")]), "Done: look-ok")
    screen = tui.wait_for("overwrote 1 file your agent wrote", f"--to {op}")
    flat = " ".join(screen.split())
    assert re.search(
        rf"Rewind: session \"make a.*?\" \(…{first_id[-8:]}\) restored files: overwrote 1 "
        r"file your agent wrote",
        flat,
    ), screen
    assert "b.txt" in screen and "get them back" in screen, screen
    assert "kept your" not in screen, screen

    # The command shown brings B's agent's file back.
    back = _rewind(agent_dir, project, "undo", str(first_file), "--to", op, "--yes")
    assert back.returncode == 0, back.stderr
    assert (project / "b.txt").read_text() == "b by B\n"
