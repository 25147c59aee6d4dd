"""Two sessions started within a second are told apart (issue 33 item 5): ``rewind status``
names each by its name or first prompt plus its id's random tail, never by the UUIDv7 prefix
both share, and shows the pid of the Pi process, not of the bridge serving it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.session_names import session_label
from tests.bridgekit import FakePi


def _uuid7_pair() -> tuple[str, str]:
    """Two UUIDv7-shaped ids of one millisecond: the same 48-bit clock prefix, other tails."""
    clock = f"{int(time.time() * 1000):012x}"
    prefix = f"{clock[:8]}-{clock[8:]}-7"
    return f"{prefix}a11-9f0b-2d4c7f3a9c2e", f"{prefix}b42-8e1d-6a0b11d04f57"


def _status(agent_dir: Path, cwd: Path, session_file: Path) -> str:
    """The real CLI in its own process."""
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(agent_dir)]
        + ["status", str(session_file)],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=True,
    )
    return done.stdout.decode()


@pytest.fixture
def twins(repo: Path, isolated_env: Path) -> Iterator[tuple[FakePi, FakePi]]:
    agent_dir = isolated_env / ".pi" / "agent"
    sessions = agent_dir / "sessions"
    pis = []
    for sid in _uuid7_pair():
        pi = FakePi(repo, agent_dir, session_file=sessions / f"2026_{sid}.jsonl")
        pi.header["id"] = sid  # before the first event: the bridge reads the header then
        pis.append(pi)
    started = time.monotonic()
    for pi in pis:
        assert pi.event("session_start", {"reason": "startup"}).error is None
    assert time.monotonic() - started < 5
    yield pis[0], pis[1]
    for pi in pis:
        if isinstance(pi.proc, subprocess.Popen) and pi.proc.poll() is None:
            pi.close()


def test_two_sessions_started_together_are_listed_by_label_and_pis_pid(
    twins: tuple[FakePi, FakePi], repo: Path
) -> None:
    first, second = twins
    assert first.header["id"][:13] == second.header["id"][:13], "one clock prefix"
    first.prompt("fix the login bug\nin auth.py, please")
    second._append({"type": "session_info", "name": "Refactor the parser"})
    second.prompt("something the name outranks")
    session_file = first.write_file()

    text = _status(first.agent_dir, repo, session_file)
    one = '"fix the login bug in auth.py, please" (…7f3a9c2e)'
    assert f"session {one}, pid {os.getpid()}, started " in text, text
    two = session_label(second.header["id"], "Refactor the parser")
    assert two == '"Refactor the parser" (…11d04f57)'
    assert f"session {two}, pid {os.getpid()}, started " in text, text
    words = text.replace(str(first.session_file), "").replace(str(second.session_file), "")
    assert first.header["id"][:8] not in words, "never the shared time-ordered prefix"
    for pi in (first, second):
        assert isinstance(pi.proc, subprocess.Popen)
        assert f"pid {pi.proc.pid}," not in text, "the bridge's pid is not the one shown"


def test_a_session_without_a_prompt_yet_is_named_by_its_ids_tail(
    twins: tuple[FakePi, FakePi], repo: Path
) -> None:
    first, second = twins
    first.prompt("make a")
    text = _status(first.agent_dir, repo, first.write_file())
    assert 'session "make a" (…7f3a9c2e), pid ' in text, text
    assert "session …11d04f57, pid " in text, text
