"""What a prompt costs between the real Pi and the bridge (issue 34, per prompt): the extension
sends the session's new entries with each event, so the bridge asks for nothing but to append
the prompt's record, and it leaves out the events the bridge does nothing with. A bridge that
does not know these additions (an older one) still records every prompt the same way."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from ledger.records import TURN
from ledger.session.store import read_session
from tests.e2e.pikit import RpcPi, turns, write

PROMPT_EVENTS = [
    "before_agent_start",
    "turn_start",
    "turn_end",
    "turn_start",
    "turn_end",
    "turn_start",
    "turn_end",
    "agent_end",
]

# An older bridge, as far as the protocol goes: the real one behind a filter that drops what an
# older bridge would not read (`session` with events and append answers) nor send (`skip`).
OLDER_BRIDGE = """
import subprocess, sys, threading, json
child = subprocess.Popen([sys.executable, "-m", "ledger", "serve", "--stdio"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def down():
    for line in sys.stdin.buffer:
        message = json.loads(line)
        message.pop("session", None)
        if isinstance(message.get("result"), dict):
            message["result"].pop("session", None)
        child.stdin.write((json.dumps(message) + "\\n").encode())
        child.stdin.flush()
    child.stdin.close()
threading.Thread(target=down, daemon=True).start()
for line in child.stdout:
    message = json.loads(line)
    message.pop("skip", None)
    sys.stdout.buffer.write((json.dumps(message) + "\\n").encode())
    sys.stdout.buffer.flush()
sys.exit(child.wait())
"""


def _prompts(rpc: RpcPi, count: int) -> Path:
    for n in range(count):
        rpc.prompt(f"p{n} " + turns([write(f"a{n}.txt", "1\n")], [write(f"b{n}.txt", "2\n")]))
    path = Path(rpc.state()["sessionFile"])
    deadline = time.monotonic() + 30
    while len(_turns(path)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return path


def _turns(path: Path) -> list[dict[str, Any]]:
    return [e.raw["data"] for e in read_session(path).entries if e.custom_type == TURN]


def _last_prompt(trace: Path, timeout: float = 30) -> list[dict[str, Any]]:
    """The last prompt's trace lines, once its agent_end line is there: the bridge writes an
    event's line after its handler, and agent_end's handler appends the prompt's record, so the
    record (what `_prompts` waits for) can be in the session before the line is in the trace."""
    deadline = time.monotonic() + timeout
    while True:
        # Whole lines only (a line being written has no newline yet), events only (the warm-up
        # writes a line of its own from another thread, whenever it ends).
        read = [json.loads(line) for line in trace.read_bytes().split(b"\n")[:-1]]
        lines = [line for line in read if line["event"] != "warm-up"]
        start = max(i for i, line in enumerate(lines) if line["event"] == "before_agent_start")
        end = next((i for i in range(start, len(lines)) if lines[i]["event"] == "agent_end"), None)
        if end is not None:
            return lines[start : end + 1]
        assert time.monotonic() < deadline, f"no agent_end after the last prompt: {lines[start:]}"
        time.sleep(0.05)


def _bound_roles(path: Path) -> list[list[str]]:
    """Per record, the roles of the entries it binds (what the prompt can be rewound to)."""
    by_id = {e.id: e for e in read_session(path).entries}
    return [
        sorted(str(by_id[entry].role) for entry, _ in turn["bindings"]) for turn in _turns(path)
    ]


def test_a_prompt_sends_one_event_per_turn_boundary_and_asks_only_to_append(
    start_rpc: Any, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.jsonl"
    rpc = start_rpc(env={"REWIND_TRACE": str(trace)})
    path = _prompts(rpc, 2)
    assert len(_turns(path)) == 2
    prompt = _last_prompt(trace)
    # Before: six message_end events more, and nine calls (a session sync per event, three at
    # agent_end); now the one call appends the prompt's record.
    assert [line["event"] for line in prompt] == PROMPT_EVENTS
    assert sum(line["calls"] for line in prompt) == 1
    assert _bound_roles(path) == [["assistant", "assistant", "assistant", "user"]] * 2


def test_an_older_bridge_still_records_every_prompt_alike(start_rpc: Any, tmp_path: Path) -> None:
    script = tmp_path / "older_bridge.py"
    script.write_text(OLDER_BRIDGE)
    trace = tmp_path / "trace.jsonl"
    rpc = start_rpc(
        env={
            "REWIND_BRIDGE_CMD": json.dumps([sys.executable, str(script)]),
            "REWIND_TRACE": str(trace),
        }
    )
    path = _prompts(rpc, 2)
    assert len(_turns(path)) == 2
    prompt = _last_prompt(trace)
    # Every event forwarded, the session asked for: the way an older bridge is spoken to.
    assert "message_end" in [line["event"] for line in prompt]
    assert sum(line["calls"] for line in prompt) > 1
    assert _bound_roles(path) == [["assistant", "assistant", "assistant", "user"]] * 2
