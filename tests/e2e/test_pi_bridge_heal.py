"""A bridge that dies is restarted by the extension at the next event (the real Pi,
``pi --mode rpc``): the prompts after it are recorded again, one warning names what was lost and
says rewind runs again, and the restarts are bounded: a bridge that cannot start, or that keeps
dying, ends in one warning quoting its real cause with the hint that fits it.

Bridges are started through a wrapper that logs each start, so the tests count them as a user
would count processes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ledger.ledgerview import LedgerView
from ledger.records import TURN
from ledger.session.store import read_session
from tests.e2e.pikit import RpcPi, bash, turns, write
from tests.e2e.test_pi_rpc_session import (
    alive,
    counted_bridge,
    pids,
    reaped,
    turn_count,
    wait_for,
)
from tests.gitkit import git

StartRpc = Callable[..., RpcPi]
RESTARTED = "restarted — rewind is running again"
GAVE_UP = "Rewind: bridge unavailable"


def rewind_warnings(rpc: RpcPi) -> list[str]:
    return [text for level, text in rpc.notices if level == "warning" and text.startswith("Rewind")]


def prompt_records(path: Path) -> list[list[str]]:
    """For each rewind-turn record: the ids of the entries it binds."""
    return [
        [entry_id for entry_id, _ in e.raw["data"]["bindings"]]
        for e in read_session(path).entries
        if e.custom_type == TURN
    ]


def user_ids(path: Path) -> list[str]:
    return [e.id for e in read_session(path).entries if e.type == "message" and e.role == "user"]


def test_a_bridge_killed_between_prompts_is_restarted_and_the_next_prompt_is_recorded(
    start_rpc: StartRpc, project: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "bridges"
    rpc = start_rpc(env=counted_bridge(pid_file))
    rpc.prompt("one " + turns([write("a.txt", "1\n")]))
    path = Path(rpc.state()["sessionFile"])
    assert turn_count(path, 1, timeout=30) == 1
    (first,) = pids(pid_file)
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: not alive(first), "the bridge to die")
    wait_for(lambda: reaped(first), "Pi to reap the bridge")
    time.sleep(0.5)  # Pi has seen it end (else the next event is the one that finds it dead)

    rpc.prompt("two " + turns([write("b.txt", "2\n")], [bash("echo 3 > c.txt")]))
    rpc.prompt("three " + turns([write("d.txt", "4\n")]))

    assert turn_count(path, 3, timeout=30) == 3, (
        "every prompt is recorded, the one after the kill too"
    )
    users = user_ids(path)
    assert [binds[0] for binds in prompt_records(path)] == users, "each record binds its prompt"
    assert len(pids(pid_file)) == 2, "one restart"
    (warning,) = rewind_warnings(rpc)
    assert warning.startswith(
        "Rewind: the bridge stopped (killed, SIGKILL) between prompts; restarted"
    ), warning
    assert RESTARTED in warning and "nothing is missing" in warning
    assert "pip install" not in warning
    # The footer is the new bridge's, counting every point on the branch.
    bound = LedgerView.of(read_session(path)).entry_to_commit
    assert rpc.status == f"◆ {len(bound)} points / {len(set(bound.values()))} snapshots"
    assert [(project / n).read_text() for n in ("b.txt", "c.txt", "d.txt")] == ["2\n", "3\n", "4\n"]


def kill_when(flag: Path, pid_file: Path) -> threading.Thread:
    """Kill the running bridge (the last one started) once ``flag`` exists."""

    def run() -> None:
        deadline = time.monotonic() + 60
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(pids(pid_file)[-1], signal.SIGKILL)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_bridge_killed_during_a_prompt_loses_only_the_points_taken_before_it_died(
    start_rpc: StartRpc, project: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "bridges"
    flag = project / "started.txt"
    rpc = start_rpc(env=counted_bridge(pid_file))
    rpc.prompt("one " + turns([write("a.txt", "1\n")]))
    path = Path(rpc.state()["sessionFile"])
    assert turn_count(path, 1, timeout=30) == 1

    killer = kill_when(flag, pid_file)
    # The bridge dies while the prompt's bash tool runs: the point before the prompt was in its
    # memory; the turn_end that finds it dead is recorded by the new bridge, and so is the next.
    rpc.prompt(
        "two "
        + turns([bash("echo go > started.txt; sleep 2; echo 2 > b.txt")], [write("c.txt", "3\n")])
    )
    killer.join(timeout=5)
    rpc.prompt("three " + turns([write("d.txt", "4\n")]))

    assert turn_count(path, 3, timeout=30) == 3
    records = prompt_records(path)
    users = user_ids(path)
    assert records[0][0] == users[0] and records[2][0] == users[2]
    assert users[1] not in records[1], "the files before prompt two died with the old bridge"
    session = read_session(path)
    adopted = [session.get(entry_id) for entry_id in records[1]]
    assert len(adopted) >= 2 and all(e is not None and e.role == "assistant" for e in adopted)
    assert len(pids(pid_file)) == 2
    (warning,) = rewind_warnings(rpc)
    assert warning.startswith(
        "Rewind: the bridge stopped (killed, SIGKILL) while the agent was working; restarted"
    ), warning
    assert RESTARTED in warning
    assert 'missing: the rewind points of the prompt "two [[turns:' in warning
    assert "its later turns are recorded" in warning and "pip install" not in warning
    # Consistent: every record's snapshot holds the files its entry saw.
    view = LedgerView.of(session)
    after_turn_one = view.entry_to_commit[records[1][0]]
    assert git(project, "show", f"{after_turn_one}:b.txt") == "2\n"
    assert [(project / n).read_text() for n in ("b.txt", "c.txt", "d.txt")] == ["2\n", "3\n", "4\n"]
    assert rpc.status is not None and rpc.status.startswith("◆ ")


def logged(log: Path, argv: list[str]) -> dict[str, str]:
    """A bridge command that appends a line to ``log`` each time it is started."""
    script = f'echo started >> "{log}"; exec "$@"'
    return {"REWIND_BRIDGE_CMD": json.dumps(["sh", "-c", script, "sh", *argv])}


def starts(log: Path) -> int:
    return log.read_text().count("started") if log.exists() else 0


def prompts_until_warning(rpc: RpcPi, text: str, limit: int = 8) -> int:
    """Prompts (each a second apart, past the back-off) until a warning starting with ``text``."""
    for n in range(1, limit + 1):
        rpc.prompt(f"p{n} " + turns([write(f"f{n}.txt", f"{n}\n")]))
        if any(w.startswith(text) for w in rewind_warnings(rpc)):
            return n
        time.sleep(1.1)
    raise AssertionError(f"no {text!r} warning after {limit} prompts: {rpc.notices}")


def test_a_bridge_that_can_never_start_gives_up_after_bounded_retries_with_install_advice(
    start_rpc: StartRpc, project: Path, tmp_path: Path
) -> None:
    log = tmp_path / "starts.log"
    no_site = [sys.executable, "-S", "-I", "-m", "ledger", "serve", "--stdio"]  # `ledger` unseen
    rpc = start_rpc(env=logged(log, no_site))
    prompts_until_warning(rpc, GAVE_UP)
    assert starts(log) == 3, "three attempts, then it stops trying"
    (warning,) = rewind_warnings(rpc)
    assert "it could not be started (3 attempts; exit code 1)" in warning, warning
    assert "rewind is off for the rest of this session" in warning
    assert "No module named ledger" in warning or "No module named 'ledger'" in warning
    assert "pip install" in warning and "REWIND_BRIDGE_CMD" in warning
    rpc.prompt("after " + turns([write("z.txt", "z\n")]))
    assert starts(log) == 3 and len(rewind_warnings(rpc)) == 1, "no more attempts, no more warnings"
    assert (project / "z.txt").read_text() == "z\n", "Pi carries on"
    assert rpc.status is None


CRASHING = """\
import json, sys
event = json.loads(sys.stdin.readline())
print(json.dumps({"type": "result", "id": event["id"], "result": {}, "notices": [], "status": "◆ crashy"}), flush=True)
sys.stdin.readline()
sys.stderr.write("Traceback (most recent call last):\\nRuntimeError: boom in the engine\\n")
sys.exit(1)
"""


def test_a_bridge_that_keeps_dying_gives_up_with_the_crash_hint_not_install_advice(
    start_rpc: StartRpc, project: Path, tmp_path: Path
) -> None:
    """Each bridge answers one event (its session_start) and dies at the next one."""
    log = tmp_path / "starts.log"
    rpc = start_rpc(env=logged(log, [sys.executable, "-c", CRASHING]))
    prompts_until_warning(rpc, GAVE_UP)
    assert starts(log) == 3
    warnings = rewind_warnings(rpc)
    restarts, final = warnings[:-1], warnings[-1]
    assert restarts and all(RESTARTED in w for w in restarts), warnings
    assert "it stopped 3 times within 10 minutes (last: exit code 1" in final, final
    assert "rewind is off for the rest of this session" in final
    assert "RuntimeError: boom in the engine" in final, "the real cause is quoted"
    assert "REWIND_DEBUG=1" in final and "rewind doctor" in final and "/reload" in final
    assert "pip install" not in final, "never install advice for a bridge that had been running"
    rpc.prompt("after " + turns([write("z.txt", "z\n")]))
    assert starts(log) == 3
    assert rpc.status is None, "the footer is cleared once rewind is off"


def test_a_bridge_that_exits_as_it_starts_gives_up_without_install_advice(
    start_rpc: StartRpc, tmp_path: Path
) -> None:
    log = tmp_path / "starts.log"
    script = "import sys; sys.stderr.write('RuntimeError: bad config\\n'); sys.exit(3)"
    rpc = start_rpc(env=logged(log, [sys.executable, "-c", script]))
    prompts_until_warning(rpc, GAVE_UP)
    assert starts(log) == 3
    (warning,) = rewind_warnings(rpc)
    assert "it could not be started (3 attempts; exit code 3)" in warning
    assert "RuntimeError: bad config" in warning and "exits as it starts" in warning
    assert "pip install" not in warning


def test_a_bridge_that_stops_answering_is_killed_and_restarted_at_the_next_event(
    start_rpc: StartRpc, project: Path, tmp_path: Path
) -> None:
    """A frozen bridge (SIGSTOP) misses its deadline: it is killed, and the prompt's next event
    starts a new one, so that prompt is still recorded (before_agent_start records nothing)."""
    pid_file = tmp_path / "bridges"
    rpc = start_rpc(env={**counted_bridge(pid_file), "REWIND_BRIDGE_TIMEOUT_MS": "4000"})
    rpc.prompt("one " + turns([write("a.txt", "1\n")]))
    path = Path(rpc.state()["sessionFile"])
    (first,) = pids(pid_file)
    os.kill(first, signal.SIGSTOP)
    rpc.prompt("two " + turns([write("b.txt", "2\n")]))
    wait_for(lambda: not alive(first), "the frozen bridge to be killed")
    assert turn_count(path, 2, timeout=30) == 2, (
        "the prompt whose first event timed out is recorded"
    )
    assert len(pids(pid_file)) == 2
    (warning,) = rewind_warnings(rpc)
    assert warning.startswith(
        "Rewind: the bridge stopped (no answer to before_agent_start within 4000 ms) during "
        "before_agent_start; restarted — rewind is running again; nothing is missing"
    ), warning
