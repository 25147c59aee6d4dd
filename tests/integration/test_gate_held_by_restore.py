"""A restore that meets another restore at the turn gate says so (issue 32, item 10;
docs/design.md#never-mid-turn): not "another session's turn is running".

One git repository, one Pi session (a real bridge) with a rewind point, and two real ``rewind
restore`` processes. The first is paused right after it took the turn gate (exclusive), before
its restore takes the capture lock or opens its journal: the second's journal wait finds
nothing and its plan's capture goes through, so the gate is what stops it. The second waits
there, names the first by pid and session, and refuses after its bound with nothing changed;
once the first finishes, it has restored.
"""

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

WAIT_S = 60.0

# A `rewind` process whose restore stops once it holds the turn gate (before the capture lock and
# the journal: Engine.restore_files imports restore_commit when it runs) until GO exists
# (bounded), after writing its pid to PAUSED.
_HOOKED = """
import os, sys, time
from pathlib import Path
from ledger.cli import main
from ledger.git.restore import run
paused, go = sys.argv[1:3]
original = run.restore_commit
def restore_commit(*args, **kwargs):
    Path(paused).write_text(str(os.getpid()))
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.01)
    return original(*args, **kwargs)
run.restore_commit = restore_commit
sys.exit(main(sys.argv[3:]))
"""


@pytest.fixture
def session(repo: Path, isolated_env: Path) -> Iterator[tuple[FakePi, str]]:
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    try:
        assert pi.event("session_start", {"reason": "startup"}).error is None
        point, _ = pi.prompt("make a", act=lambda: (repo / "a.txt").write_text("a\n"))
        pi.write_file()
        yield pi, point
    finally:
        pi.close()


def _args(pi: FakePi, point: str) -> list[str]:
    agent_dir = str(pi.agent_dir)
    return ["--agent-dir", agent_dir, "restore", str(pi.session_file), point, "--mode", "files"]


def test_a_cli_restore_meeting_another_restore_at_the_gate_names_it_not_a_turn(
    session: tuple[FakePi, str], repo: Path, tmp_path: Path
) -> None:
    pi, point = session
    paused, go = tmp_path / "paused", tmp_path / "go"
    first = subprocess.Popen(
        [sys.executable, "-c", _HOOKED, str(paused), str(go), *_args(pi, point), "--yes"],
        cwd=repo,
        env={**os.environ, "REWIND_TURN_WAIT": "0"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while not paused.exists():
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            assert time.monotonic() < deadline, "the first restore never reached its pause"
            time.sleep(0.01)

        second = subprocess.run(
            [sys.executable, "-m", "ledger", *_args(pi, point), "--yes"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "REWIND_TURN_WAIT": "1"},
        )
        err = second.stderr
        assert second.returncode == 1, err
        tail = session_label(str(pi.header["id"]))  # the id's random tail, not its prefix
        assert f"another restore (pid {first.pid}, session {tail}" in err, err
        assert "waiting for it to end before writing files (up to 1 s" in err
        assert f"error: another restore is running (pid {first.pid}" in err, err
        assert "turn" not in err, "a restore is not called a turn"
        assert "hint: nothing was changed" in err and f"kill {first.pid}" in err
        assert (repo / "a.txt").exists(), "nothing written by the refused restore"

        go.touch()
        assert first.wait(timeout=WAIT_S) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert not (repo / "a.txt").exists(), "the first restore went through"
