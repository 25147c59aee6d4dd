"""Retention sweeps on real repositories and session files: the reference's cases 5–8 and 13–14,
D7 with real processes, and what survives ``git gc --prune=now``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ledger.clock import FixedClock
from ledger.engine.engine import Engine
from ledger.engine.host import FileHost
from ledger.git.repo import GitRepo
from ledger.git.restore.run import restore_commit
from ledger.git.store.chain import Store
from ledger.record_models import build_op
from ledger.records import OP
from ledger.retention import scheduler as scheduler_module
from ledger.retention.plan import Policy
from ledger.retention.scheduler import SweepScheduler
from ledger.retention.sweep import run_sweep
from ledger.session.store import SessionAppender
from ledger.settings import Settings
from tests.gitkit import ROOT, git
from tests.snapshotkit import (
    is_ancestor,
    ledger_session,
    retention,
    set_store,
    snapshot_file,
    store_head,
)


def engine_with(
    repo: Path, agent_dir: Path, path: Path, settings: Settings
) -> tuple[Engine, SweepScheduler]:
    host = FileHost(path, agent_dir / "sessions")
    scheduler = SweepScheduler(GitRepo.discover(repo), agent_dir, settings, lambda: host.session())
    return Engine(host, GitRepo.discover(repo), settings=settings, retention=scheduler), scheduler


def test_case_5_startup_leaves_the_store_alone_with_retention_off(
    repo: Path, agent_dir: Path
) -> None:
    stale = snapshot_file(repo, "a.txt", "a\n")
    set_store(repo, stale)
    path = ledger_session(agent_dir, repo, current=snapshot_file(repo, "a.txt", "b\n"))
    set_store(repo, stale)
    engine, scheduler = engine_with(repo, agent_dir, path, Settings(retention=None))
    engine.session_start("startup")
    engine.shutdown("quit")
    assert store_head(repo) == stale and scheduler.reports == []


def test_case_6_an_empty_live_set_preserves_the_store(repo: Path, agent_dir: Path) -> None:
    stale = snapshot_file(repo, "a.txt", "a\n")
    set_store(repo, stale)
    path = ledger_session(agent_dir, repo)
    engine, scheduler = engine_with(repo, agent_dir, path, retention(max_snapshots=10))
    engine.session_start("startup")
    scheduler.wait()
    assert store_head(repo) == stale
    assert scheduler.reports[0][1].preserved


def test_case_7_ancestor_only_ignores_unrelated_session_files(repo: Path, agent_dir: Path) -> None:
    live = snapshot_file(repo, "a.txt", "live\n")
    stale = snapshot_file(repo, "a.txt", "stale\n")
    ledger_session(agent_dir, repo, current=live)  # unrelated: no parent link
    set_store(repo, stale)
    path = ledger_session(agent_dir, repo)
    engine, scheduler = engine_with(
        repo, agent_dir, path, retention(max_snapshots=10, scan_mode="ancestor-only")
    )
    engine.session_start("startup")
    scheduler.wait()
    assert store_head(repo) == stale


def test_case_8_a_live_snapshot_makes_the_sweep_rewrite_the_store(
    repo: Path, agent_dir: Path
) -> None:
    live = snapshot_file(repo, "a.txt", "live\n")
    stale = snapshot_file(repo, "a.txt", "stale\n")
    set_store(repo, stale)
    path = ledger_session(agent_dir, repo, current=live)
    engine, scheduler = engine_with(repo, agent_dir, path, retention(max_snapshots=10))
    engine.session_start("startup")
    scheduler.wait(timeout=30)
    assert is_ancestor(repo, live)
    ((_, report),) = scheduler.reports
    assert report.rewritten and report.plan.decisions[stale].reason == "unrecorded"


def test_repo_sessions_reads_every_session_of_the_repository(repo: Path, agent_dir: Path) -> None:
    live = snapshot_file(repo, "a.txt", "live\n")
    stale = snapshot_file(repo, "a.txt", "stale\n")
    set_store(repo, stale)
    ledger_session(agent_dir, repo, current=live)
    path = ledger_session(agent_dir, repo)
    report = run_sweep(
        GitRepo.discover(repo),
        path,
        agent_dir,
        scan_mode="repo-sessions",
        policy=Policy(),
    )
    assert report.rewritten and is_ancestor(repo, live)
    assert report.plan.decisions[stale].reason == "unrecorded", (
        "young unreferenced snapshots stay a day"
    )


def test_case_13_shutdown_waits_for_a_startup_sweep_in_flight(
    repo: Path, agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = snapshot_file(repo, "a.txt", "live\n")
    path = ledger_session(agent_dir, repo, current=live)
    release, entered = threading.Event(), threading.Event()
    real = scheduler_module.run_sweep

    def paused(*args: object, **kwargs: object):
        entered.set()
        release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(scheduler_module, "run_sweep", paused)
    engine, scheduler = engine_with(repo, agent_dir, path, retention(max_snapshots=10))
    engine.session_start("startup")
    assert entered.wait(10)
    done = threading.Event()
    threading.Thread(target=lambda: (engine.shutdown("quit"), done.set()), daemon=True).start()
    assert not done.wait(0.5), "shutdown must wait for the sweep in flight"
    release.set()
    assert done.wait(30)
    assert [reason for reason, _ in scheduler.reports] == ["startup"]


def test_case_14_a_rewrite_that_races_an_append_keeps_both(repo: Path, agent_dir: Path) -> None:
    gitrepo = GitRepo.discover(repo)
    live = snapshot_file(repo, "a.txt", "live\n")
    stale = snapshot_file(repo, "a.txt", "stale\n")
    set_store(repo, stale)
    store = Store(gitrepo)
    since = store.head()
    appended = snapshot_file(repo, "a.txt", "appended during the sweep\n")  # moves the head
    assert store.head() != since
    from ledger.git.store.chain import git_identity

    result = store.rewrite(
        [live], since=since, identity=git_identity(gitrepo), when_s=int(time.time()), offset_min=0
    )
    assert is_ancestor(repo, live) and is_ancestor(repo, appended)
    assert result.arrived == [appended] and not is_ancestor(repo, stale)


_APPENDER = """
import sys
from pathlib import Path
from ledger.git.repo import GitRepo
from ledger.git.store.snapshot import take_snapshot
repo = Path(sys.argv[1]); name = sys.argv[2]
for i in range(int(sys.argv[3])):
    (repo / f"{name}.txt").write_text(f"{name} {i}\\n")
    print(take_snapshot(GitRepo.discover(repo)).commit, flush=True)
"""


def test_rewrites_racing_processes_that_append_snapshots_lose_none(repo: Path) -> None:
    """Real processes append snapshots while this one keeps rewriting the store to the set it
    read at the start of each rewrite: without D7's retry, an append that lands between the read
    and the swap would vanish."""
    from ledger.git.store.chain import git_identity

    gitrepo = GitRepo.discover(repo)
    store = Store(gitrepo)
    snapshot_file(repo, "a.txt", "first\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, str(repo), f"w{n}", "15"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    identity, rewrites, arrived = git_identity(gitrepo), 0, 0
    while any(w.poll() is None for w in workers):
        since = store.head()
        result = store.rewrite(
            store.snapshots(), since=since, identity=identity, when_s=int(time.time()), offset_min=0
        )
        rewrites += 1
        arrived += len(result.arrived)
        # A breath between two rewrites: back to back, each one moves the head, and on a loaded
        # machine an appender (slower to read, build and swap) lost every one of its bounded
        # attempts to them (StoreUpdateError); a sweep never rewrites in a loop like this.
        time.sleep(0.005)
    outputs = [w.communicate()[0].split() for w in workers]
    assert all(w.returncode == 0 for w in workers)
    created = {sha for out in outputs for sha in out}
    assert len(created) >= 10 and rewrites > 30
    assert created <= set(store.snapshots()), (
        f"lost {len(created - set(store.snapshots()))} snapshots ({arrived} arrived)"
    )


def test_after_a_sweep_and_gc_every_live_snapshot_is_restorable(
    repo: Path, agent_dir: Path
) -> None:
    points = [snapshot_file(repo, "a.txt", f"version {i}\n") for i in range(4)]
    path = ledger_session(agent_dir, repo, current=points[3])
    for sha in points[1:3]:
        SessionAppender(path).append_custom(OP, build_op(bindings=[("e", sha)]).to_data())
    two_days_later = FixedClock(int(time.time() * 1000) + 2 * 86_400_000)
    report = run_sweep(
        GitRepo.discover(repo),
        path,
        agent_dir,
        scan_mode="ancestor-only",
        policy=Policy(max_snapshots=1),
        clock=two_days_later,
    )
    assert report.rewritten and report.plan.decisions[points[0]].reason == "dropped: unreferenced"
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "--prune=now", "--quiet")
    gitrepo = GitRepo.discover(repo)
    for sha in report.plan.live:
        assert gitrepo.commit_exists(sha)
        restore_commit(gitrepo, sha)
        assert (repo / "a.txt").read_text() == f"version {points.index(sha)}\n"
    assert not gitrepo.commit_exists(points[0]), "the dropped snapshot is gone after gc"


def test_a_scan_meets_other_repositories_unreadable_files_and_cycles(
    repo: Path, agent_dir: Path, tmp_path: Path
) -> None:
    live = snapshot_file(repo, "a.txt", "live\n")
    other = tmp_path / "other"
    other.mkdir()
    elsewhere = ledger_session(agent_dir, repo, current=live, cwd=other)
    sessions_dir = elsewhere.parent.parent
    (sessions_dir / "broken").mkdir()
    (sessions_dir / "broken" / "not-a-session.jsonl").write_text("garbage\n")
    (sessions_dir / "broken" / "dangling.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    first = ledger_session(agent_dir, repo, current=live)
    second = ledger_session(agent_dir, repo, parent=first)
    lines = first.read_text().splitlines()
    header = json.loads(lines[0])
    header["parentSession"] = str(second)  # first ⇄ second
    first.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    report = run_sweep(
        GitRepo.discover(repo), second, agent_dir, scan_mode="repo-sessions", policy=Policy()
    )
    reasons = {Path(f).name: r for f, r in report.skipped}
    assert reasons[elsewhere.name] == "not a session of this repository"
    assert (
        "not a Pi session file" in reasons["not-a-session.jsonl"]
        and "no such file" in reasons["dangling.jsonl"]
    )
    assert any("cycle" in w for w in report.warnings)
    assert report.plan.live == [live]


def test_a_startup_sweep_over_budget_changes_nothing(repo: Path, agent_dir: Path) -> None:
    stale = snapshot_file(repo, "a.txt", "stale\n")
    path = ledger_session(agent_dir, repo, current=snapshot_file(repo, "a.txt", "live\n"))
    set_store(repo, stale)
    engine, scheduler = engine_with(
        repo, agent_dir, path, retention(max_snapshots=10, startup_budget_ms=0)
    )
    engine.session_start("startup")
    scheduler.wait()
    assert store_head(repo) == stale
    assert scheduler.drain_notices() == [
        ("warning", "Rewind retention startup sweep skipped after exceeding 0ms budget")
    ]


def test_fifty_new_snapshots_trigger_a_sweep(repo: Path, agent_dir: Path) -> None:
    path = ledger_session(agent_dir, repo, current=snapshot_file(repo, "a.txt", "0\n"))
    engine, scheduler = engine_with(repo, agent_dir, path, retention(max_snapshots=10))
    scheduler.background = False
    engine.session_start("startup")
    for i in range(50):
        (repo / "a.txt").write_text(f"{i + 1}\n")
        engine.snapshot()
    assert [reason for reason, _ in scheduler.reports] == ["startup", "new-snapshots"]
    engine.shutdown("quit")
    assert [reason for reason, _ in scheduler.reports] == ["startup", "new-snapshots"], (
        "a sweep already ran"
    )
