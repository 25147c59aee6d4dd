"""The engine's sweep scheduler on its own: when it sweeps, when it does not, and that it never
raises into the agent (docs/design.md#when-sweeps-run)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from ledger.clock import FixedClock
from ledger.git.repo import GitRepo
from ledger.record_models import build_op
from ledger.records import OP
from ledger.retention import scheduler as scheduler_module
from ledger.retention.scheduler import SWEEP_EVERY, SweepScheduler
from ledger.session.store import SessionAppender
from ledger.settings import Settings
from tests.snapshotkit import is_ancestor, retention, set_store, store_head
from tests.snapshotkit import ledger_session as session
from tests.snapshotkit import snapshot_file as snapshot


def scheduler_for(repo: Path, settings: Settings, source, **options: object) -> SweepScheduler:
    return SweepScheduler(
        GitRepo.discover(repo), repo.parent / "agent", settings, source, **options
    )


def test_with_retention_off_every_hook_is_a_no_op(repo: Path) -> None:
    stale = snapshot(repo, "a.txt", "stale\n")
    set_store(repo, stale)
    calls: list[int] = []
    scheduler = scheduler_for(repo, Settings(retention=None), lambda: calls.append(1))
    scheduler.on_session_start()
    scheduler.on_snapshot_added(10 * SWEEP_EVERY)
    scheduler.on_shutdown()
    assert not scheduler.running and scheduler.reports == [] and scheduler.drain_notices() == []
    assert calls == [], "the session is not even read"
    assert store_head(repo) == stale


def test_a_sweep_starts_after_fifty_new_snapshots_not_before(repo: Path, agent_dir: Path) -> None:
    path = session(agent_dir, repo, current=snapshot(repo, "a.txt", "live\n"))
    scheduler = scheduler_for(repo, retention(max_snapshots=10), lambda: path)
    scheduler.on_snapshot_added(SWEEP_EVERY - 1)
    scheduler.wait()
    assert scheduler.reports == []
    scheduler.on_snapshot_added(1)
    scheduler.wait(timeout=30)
    assert [reason for reason, _ in scheduler.reports] == ["new-snapshots"]
    assert scheduler.new_snapshots == 0 and scheduler.completed


def test_shutdown_skips_when_a_sweep_completed_with_few_new_snapshots(
    repo: Path, agent_dir: Path
) -> None:
    path = session(agent_dir, repo, current=snapshot(repo, "a.txt", "live\n"))
    scheduler = scheduler_for(repo, retention(max_snapshots=10), lambda: path)
    scheduler.on_session_start()
    scheduler.on_snapshot_added(SWEEP_EVERY - 1)
    scheduler.on_shutdown()
    assert [reason for reason, _ in scheduler.reports] == ["startup"]


def test_shutdown_sweeps_again_after_an_empty_live_set(repo: Path, agent_dir: Path) -> None:
    stale = snapshot(repo, "a.txt", "stale\n")
    set_store(repo, stale)
    path = session(agent_dir, repo)
    scheduler = scheduler_for(repo, retention(max_snapshots=10), lambda: path)
    scheduler.on_session_start()
    scheduler.wait()
    assert scheduler.reports[0][1].preserved and not scheduler.completed, "counters unchanged"
    live = snapshot(repo, "a.txt", "live\n")
    SessionAppender(path).append_custom(OP, build_op(current=live).to_data())
    scheduler.on_shutdown()
    assert [reason for reason, _ in scheduler.reports] == ["startup", "shutdown"]
    assert is_ancestor(repo, live)


def test_shutdown_sweeps_without_budget_after_a_startup_sweep_ran_out_of_it(
    repo: Path, agent_dir: Path
) -> None:
    stale = snapshot(repo, "a.txt", "stale\n")
    live = snapshot(repo, "a.txt", "live\n")
    set_store(repo, stale)
    path = session(agent_dir, repo, current=live)
    scheduler = scheduler_for(repo, retention(max_snapshots=10, startup_budget_ms=0), lambda: path)
    scheduler.on_session_start()
    scheduler.wait()
    assert store_head(repo) == stale and "exceeding 0ms budget" in scheduler.drain_notices()[0][1]
    scheduler.on_shutdown()
    assert [reason for reason, _ in scheduler.reports] == ["shutdown"]
    assert is_ancestor(repo, live)


def test_shutdown_waits_for_the_sweep_in_flight(
    repo: Path, agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = session(agent_dir, repo, current=snapshot(repo, "a.txt", "live\n"))
    release = threading.Event()
    real = scheduler_module.run_sweep

    def slow(*args: object, **kwargs: object):
        release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(scheduler_module, "run_sweep", slow)
    scheduler = scheduler_for(repo, retention(), lambda: path)
    scheduler.on_session_start()
    assert scheduler.running
    started = time.monotonic()  # before the timer starts: its 0.3 s are all after this
    threading.Timer(0.3, release.set).start()
    scheduler.on_shutdown()
    assert time.monotonic() - started >= 0.25 and not scheduler.running
    assert [reason for reason, _ in scheduler.reports] == ["startup"]


def test_failures_become_notices_never_exceptions(
    repo: Path, agent_dir: Path, tmp_path: Path
) -> None:
    def broken_source() -> None:
        raise OSError("session file vanished")

    scheduler = scheduler_for(repo, retention(), broken_source, background=False)
    scheduler.on_session_start()
    assert scheduler.drain_notices() == [
        ("warning", "Rewind retention could not read the session: session file vanished")
    ]
    shutil.rmtree(repo)
    scheduler.on_snapshot_added(SWEEP_EVERY)
    scheduler.on_shutdown()
    notices = scheduler.drain_notices()
    assert notices and all(level == "warning" for level, _ in notices)
    assert any(text.startswith("Rewind retention sweep failed") for _, text in notices)


def test_the_plan_ages_references_with_the_schedulers_clock(repo: Path, agent_dir: Path) -> None:
    points = [snapshot(repo, "a.txt", f"{i}\n") for i in range(3)]
    path = session(agent_dir, repo, current=points[-1])
    for sha in points[:2]:
        SessionAppender(path).append_custom(OP, build_op(bindings=[("e", sha)]).to_data())
    ten_days_later = FixedClock(int(time.time() * 1000) + 10 * 86_400_000)
    scheduler = scheduler_for(
        repo, retention(max_age_days=1), lambda: path, background=False, clock=ten_days_later
    )
    scheduler.on_session_start()
    ((_, report),) = scheduler.reports
    assert report.plan.live == [points[-1]], "only the pinned current survives ten days"
    assert {report.plan.decisions[sha].reason for sha in points[:2]} == {"dropped: too old"}


def test_after_the_session_nothing_is_swept_until_the_owed_shutdown_sweep_is_run(
    repo: Path, agent_dir: Path
) -> None:
    """A pi -p session's scheduler (``after_session``): no startup sweep, and its shutdown only
    leaves the sweep owed, read from the session then; running it later sweeps once."""
    stale = snapshot(repo, "a.txt", "stale\n")
    path = session(agent_dir, repo, current=snapshot(repo, "a.txt", "live\n"))
    read: list[int] = []

    def source() -> Path:
        read.append(1)
        return path

    two_days_later = FixedClock(int(time.time() * 1000) + 2 * 86_400_000)
    scheduler = scheduler_for(repo, retention(), source, after_session=True, clock=two_days_later)
    head = store_head(repo)
    assert is_ancestor(repo, stale)
    scheduler.on_session_start()
    assert not scheduler.running and read == []
    scheduler.on_shutdown()
    assert scheduler.reports == [] and store_head(repo) == head, "nothing swept at shutdown"
    assert scheduler.owed == path and read == [1], "the session is read at shutdown"
    scheduler.finish_owed()
    assert [reason for reason, _ in scheduler.reports] == ["shutdown"]
    assert not is_ancestor(repo, stale)
    scheduler.finish_owed()
    assert len(scheduler.reports) == 1 and scheduler.owed is False, "run once"


def test_after_the_session_a_completed_fifty_snapshot_sweep_leaves_nothing_owed(
    repo: Path, agent_dir: Path
) -> None:
    path = session(agent_dir, repo, current=snapshot(repo, "a.txt", "live\n"))
    scheduler = scheduler_for(repo, retention(max_snapshots=10), lambda: path, after_session=True)
    scheduler.on_snapshot_added(SWEEP_EVERY)
    scheduler.on_shutdown()  # waits for the 50-snapshot sweep in flight
    assert [reason for reason, _ in scheduler.reports] == ["new-snapshots"]
    assert scheduler.owed is False


def test_after_the_session_a_shutdown_sweep_nobody_would_run_later_runs_at_once(
    repo: Path, agent_dir: Path
) -> None:
    """``defer`` is asked with the session read at shutdown; when it says no, the sweep runs in
    the shutdown call, as without ``after_session`` (and still no startup sweep ran)."""
    stale = snapshot(repo, "a.txt", "stale\n")
    path = session(agent_dir, repo, current=snapshot(repo, "a.txt", "live\n"))
    asked: list[object] = []

    def defer(start: object) -> bool:
        asked.append(start)
        return False

    two_days_later = FixedClock(int(time.time() * 1000) + 2 * 86_400_000)
    scheduler = scheduler_for(
        repo, retention(), lambda: path, after_session=True, defer=defer, clock=two_days_later
    )
    scheduler.on_session_start()
    assert not scheduler.running and scheduler.reports == []
    scheduler.on_shutdown()
    assert asked == [path]
    assert [reason for reason, _ in scheduler.reports] == ["shutdown"]
    assert scheduler.owed is False and not is_ancestor(repo, stale)


def test_after_the_session_a_failing_defer_means_sweep_now(repo: Path, agent_dir: Path) -> None:
    path = session(agent_dir, repo, current=snapshot(repo, "a.txt", "live\n"))

    def defer(_start: object) -> bool:
        raise OSError("the session file went away")

    scheduler = scheduler_for(repo, retention(), lambda: path, after_session=True, defer=defer)
    scheduler.on_shutdown()  # never raises into the agent
    assert [reason for reason, _ in scheduler.reports] == ["shutdown"] and scheduler.owed is False
