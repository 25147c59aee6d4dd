"""``rewind serve --status`` and ``--stop``: which process serves a repository, and stopping its
watcher (never a Pi session's bridge). Real watcher and bridge processes
(docs/capture.md#shared-watcher)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.bridgekit import FakePi
from tests.cli.helpers import run_process
from tests.watchkit import watch

pytestmark = pytest.mark.needs("peer_credentials")  # served snapshots, hosted sessions


def test_status_names_the_watcher_and_stop_ends_it(repo: Path) -> None:
    idle = run_process("serve", "--status", cwd=repo)
    assert idle.code == 0 and "no watcher serves" in idle.out
    with watch(repo) as watcher:
        status = run_process("serve", "--status", "--json", cwd=repo)
        info = json.loads(status.out)
        assert info["serving"] and info["pid"] == watcher.pid and info["kind"] == "watcher"
        assert info["hosting"] is True and info["since"]
        text = run_process("serve", "--status", cwd=repo).out
        assert f"served by a watcher (pid {watcher.pid})" in text
        stopped = run_process("serve", "--stop", cwd=repo)
        assert stopped.code == 0, stopped.err
        assert f"stopped the watcher of {repo} (pid {watcher.pid})" in stopped.out
        watcher.wait(timeout=30)
        assert watcher.returncode == 0, "a clean stop"
    assert "nothing to stop" in run_process("serve", "--stop", cwd=repo).out


def test_stop_never_ends_a_pi_sessions_bridge(repo: Path, isolated_env: Path) -> None:
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    try:
        pi.has_ui = True
        assert pi.event("session_start", {"reason": "startup"}).error is None
        pi.prompt("serve", lambda: (repo / "a.txt").write_text("a\n"))
        # The bridge serves snapshots from its own feed once it is armed (in the background).
        deadline = time.monotonic() + 30
        while True:
            info = json.loads(run_process("serve", "--status", "--json", cwd=repo).out)
            if info["serving"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert info["serving"] and info["kind"] == "bridge"
        refused = run_process("serve", "--stop", cwd=repo)
        assert refused.code == 1 and "bridge of a running Pi session" in refused.err
        assert "hint: " in refused.err
        assert isinstance(pi.proc, subprocess.Popen) and pi.proc.poll() is None, "still running"
    finally:
        pi.close()
