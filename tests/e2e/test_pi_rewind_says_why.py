"""``/rewind`` says what happened when it cannot show or restore a point (the real Pi 0.73.1;
issue 32, item 10):

- a prompt that ran while the bridge was killed has no snapshot: its row says that none was
  taken (not that retention pruned it), in the interactive list (tmux);
- with pi-rewind-hook loaded too, ours stands aside: ``/rewind`` says that the reference
  extension is active, that rewind-ledger stands aside, and how to switch, while the footer
  counts the other extension's points (``pi --mode rpc``, with the stand-in of
  ``tests/e2e/pi/rewind-hook-standin.ts``);
- after the bridge gave up for the session, ``/rewind`` says it is unavailable and to ``/reload``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ledger.records import TURN
from tests.e2e.pikit import HERE, RpcPi, TmuxPi, bash, records, sessions, turns, write
from tests.e2e.test_pi_bridge_heal import kill_when
from tests.e2e.test_pi_rpc_session import UNAVAILABLE, counted_bridge, pids, turn_count

StartRpc = Callable[..., RpcPi]
StartTui = Callable[..., TmuxPi]
STANDIN = HERE / "pi" / "rewind-hook-standin.ts"


def overlay_text(screen: str) -> str:
    """The overlay's lines (between its borders) as one line of words: a wrapped sentence reads
    whole."""
    inside = [line.split("│")[1] for line in screen.splitlines() if line.count("│") >= 2]
    return " ".join(" ".join(inside).split())


def test_a_prompt_whose_snapshot_was_never_taken_is_listed_as_such_not_as_pruned(
    start_tui: StartTui, project: Path, agent_dir: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "bridges"
    flag = project / "started.txt"
    tui = start_tui(env=counted_bridge(pid_file))
    tui.wait_for("◆ 0 points / 0 snapshots")  # keys typed before Pi is ready are lost
    tui.prompt("one [[done: one-ok]] " + turns([write("a.txt", "1\n")]), "Done: one-ok")
    killer = kill_when(flag, pid_file)
    # The bridge is killed while prompt two's bash tool runs: the snapshot before the prompt
    # was in its memory, so prompt two's own point was never recorded.
    tui.prompt(
        "two [[done: two-ok]] "
        + turns([bash("echo go > started.txt; sleep 2; echo 2 > b.txt")], [write("c.txt", "3\n")]),
        "Done: two-ok",
    )
    killer.join(timeout=5)
    assert len(pids(pid_file)) == 2, "killed once, restarted"
    (path,) = sessions(agent_dir)
    assert turn_count(path, 2) == 2
    tui.type("/rewind")
    screen = tui.wait_for("Rewind: choose a point", '"two')
    rows = [line for line in screen.splitlines() if "│" in line and " · " in line]
    two = next(line for line in rows if '"two [[' in line)
    one = next(line for line in rows if '"one [[' in line)
    assert "ago   no snapshot was taken" in two, screen  # what it would change comes first
    assert "pruned" not in two, "never taken is not pruned"
    assert "no snapshot" not in one and "4 deleted" in one, screen
    tui.keys("Enter")  # the newest row, prompt two: its preview says what to do
    screen = tui.wait_for("Rewind to before", "no point to restore", "Files cannot be restored")
    text = overlay_text(screen)
    assert "Files cannot be restored: no snapshot was taken while this prompt ran" in text, text
    assert "choose the prompt before or after it to restore files" in text, "what to do"
    assert "Restore files only (keep the conversation) (not offered: see above)" in text


def test_with_pi_rewind_hook_loaded_rewind_says_ours_stands_aside_and_how_to_switch(
    start_rpc: StartRpc, project: Path, agent_dir: Path
) -> None:
    rpc = start_rpc("-e", str(STANDIN))
    rpc.prompt("one " + turns([write("a.txt", "1\n")]))
    assert rpc.status == "◆ stand-in 1", "the footer counts the other extension's points"
    rpc.run_command("/rewind", "Rewind: /rewind", timeout=60)
    text = next(t for _, t in reversed(rpc.notices) if t.startswith("Rewind: /rewind"))
    assert "pi-rewind-hook (the reference rewind extension) is active" in text, text
    assert "rewind-ledger stands aside" in text
    assert "pi remove" in text and "/reload" in text, "says how to switch"
    assert "rewind is off, or the bridge said why" not in text
    (path,) = sessions(agent_dir)
    assert len(records(path, TURN)) == 1, "only the other extension recorded"


def test_after_the_bridge_gave_up_rewind_says_it_is_unavailable_and_to_reload(
    start_rpc: StartRpc, project: Path
) -> None:
    broken = json.dumps([sys.executable, "-S", "-I", "-m", "ledger", "serve", "--stdio"])
    rpc = start_rpc(env={"REWIND_BRIDGE_CMD": broken})
    for n in range(6):  # the retries are spaced out (1 s, then 4 s): a few prompts
        rpc.prompt(f"p{n} " + turns([write("b.txt", f"{n}\n")]))
        if any(text.startswith(UNAVAILABLE) for _, text in rpc.notices):
            break
        time.sleep(1.1)
    assert any(text.startswith(UNAVAILABLE) for _, text in rpc.notices), rpc.notices
    rpc.run_command("/rewind", "Rewind: /rewind", timeout=60)
    text = next(t for _, t in reversed(rpc.notices) if t.startswith("Rewind: /rewind"))
    assert text.startswith("Rewind: /rewind is off in this session: the bridge is unavailable")
    assert "/reload" in text and "pi-rewind-hook" not in text, text
