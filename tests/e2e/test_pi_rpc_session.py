"""One long-lived real Pi (``pi --mode rpc``, the host of interactive use) with our extension:
records go through Pi, the footer, silent checkpoints, compaction, one bridge per session, and a
bridge that crashes (it is restarted), cannot start, or is slower than a user at a menu."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ledger.engine import messages as M
from ledger.ledgerview import LedgerView
from ledger.records import OP, TURN
from ledger.session.store import read_session
from tests.cli.helpers import run_process
from tests.e2e.pikit import RpcPi, bash, turns, write
from tests.gitkit import git

StartRpc = Callable[..., RpcPi]
UNAVAILABLE = "Rewind: bridge unavailable"


def counted_bridge(pid_file: Path) -> dict[str, str]:
    """The real bridge, started through a shell that records its pid (exec keeps the pid)."""
    script = f'echo $$ >> "{pid_file}"; exec "$0" -m ledger serve --stdio'
    return {"REWIND_BRIDGE_CMD": json.dumps(["sh", "-c", script, sys.executable])}


def pids(pid_file: Path) -> list[int]:
    return [int(line) for line in pid_file.read_text().split()] if pid_file.exists() else []


def reaped(pid: int) -> bool:
    """Whether the parent has reaped ``pid`` (its ``/proc`` entry goes then; where there is no
    ``/proc``, as good as reaped). Node reaps a child in the callback that tells the extension
    it ended: what a test waits for before the next event, which must not find it dead first."""
    return not Path(f"/proc/{pid}").exists() or not Path("/proc/self").exists()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by Pi) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def entries(path: Path) -> list:
    return read_session(path).entries


def turn_count(path: Path, expected: int, timeout: float = 30) -> int:
    """The number of rewind-turn records once ``expected`` is reached (or ``timeout`` s have passed).

    Pi reports the agent idle before its extension queue has run the prompt's last events, so a
    turn_end record may land a moment after ``RpcPi.prompt`` returns (seconds on a loaded
    machine: CI runs beside other work; it returns as soon as the count is reached).
    """
    deadline = time.monotonic() + timeout
    while True:
        count = len([e for e in entries(path) if e.custom_type == TURN])
        if count >= expected or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def test_records_go_through_pi_so_the_next_prompt_hangs_under_them(
    start_rpc: StartRpc, project: Path
) -> None:
    rpc = start_rpc()
    rpc.prompt("one " + turns([write("a.txt", "1\n")]))
    rpc.prompt("two " + turns([write("a.txt", "2\n")], [bash("rm a.txt")]))
    path = Path(rpc.state()["sessionFile"])
    assert turn_count(path, 2) == 2
    all_entries = entries(path)
    first_turn = next(e for e in all_entries if e.custom_type == TURN)
    second_user = [e for e in all_entries if e.type == "message" and e.role == "user"][1]
    # Had the bridge written the file itself, Pi's leaf would not know the record and the next
    # user message would hang under the assistant message instead.
    assert second_user.parent_id == first_turn.id
    assert len({e.id for e in all_entries}) == len(all_entries), "no entry written twice"
    # The footer: N bound entries of this file / M distinct snapshots among them (rewind-v2 §14).
    bound = LedgerView.of(read_session(path)).entry_to_commit
    assert rpc.status == f"◆ {len(bound)} points / {len(set(bound.values()))} snapshots"
    assert not (project / "a.txt").exists()


def test_silent_checkpoints_hide_the_footer_and_info_notices_but_still_restore(
    start_rpc: StartRpc, project: Path, agent_dir: Path
) -> None:
    (agent_dir / "settings.json").write_text(json.dumps({"rewind": {"silentCheckpoints": True}}))
    rpc = start_rpc()
    rpc.prompt("first " + turns([write("a.txt", "one\n")]))
    rpc.prompt("second " + turns([write("a.txt", "two\n")]))
    path = Path(rpc.state()["sessionFile"])
    assert turn_count(path, 2) == 2, "still recorded"
    first_final = [e.id for e in entries(path) if e.type == "message" and e.role == "assistant"][1]
    rpc.choices = [M.TREE_RESTORE]
    rpc.run_command(f"/e2e-tree {first_final}", "e2e-tree:")
    assert (project / "a.txt").read_text() == "one\n"
    assert rpc.status is None, "no footer when silent"
    assert [
        n for n in rpc.notices if n[1].startswith("Rewind") or n[1] in (M.FILES_RESTORED_TO_POINT,)
    ] == []


def test_compaction_binds_the_compaction_entry_to_the_current_files(
    start_rpc: StartRpc, project: Path, agent_dir: Path
) -> None:
    (agent_dir / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 1}}))
    rpc = start_rpc()
    rpc.prompt("first " + turns([write("a.txt", "one\n")]))
    rpc.prompt("second " + turns([write("b.txt", "two\n")]))
    rpc.command({"type": "compact"})
    path = Path(rpc.state()["sessionFile"])
    (compaction,) = [e for e in entries(path) if e.type == "compaction"]
    (op,) = [e.raw["data"] for e in entries(path) if e.custom_type == OP]
    assert op["bindings"] == [[compaction.id, 0]]
    snapshot = op["snapshots"][0]
    assert (
        git(project, "show", f"{snapshot}:a.txt") == "one\n"
        and git(project, "show", f"{snapshot}:b.txt") == "two\n"
    )
    tree = {
        row["id"]: row
        for row in run_process(
            "--agent-dir", agent_dir, "tree", path, "--json", cwd=project
        ).json_lines()
    }
    assert tree[compaction.id]["point"] == snapshot


def test_each_session_gets_its_own_bridge_and_the_old_one_exits(
    start_rpc: StartRpc, project: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "bridges"
    rpc = start_rpc(env=counted_bridge(pid_file))
    rpc.prompt("one " + turns([write("a.txt", "1\n")]))
    first = Path(rpc.state()["sessionFile"])
    (old,) = pids(pid_file)
    rpc.command({"type": "new_session"})
    rpc.prompt("two " + turns([write("b.txt", "2\n")]))
    second = Path(rpc.state()["sessionFile"])
    assert second != first
    assert len(pids(pid_file)) == 2, "the new session started its own bridge"
    wait_for(lambda: not alive(old), "the first session's bridge to exit after session_shutdown")
    assert alive(pids(pid_file)[1])
    for path in (first, second):
        assert turn_count(path, 1) == 1
    rpc.close()
    wait_for(lambda: not alive(pids(pid_file)[1]), "the last bridge to exit with Pi")


def test_a_bridge_killed_mid_session_is_restarted_and_the_next_prompts_are_recorded(
    start_rpc: StartRpc, project: Path, tmp_path: Path
) -> None:
    """A crash costs at most what was in flight: the extension restarts the bridge at the next
    event (tests/e2e/test_pi_bridge_heal.py has the cases in detail)."""
    pid_file = tmp_path / "bridges"
    rpc = start_rpc(env=counted_bridge(pid_file))
    rpc.prompt("one " + turns([write("a.txt", "1\n")]))
    (pid,) = pids(pid_file)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not alive(pid), "the bridge to die")
    rpc.prompt("two " + turns([write("b.txt", "2\n")], [bash("echo 3 > c.txt")]))
    rpc.prompt("three " + turns([write("d.txt", "4\n")]))
    assert [(project / n).read_text() for n in ("b.txt", "c.txt", "d.txt")] == ["2\n", "3\n", "4\n"]
    warnings = [n for n in rpc.notices if n[1].startswith("Rewind: the bridge stopped")]
    assert len(warnings) == 1 and warnings[0][0] == "warning", rpc.notices
    assert "rewind is running again" in warnings[0][1]
    assert not [n for n in rpc.notices if n[1].startswith(UNAVAILABLE)], rpc.notices
    path = Path(rpc.state()["sessionFile"])
    assert turn_count(path, 3, timeout=30) == 3, "the prompts after the crash are recorded"
    assert len(pids(pid_file)) == 2 and alive(pids(pid_file)[1]), "one restart, running"


def test_time_a_menu_waits_for_the_user_does_not_count_against_the_bridge_timeout(
    start_rpc: StartRpc, project: Path
) -> None:
    rpc = start_rpc(env={"REWIND_BRIDGE_TIMEOUT_MS": "4000"})
    rpc.prompt("first " + turns([write("a.txt", "one\n")]))
    rpc.prompt("second " + turns([write("a.txt", "two\n")]))
    path = Path(rpc.state()["sessionFile"])
    first_final = [e.id for e in entries(path) if e.type == "message" and e.role == "assistant"][1]
    rpc.think_seconds = 5.5  # longer than the bridge's timeout
    rpc.choices = [M.TREE_RESTORE]
    rpc.run_command(f"/e2e-tree {first_final}", "e2e-tree:")
    rpc.think_seconds = 0
    assert not [n for n in rpc.notices if n[1].startswith(UNAVAILABLE)], rpc.notices
    assert (project / "a.txt").read_text() == "one\n"
    rpc.prompt("third " + turns([write("c.txt", "3\n")]))
    assert turn_count(path, 3) == 3, "the bridge still records"


def test_a_bridge_that_cannot_start_says_why_and_how_to_fix_it(
    start_rpc: StartRpc, project: Path
) -> None:
    """`rewind` installed where Pi cannot find it: after its bounded retries, the warning quotes
    the bridge's stderr and a hint."""
    broken = json.dumps(
        [sys.executable, "-S", "-I", "-m", "ledger", "serve", "--stdio"]
    )  # no site-packages
    rpc = start_rpc(env={"REWIND_BRIDGE_CMD": broken})
    for n in range(6):  # the retries are spaced out (1 s, then 4 s): a few prompts
        rpc.prompt(f"p{n} " + turns([write("b.txt", f"{n}\n")]))
        if any(note[1].startswith(UNAVAILABLE) for note in rpc.notices):
            break
        time.sleep(1.1)
    warnings = [n for n in rpc.notices if n[1].startswith(UNAVAILABLE)]
    assert len(warnings) == 1, rpc.notices
    text = warnings[0][1]
    assert "No module named ledger" in text or "No module named 'ledger'" in text, text
    assert "REWIND_BRIDGE_CMD" in text and "pip install" in text
    assert (project / "b.txt").exists(), "Pi carries on"
    assert rpc.status is None


def test_shutdown_waits_briefly_for_the_bridge_then_kills_it(
    start_rpc: StartRpc, tmp_path: Path
) -> None:
    """A bridge that lingers after end of input (here: the shell that ran it sleeps on) is killed."""
    pid_file = tmp_path / "bridges"
    script = f'echo $$ >> "{pid_file}"; "$0" -m ledger serve --stdio; exec sleep 300'
    rpc = start_rpc(
        env={
            "REWIND_BRIDGE_CMD": json.dumps(["sh", "-c", script, sys.executable]),
            "REWIND_BRIDGE_CLOSE_MS": "1500",
        }
    )
    rpc.prompt("one " + turns([write("a.txt", "1\n")]))
    (old,) = pids(pid_file)
    rpc.command({"type": "new_session"})
    wait_for(
        lambda: not alive(old),
        "the lingering bridge to be killed after the grace period",
        timeout=15,
    )
    rpc.prompt("two " + turns([write("b.txt", "2\n")]))
    assert len(pids(pid_file)) == 2 and alive(pids(pid_file)[1])


def test_a_call_with_no_event_in_flight_gets_an_error_reply(
    start_rpc: StartRpc, tmp_path: Path
) -> None:
    """The extension answers a stray call with an error instead of leaving the bridge waiting."""
    seen = tmp_path / "reply.json"
    script = (
        "import json, os, runpy, sys\n"
        # Lines read byte by byte: a buffered readline could take the extension's next event
        # too (it may arrive with the reply), and the bridge below, reading the descriptor
        # itself, would never see it (seen once on a loaded machine: no turn recorded).
        "def line():\n"
        "    out = b''\n"
        "    while not out.endswith(b'\\n'):\n"
        "        byte = os.read(0, 1)\n"
        "        if not byte:\n"
        "            break\n"
        "        out += byte\n"
        "    return out.decode()\n"
        "event = json.loads(line())\n"  # session_start: answer it, then call out of turn
        # one write, so both lines reach the extension together: the call comes right after the
        # event's result, before the extension can send its next event
        "sys.stdout.write(json.dumps({'type': 'result', 'id': event['id'], 'result': {}, 'notices': []}) + '\\n'\n"
        "                 + json.dumps({'type': 'call', 'id': 'stray', 'method': 'session', 'params': {}}) + '\\n')\n"
        "sys.stdout.flush()\n"
        f"open({str(seen)!r}, 'w').write(line())\n"
        "sys.argv = ['ledger', 'serve', '--stdio']\n"
        "runpy.run_module('ledger', run_name='__main__')\n"
    )
    rpc = start_rpc(
        env={
            "REWIND_BRIDGE_CMD": json.dumps([sys.executable, "-c", script]),
            "REWIND_BRIDGE_TIMEOUT_MS": "15000",
        }
    )
    rpc.prompt("one " + turns([write("a.txt", "1\n")]))
    wait_for(seen.exists, "the stray call's reply")
    reply = json.loads(seen.read_text())
    assert reply == {"type": "reply", "id": "stray", "error": "no event in flight"}
    path = Path(rpc.state()["sessionFile"])
    assert turn_count(path, 1) == 1, "the bridge serves on"
