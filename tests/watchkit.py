"""A real ``rewind serve --watch`` process for the tests of served snapshots and captures
(tests/cli/test_snapshot_served.py, tests/integration/test_bridge_delegate.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitkit import ROOT


def start_watch(
    repo: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start the watcher in ``repo`` (in ``env``, else ours) and wait until it serves (its first
    stderr line)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "serve", "--watch", *extra],
        cwd=repo,
        stderr=subprocess.PIPE,
        text=True,
        env={**(env or os.environ), "PYTHONPATH": str(ROOT), "REWIND_FEED_VERIFY": "0"},
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "'rewind snapshot' is served from here" in line, line
    return proc


def stop_watch(proc: subprocess.Popen[str], sig: int = signal.SIGINT) -> str:
    """Stop it cleanly; its stderr (the closing ``served … / declined …`` line)."""
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


@contextlib.contextmanager
def watch(
    repo: Path, *extra: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """:func:`start_watch`, killed at the end if the test did not stop it."""
    proc = start_watch(repo, *extra, env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


@pytest.fixture
def watching(repo: Path) -> Iterator[subprocess.Popen[str]]:
    """A watcher of the ``repo`` fixture, killed at the end if the test did not stop it."""
    with watch(repo) as proc:
        yield proc
