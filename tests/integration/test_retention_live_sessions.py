"""Retention across sessions (issue 27, docs/design.md#retention-across-sessions): a sweep run
from one session never drops a point another live session can still restore to, whatever its
scan mode; once that session is gone (even by ``kill -9``) its points are treated like any
other session's again. The other session is a real bridge process."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.clock import FixedClock
from ledger.git.repo import GitRepo
from ledger.retention.plan import Policy
from ledger.retention.sweep import run_sweep
from tests.bridgekit import FakePi
from tests.snapshotkit import ledger_session, snapshot_file

TWO_DAYS_LATER = FixedClock(int(time.time() * 1000) + 2 * 86_400_000)
"""Past the grace that keeps young unrecorded snapshots: only references protect them."""


@pytest.fixture
def other(repo: Path, isolated_env: Path) -> Iterator[tuple[FakePi, list[str]]]:
    """Session B, a live bridge, with two prompts of its own agent (its file on disk); yields
    it and the snapshots its ledger names."""
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    assert pi.event("session_start", {"reason": "startup"}).error is None
    pi.prompt("one", act=lambda: (repo / "b.txt").write_text("b one\n"))
    pi.prompt("two", act=lambda: (repo / "b.txt").write_text("b two\n"))
    pi.write_file()
    from ledger.ledgerview import LedgerView
    from ledger.session.store import read_session

    view = LedgerView.of(read_session(pi.session_file))
    named = sorted({sha for r in view.records for _, sha in r.bindings})
    yield pi, named
    if isinstance(pi.proc, subprocess.Popen) and pi.proc.poll() is None:
        pi.close()


def _sweep_from_a(repo: Path, agent_dir: Path, own: Path) -> dict[str, str]:
    report = run_sweep(
        GitRepo.discover(repo),
        own,
        agent_dir,
        scan_mode="ancestor-only",  # reads only its own lineage (the reference's default)
        policy=Policy(max_snapshots=50),
        clock=TWO_DAYS_LATER,
    )
    return {sha: decision.reason for sha, decision in report.plan.decisions.items()}


def test_a_sweep_from_one_session_keeps_every_point_of_a_live_session(
    repo: Path, isolated_env: Path, other: tuple[FakePi, list[str]]
) -> None:
    pi, named = other
    agent_dir = isolated_env / ".pi" / "agent"
    own = ledger_session(agent_dir, repo, current=snapshot_file(repo, "a.txt", "mine\n"))
    reasons = _sweep_from_a(repo, agent_dir, own)
    assert named and all(not reasons[sha].startswith("dropped") for sha in named), reasons
    store = GitRepo.discover(repo)
    assert all(store.commit_exists(sha) for sha in named)
    # B can still restore to its first prompt's point.
    first_user = next(e["id"] for e in pi.entries if e.get("message", {}).get("role") == "user")
    pi.choices = ["Restore files to that point"]
    pi.event("session_before_tree", {"targetId": first_user})
    assert not (repo / "b.txt").exists()


def test_once_the_session_is_killed_its_unreferenced_points_may_go(
    repo: Path, isolated_env: Path, other: tuple[FakePi, list[str]]
) -> None:
    pi, named = other
    agent_dir = isolated_env / ".pi" / "agent"
    own = ledger_session(agent_dir, repo, current=snapshot_file(repo, "a.txt", "mine\n"))
    assert isinstance(pi.proc, subprocess.Popen)
    os.kill(pi.proc.pid, signal.SIGKILL)
    pi.proc.wait(timeout=30)
    reasons = _sweep_from_a(repo, agent_dir, own)
    assert any(reasons[sha] == "dropped: unreferenced" for sha in named), (
        "a session that is gone is not protected by being live (its ledger is read only by a "
        "repo-sessions scan, as before)"
    )
