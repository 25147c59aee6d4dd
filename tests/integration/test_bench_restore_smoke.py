"""The whole-process restore benchmarks still run end to end (issue 34, item 6).

Why it exists: ``tools/bench_restore.py`` and ``tools/bench_restore_undo.py`` are run by hand at
100k files, rarely; an engine change that breaks their setup (a session through a real bridge,
the CLI's JSON, the ``/rewind`` event, a watcher hosting a session) would go unnoticed until
then. These run each script once on a tiny repository and check that every row is printed.
Nothing here looks at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.gitkit import ROOT

# A watcher and hosted sessions (Linux only); each script starts many processes.
pytestmark = [pytest.mark.needs("change_feed", "peer_credentials"), pytest.mark.slow]


def _run(script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / script), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "WARNING" not in done.stdout, done.stdout
    return done.stdout


def test_bench_restore_prints_every_entry_point_with_its_ratio_and_the_floors() -> None:
    out = _run("bench_restore.py", "--files", "300", "--runs", "1")
    for row in (
        "reference (sh: git add -A",
        "rewind restore, cold (REWIND_SERVED=0)",
        "breakdown: cold, no status prefetch",
        "breakdown: restore_commit in-process",
        "floor: the capture's git status alone",
        "floor: python + that status + pygit2/orjson",
        "rewind restore, watcher running",
        "/rewind files only, spawned bridge",
        "/rewind files only, session hosted by watcher",
        "floors (medians over every round): python -c pass",
        "load average",
    ):
        assert row in out, out


def test_bench_restore_undo_prints_the_pair_beside_its_floor() -> None:
    out = _run("bench_restore_undo.py", "--files", "300", "--prompts", "3", "--runs", "1")
    for row in ("cold (REWIND_SERVED=0)", "rewind serve --watch runs", "restore + undo"):
        assert row in out, out
    assert "pair floor (two interpreter starts + two stat scans)" in out, out
