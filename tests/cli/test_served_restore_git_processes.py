"""A restore run by the watcher writes and verifies a plain file without git: no throw-away
index, no ``checkout-index``, no ``git var``, and no ``hash-object`` beyond the feed's own
(ledger/git/restore/direct_write.py, docs/capture.md#writing-in-process). Real watcher and
client processes; a ``git`` on ``PATH`` that logs each subcommand, then runs the real one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.demo import build_world, run_prompts
from tests.gitkit import ROOT, git_call_log
from tests.watchkit import start_watch, stop_watch

pytestmark = pytest.mark.needs("peer_credentials")  # served commands


def test_a_served_restore_of_one_file_starts_no_git_checkout_hash_or_var(tmp_path: Path) -> None:
    world = run_prompts(build_world(tmp_path / "w"))
    shim, log = git_call_log(tmp_path)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "REWIND_FEED_VERIFY": "0",
        "PATH": f"{shim}:{os.environ['PATH']}",
    }

    def restore(text: str) -> dict[str, object]:
        (world.repo / "hello.py").write_text(text)
        proc = subprocess.run(
            [sys.executable, "-m", "ledger", "--agent-dir", str(world.agent_dir)]
            + ["restore", "@", world.users[1], "--mode", "files", "--yes", "--json"],
            cwd=world.repo,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        result: dict[str, object] = json.loads(proc.stdout)
        return result

    watcher = start_watch(world.repo, env=env)
    try:
        restore("edited by hand once\n")  # the watcher's feed and configuration are warm now
        expected = (world.repo / "hello.py").read_bytes()
        log.write_text("")
        restore("edited by hand again\n")
    finally:
        err = stop_watch(watcher, signal.SIGTERM)
    assert "served: 2" in err, err
    assert (world.repo / "hello.py").read_bytes() == expected
    calls = log.read_text().split()
    assert not {"checkout-index", "update-index", "var"} & set(calls), calls
    assert calls.count("hash-object") <= 1, calls  # the feed's capture of the edit, if any
