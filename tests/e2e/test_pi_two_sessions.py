"""Two real Pi processes (``pi --mode rpc``) in one repository (issue 27): each is told of the
other, a restore plan names the other session's files apart from the user's, a restore waits for
(or refuses during) the other session's running turn (a scripted tool that sleeps), and ``kill
-9`` of one session frees the work tree and its registry entry."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.session.store import read_session
from tests.e2e.pikit import FIRST, TmuxPi, bash, turns, write
from tests.e2e.test_pi_rewind import open_rewind, preview_of
from tests.e2e.test_pi_rpc_session import StartRpc, wait_for

NOTICE = "Rewind: another Pi session works in this directory too (session "


def _rewind(
    agent_dir: Path, cwd: Path, *args: str, wait: str = "120"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(agent_dir), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "REWIND_TURN_WAIT": wait},
    )


def _first_user(path: Path) -> str:
    return next(
        e.id for e in read_session(path).entries if e.type == "message" and e.role == "user"
    )


def _live(agent_dir: Path, project: Path, session: Path) -> list[dict[str, Any]]:
    done = _rewind(agent_dir, project, "status", str(session), "--json")
    assert done.returncode == 0, done.stderr
    listed: list[dict[str, Any]] = json.loads(done.stdout.splitlines()[0])["liveSessions"]
    return listed


def test_two_pi_sessions_see_each_other_attribute_files_and_never_restore_mid_turn(
    start_rpc: StartRpc, project: Path, agent_dir: Path
) -> None:
    first = start_rpc()
    first.prompt("make a " + turns([write("a.txt", "a by the first agent\n")]))
    first_file = Path(first.state()["sessionFile"])
    second = start_rpc()
    second.prompt("make b " + turns([write("b.txt", "b by the second agent\n")]))
    second_file = Path(second.state()["sessionFile"])
    second_id = read_session(second_file).header["id"]
    (project / "mine.txt").write_text("by hand\n")

    # Each is told of the other once; both footers count two.
    assert any(text.startswith(NOTICE) for _, text in second.notices)
    first.prompt("look " + turns([]))
    assert any(text.startswith(NOTICE) for _, text in first.notices)
    assert first.status is not None and first.status.endswith(" · 2 sessions here")

    # The plan in the first session names the second agent's file apart from the user's.
    point = _first_user(first_file)
    args = ("restore", str(first_file), point, "--mode", "files")
    plan = _rewind(agent_dir, project, *args, "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr
    data = json.loads(plan.stdout.splitlines()[0])
    [group] = data["writtenByOtherSessions"]
    assert group["sessionId"] == second_id and group["running"] is True
    assert group["paths"] == ["b.txt"]
    assert [c["path"] for c in data["changedOutsideAgent"]] == ["mine.txt"]
    text = _rewind(agent_dir, project, *args, "--dry-run").stdout
    # Named by its first prompt's words and its id's random tail (never the clock prefix).
    assert re.search(
        rf"1 file written by session \"make b[^\n]*\(…{second_id[-8:]}\) \(still running\) "
        r"will be overwritten: b\.txt",
        text,
    ), text

    # The second session's agent runs a tool that sleeps: a restore now is refused, nothing
    # written; once the turn ends the same restore goes through. (10 s: the listing, the refused
    # run and the start of the waiting one must all fit in that turn, on slow loaded cores too.)
    second.command(
        {"type": "prompt", "message": "slow " + turns([bash("sleep 10"), write("c.txt", "c\n")])}
    )
    wait_for(
        lambda: any(
            e["busy"] for e in _live(agent_dir, project, first_file) if e["sessionId"] == second_id
        ),
        "the second session's turn to be in flight",
    )
    refused = _rewind(agent_dir, project, *args, "--yes", wait="1")
    assert refused.returncode == 1, refused.stdout
    assert re.search(rf"error: a turn of session [^\n]*…{second_id[-8:]}\)", refused.stderr), (
        refused.stderr
    )
    assert (project / "b.txt").exists() and (project / "mine.txt").exists()
    started = time.monotonic()
    waited = _rewind(agent_dir, project, *args, "--yes")
    assert waited.returncode == 0, waited.stderr
    assert "waiting for it to end before writing files" in waited.stderr
    # The restore planned after the turn had written c.txt (so it deletes it too): it did not
    # write while the agent's tools ran.
    assert "D c.txt" in waited.stdout, waited.stdout
    assert time.monotonic() - started < 60
    second.wait_idle()
    assert not (project / "b.txt").exists() and not (project / "mine.txt").exists()

    # kill -9 of the second Pi: its bridge goes with it, its entry is cleaned, the first goes on.
    os.kill(second.proc.pid, signal.SIGKILL)
    second.proc.wait(timeout=30)
    wait_for(
        lambda: (
            [e["sessionId"] for e in _live(agent_dir, project, first_file)]
            == [read_session(first_file).header["id"]]
        ),
        "the killed session's entry to go",
        timeout=30,
    )
    first.prompt("again " + turns([write("d.txt", "d\n")]))
    assert first.status is not None and "sessions here" not in first.status


def test_the_interactive_rewind_screen_names_the_other_sessions_files_and_greys_out_restores_mid_turn(
    start_tui: Callable[..., TmuxPi], start_rpc: StartRpc, project: Path, agent_dir: Path
) -> None:
    """Session A in a real terminal (tmux, read after Pi's redraw), session B beside it over RPC."""
    tui = start_tui()
    tui.wait_for("◆ 0 points / 0 snapshots")
    tui.prompt(FIRST, "Done: first-ok")
    second = start_rpc()
    second.prompt("make b " + turns([write("b.txt", "b by the second agent\n")]))
    second_file = Path(second.state()["sessionFile"])
    second_id = read_session(second_file).header["id"]

    screen = open_rewind(tui)
    first_row = next(line for line in screen.splitlines() if '"first' in line)
    assert "⚠ another session's: b.txt" in first_row, screen
    screen = preview_of(tui, "first")
    flat = " ".join(screen.split())  # the label may wrap on the screen
    assert re.search(
        rf"1 file written by session .*?…{second_id[-8:]}\) \(still running\) will", flat
    ), screen
    assert re.search(rf"⚠ session .*?…{second_id[-8:]}\)'s agent", flat), screen
    close_rewind(tui)

    # B's agent runs a slow tool: A's preview offers no file restore, and says why.
    second.command({"type": "prompt", "message": "slow " + turns([bash("sleep 8")])})
    # Until its turn is in flight (not a fixed 1.5 s: a prompt that starts slowly under load
    # would not be running yet, and the restore would rightly be offered).
    wait_for(
        lambda: any(
            e["busy"] for e in _live(agent_dir, project, second_file) if e["sessionId"] == second_id
        ),
        "the second session's turn to be in flight",
    )
    open_rewind(tui)
    screen = preview_of(tui, "first")
    assert "Restore files only (keep the conversation) (not offered: a turn of session" in screen, (
        screen
    )
    # The reason names the session by its id's tail (the row may be cut at the screen's edge).
    assert re.search(rf"not offered: a turn of session .*?…{second_id[-8:]}\)", screen), screen
    assert (project / "b.txt").exists()
    # Left open, the preview follows B's turn as it ends: the restore is offered again.
    second.wait_idle()
    screen = tui.wait_for("not offered: a turn of session", "(turn running)", gone=True, timeout=30)
    assert "→ Restore files only (keep the conversation)" in screen, screen
    assert "(still running) will be overwritten" in " ".join(screen.split()), screen
    close_rewind(tui)
    assert (project / "b.txt").exists(), "nothing was restored"


def close_rewind(tui: TmuxPi) -> None:
    """Esc from the preview back to the list, Esc again to close it, reading the screen."""
    tui.keys("Escape")
    tui.wait_for("Rewind: choose a point")
    time.sleep(0.3)
    tui.keys("Escape")
    tui.wait_for("Rewind: choose a point", gone=True)
