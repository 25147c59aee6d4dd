"""Pi sends a prompt to the model without waiting for the bridge, yet no tool of that prompt
runs before its pre-prompt snapshot.

Why (issue 34, the first ``pi -p`` of the day): Pi awaits a ``session_start`` or
``before_agent_start`` handler before it sends the prompt to the model, and the engine needs
neither answer before the prompt's ``turn_start``, where it takes the snapshot. So the extension
does not wait for them (``session_start`` only in print mode), and a bridge that is still
loading no longer delays the model's request. What must hold instead (docs/design.md, "Pi's
events and their order"): the snapshot comes before the prompt's first tool, and the user entry
is bound to it. A proxy between Pi and the real bridge (a real process, real git) holds every
event line for :data:`HOLD_S`, as a slow start of the bridge would.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ledger.ledgerview import LedgerView
from ledger.session.store import read_session
from tests.e2e.pikit import PiRunner, turns, write
from tests.gitkit import git

HOLD_S = 1.5

PROXY = r"""
import subprocess, sys, threading, time
log = open(sys.argv[1], "a", buffering=1)
bridge = subprocess.Popen(sys.argv[3:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

def back():
    for line in bridge.stdout:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()

threading.Thread(target=back, daemon=True).start()
for line in sys.stdin.buffer:
    if line.startswith(b'{"type":"event"'):
        event = line.split(b'"event":"', 1)[1].split(b'"', 1)[0].decode()
        log.write(f"{event} {time.time() * 1000:.0f}\n")
        time.sleep(float(sys.argv[2]))
    bridge.stdin.write(line)
    bridge.stdin.flush()
bridge.stdin.close()
sys.exit(bridge.wait())
"""


def slow_bridge(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    proxy = tmp_path / "proxy.py"
    proxy.write_text(PROXY)
    events, requests = tmp_path / "events.log", tmp_path / "requests.log"
    bridge = [sys.executable, "-m", "ledger", "serve", "--stdio"]
    command = [sys.executable, str(proxy), str(events), str(HOLD_S), *bridge]
    env = {"REWIND_BRIDGE_CMD": json.dumps(command), "SCRIPTED_LOG": str(requests)}
    return env, events, requests


def times(log: Path) -> list[tuple[str, float]]:
    return [(w, float(t)) for w, t in (line.split() for line in log.read_text().splitlines())]


def test_a_print_mode_prompt_reaches_the_model_before_the_bridge_answers(
    pi: PiRunner, tmp_path: Path
) -> None:
    env, events, requests = slow_bridge(tmp_path)
    pi.run("hello [no-tools]", env=env)
    seen = dict(times(events)[:2])
    assert list(seen) == ["session_start", "before_agent_start"], times(events)
    first_request = times(requests)[0][1]
    # Waiting for either answer would put the request a whole hold after the event's arrival.
    assert first_request - seen["session_start"] < HOLD_S * 1000, (times(events), first_request)


def test_no_tool_runs_before_the_snapshot_of_its_prompt(pi: PiRunner, tmp_path: Path) -> None:
    env, events, requests = slow_bridge(tmp_path)
    pi.run("write " + turns([write("a.txt", "one\n")]), env=env)
    (path,) = pi.sessions()
    session = read_session(path)
    view = LedgerView.of(session)
    (user,) = [e.id for e in session.entries if e.type == "message" and e.role == "user"]
    assistants = [e.id for e in session.entries if e.type == "message" and e.role == "assistant"]
    before = git(pi.repo, "ls-tree", "-r", "--name-only", view.entry_to_commit[user]).split()
    after = git(
        pi.repo, "ls-tree", "-r", "--name-only", view.entry_to_commit[assistants[0]]
    ).split()
    assert "a.txt" not in before, "the pre-prompt snapshot holds the file the prompt's tool wrote"
    assert "a.txt" in after
    assert (pi.repo / "a.txt").read_text() == "one\n"
    # The model had answered with the tool call before the bridge even got turn_start: the
    # tool waited for the snapshot, not the model for the bridge.
    assert times(requests)[0][1] < dict(times(events))["turn_start"], times(events)
