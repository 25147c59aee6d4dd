"""``rewind sweep``, ``rewind config`` and ``rewind doctor`` on a real repository and sessions."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ledger.clock import FixedClock
from ledger.demo import DemoWorld, build_world, run_prompts
from ledger.git.repo import GitRepo
from ledger.git.store.chain import Store
from ledger.record_models import build_op
from ledger.records import OP
from ledger.retention.plan import Policy
from ledger.retention.sweep import run_sweep
from ledger.session.store import SessionAppender
from tests.cli.helpers import run_cli
from tests.gitkit import git, init_repo


@pytest.fixture
def world(tmp_path: Path) -> DemoWorld:
    return run_prompts(build_world(tmp_path / "demo"))


def cli(capsys: pytest.CaptureFixture[str], world: DemoWorld, *args: str):
    return run_cli(capsys, "--agent-dir", world.agent_dir, *args, cwd=world.repo)


def test_sweep_dry_run_prints_the_plan_and_changes_nothing(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    head = git(world.repo, "rev-parse", "refs/pi-rewind/store")
    result = cli(capsys, world, "sweep", "--dry-run", "--max-snapshots", "0", "--json")
    assert result.code == 0, result.err
    report = result.json_lines()[0]
    assert report["dryRun"] and report["ledgers"] == 1 and report["dropped"] >= 3
    assert report["preserved"], (
        "nothing pinned and nothing recent: an empty live set leaves the store alone"
    )
    assert git(world.repo, "rev-parse", "refs/pi-rewind/store") == head


def test_sweep_keeps_every_point_without_limits(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    before = set(Store(GitRepo.discover(world.repo)).snapshots())
    result = cli(capsys, world, "sweep")
    assert result.code == 0, result.err
    assert "kept" in result.out and "pinned" in result.out
    assert set(Store(GitRepo.discover(world.repo)).snapshots()) == before


def test_sweep_rejects_a_negative_limit_as_usage(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    result = cli(capsys, world, "sweep", "--max-snapshots", "-1")
    assert result.code == 2 and "error:" in result.err


def test_config_shows_each_value_and_its_source(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    (world.agent_dir / "settings.json").write_text(
        json.dumps({"rewind": {"retention": {"maxSnapshots": 7}}})
    )
    result = cli(capsys, world, "config", "--json")
    assert result.code == 0, result.err
    settings = result.json_lines()[0]["settings"]
    assert settings["rewind.retention.maxSnapshots"] == {
        "value": 7,
        "source": str(world.agent_dir / "settings.json"),
    }
    assert settings["rewind.retention.scanMode"]["source"] == "default"
    text = cli(capsys, world, "config").out
    assert "rewind.retention.maxSnapshots" in text and "files read" in text


def test_doctor_is_happy_with_a_healthy_store(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    result = cli(capsys, world, "doctor", "--json")
    assert result.code == 0, result.err
    report = result.json_lines()[0]
    assert report["ok"] and report["store"]["snapshots"] >= 3 and report["sessions"] == 1
    assert report["privateIndex"] == "ok" and report["store"]["bytes"] > 0


def test_doctor_fails_when_referenced_snapshots_are_not_kept(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    first = Store(GitRepo.discover(world.repo)).snapshots()[0]
    git(world.repo, "update-ref", "refs/pi-rewind/store", first)
    result = cli(capsys, world, "doctor")
    assert result.code == 1
    assert "not kept by the store" in result.err and "hint: keep them: rewind sweep" in result.err
    assert "unreachable" in result.out
    fixed = cli(capsys, world, "sweep", "--scan", "repo-sessions")
    assert fixed.code == 0, fixed.err
    assert cli(capsys, world, "doctor").code == 0


def test_doctor_reports_a_broken_chain(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = git(world.repo, "write-tree").strip()
    bogus = git(world.repo, "commit-tree", tree, "-m", "pi rewind store").strip()
    git(world.repo, "update-ref", "refs/pi-rewind/store", bogus)
    result = cli(capsys, world, "doctor", "--json")
    assert result.code == 1
    assert any("tree is not empty" in p for p in result.json_lines()[0]["problems"])


def test_doctor_accepts_what_a_sweep_dropped(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, world, "sweep", "--max-snapshots", "1").code == 0
    result = cli(capsys, world, "doctor")
    assert result.code == 0, result.err
    assert "dropped" in result.out and "await git gc" in result.out


def test_doctor_flags_a_point_recorded_after_the_last_rewrite_that_the_store_lost(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    swept = run_sweep(
        GitRepo.discover(world.repo),
        world.session,
        world.agent_dir,
        scan_mode="ancestor-only",
        policy=Policy(max_snapshots=2),
    )
    assert swept.rewritten
    (world.repo / "late.txt").write_text("recorded after the rewrite, never appended\n")
    tree = git(world.repo, "write-tree").strip()  # the user's index: the file is not in it, fine
    lost = git(world.repo, "commit-tree", tree, "-m", "pi rewind snapshot").strip()
    a_minute_later = FixedClock(
        int(time.time() * 1000) + 60_000
    )  # surely after the rewrite's second
    SessionAppender(world.session, clock=a_minute_later).append_custom(
        OP, build_op(current=lost).to_data()
    )
    result = cli(capsys, world, "doctor", "--json")
    assert result.code == 1
    report = result.json_lines()[0]
    states = {(r["snapshot"], r["state"]) for r in report["references"]}
    assert (lost, "unreachable") in states and all(
        state == "dropped" for sha, state in states if sha != lost
    )
    assert "hint: keep them: rewind sweep --scan repo-sessions" in result.err


def test_sweep_counts_the_objects_gc_may_reclaim(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    dry = cli(capsys, world, "sweep", "--dry-run", "--max-snapshots", "1", "--json").json_lines()[0]
    real = cli(capsys, world, "sweep", "--max-snapshots", "1", "--json").json_lines()[0]
    assert real["rewritten"] and real["dropped"] == dry["dropped"] > 0
    assert real["unreachableObjects"] == dry["unreachableObjects"] > real["dropped"], (
        "keepalives, trees, blobs too"
    )
    text = cli(
        capsys, world, "sweep"
    ).out  # no limit: the dropped ones come back, the one old keepalive goes
    assert "kept 4 snapshots" in text and "1 object (about" in text
    assert "is now unreachable" in text


def test_sweep_in_a_repository_without_sessions_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = init_repo(tmp_path / "fresh")
    result = run_cli(capsys, "--agent-dir", tmp_path / "agent", "sweep", cwd=repo)
    assert result.code == 0, result.err
    assert "no session of this repository" in result.out
    assert git(repo, "for-each-ref").strip() == ""
