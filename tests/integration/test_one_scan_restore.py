"""One scan per restore: the plan's capture stands for the restore's own when every path the
plan touches is still as the plan found it, and is taken again when one is not
(ledger/git/restore/recheck.py, docs/capture.md#one-scan-per-restore)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.git.capture.scan import Capturer
from ledger.git.repo import GitRepo
from ledger.git.restore.plan import plan_restore
from ledger.git.restore.recheck import stamp_plan, still_current
from ledger.git.restore.run import restore_commit
from ledger.git.store.snapshot import take_snapshot
from ledger.settings import SnapshotSettings
from tests.gitkit import write


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the full scans (``git status`` over the whole tree) the process makes."""
    count = [0]
    real = Capturer.full_capture

    def counted(self: Capturer) -> object:
        count[0] += 1
        return real(self)

    monkeypatch.setattr(Capturer, "full_capture", counted)
    yield count


def _point(repo: Path, files: dict[str, str]) -> tuple[GitRepo, str]:
    for name, text in files.items():
        write(repo, name, text)
    gitrepo = GitRepo.discover(repo)
    return gitrepo, take_snapshot(gitrepo, SnapshotSettings()).commit


def test_a_restore_given_its_plan_scans_the_work_tree_once(repo: Path, scans: list[int]) -> None:
    gitrepo, point = _point(repo, {"a.txt": "one\n", "b.txt": "two\n"})
    write(repo, "a.txt", "changed\n")
    os.remove(repo / "b.txt")
    write(repo, "c.txt", "new\n")
    scans[0] = 0
    plan = plan_restore(gitrepo, point)
    assert plan.scan is not None
    outcome = restore_commit(gitrepo, point, planned=plan)
    assert scans[0] == 1
    assert outcome.exact and outcome.changed
    assert (repo / "a.txt").read_text() == "one\n"
    assert (repo / "b.txt").read_text() == "two\n"
    assert not (repo / "c.txt").exists()
    undo = restore_commit(gitrepo, outcome.undo_commit or "")
    assert undo.exact
    assert (repo / "a.txt").read_text() == "changed\n" and (repo / "c.txt").read_text() == "new\n"


def test_without_a_plan_the_restore_scans_under_its_lock(repo: Path, scans: list[int]) -> None:
    gitrepo, point = _point(repo, {"a.txt": "one\n"})
    write(repo, "a.txt", "changed\n")
    scans[0] = 0
    plan = plan_restore(gitrepo, point)
    restore_commit(gitrepo, point)
    assert scans[0] == 2
    assert plan.modified == ("a.txt",)


@pytest.mark.parametrize("same_size", [False, True])
def test_a_file_written_between_plan_and_restore_is_captured_again_and_kept_for_undo(
    repo: Path, scans: list[int], same_size: bool
) -> None:
    gitrepo, point = _point(repo, {"a.txt": "one\n"})
    write(repo, "a.txt", "two\n")
    plan = plan_restore(gitrepo, point)
    assert plan.scan is not None and plan.modified == ("a.txt",)
    # The user writes the file again after the plan was shown: the restore must not trust the
    # plan's capture for it (the undo snapshot would lose these bytes).
    write(repo, "a.txt", "six\n" if same_size else "the user's latest words\n")
    latest = (repo / "a.txt").read_bytes()
    scans[0] = 0
    outcome = restore_commit(gitrepo, point, planned=plan)
    assert scans[0] == 1, "the restore should have captured again under its lock"
    assert (repo / "a.txt").read_text() == "one\n"
    restore_commit(gitrepo, outcome.undo_commit or "")
    assert (repo / "a.txt").read_bytes() == latest


def test_a_file_created_where_the_plan_adds_one_is_captured_again(
    repo: Path, scans: list[int]
) -> None:
    gitrepo, point = _point(repo, {"a.txt": "one\n", "b.txt": "two\n"})
    os.remove(repo / "b.txt")
    plan = plan_restore(gitrepo, point)
    assert plan.added == ("b.txt",)
    write(repo, "b.txt", "the user's own b\n")
    scans[0] = 0
    outcome = restore_commit(gitrepo, point, planned=plan)
    assert scans[0] == 1
    assert (repo / "b.txt").read_text() == "two\n"
    restore_commit(gitrepo, outcome.undo_commit or "")
    assert (repo / "b.txt").read_text() == "the user's own b\n"


def test_a_file_the_plan_deletes_that_is_gone_already_is_captured_again(
    repo: Path, scans: list[int]
) -> None:
    gitrepo, point = _point(repo, {"a.txt": "one\n"})
    write(repo, "extra.txt", "made later\n")
    plan = plan_restore(gitrepo, point)
    assert plan.deleted == ("extra.txt",)
    os.remove(repo / "extra.txt")
    scans[0] = 0
    outcome = restore_commit(gitrepo, point, planned=plan)
    assert scans[0] == 1
    assert not outcome.changed and outcome.exact


def test_a_change_elsewhere_does_not_cost_a_scan_and_is_left_alone(
    repo: Path, scans: list[int]
) -> None:
    gitrepo, point = _point(repo, {"a.txt": "one\n", "other.txt": "x\n"})
    write(repo, "a.txt", "two\n")
    plan = plan_restore(gitrepo, point)
    write(repo, "other.txt", "edited while the plan was shown\n")
    scans[0] = 0
    restore_commit(gitrepo, point, planned=plan)
    assert scans[0] == 0
    assert (repo / "a.txt").read_text() == "one\n"
    assert (repo / "other.txt").read_text() == "edited while the plan was shown\n"


def test_a_plan_for_another_target_or_other_settings_is_not_reused(
    repo: Path, scans: list[int]
) -> None:
    gitrepo, first = _point(repo, {"a.txt": "one\n"})
    _, second = _point(repo, {"a.txt": "two\n"})
    write(repo, "a.txt", "three\n")
    plan = plan_restore(gitrepo, first)
    scans[0] = 0
    restore_commit(gitrepo, second, planned=plan)
    assert scans[0] == 1 and (repo / "a.txt").read_text() == "two\n"
    write(repo, "a.txt", "four\n")
    plan = plan_restore(gitrepo, first)
    scans[0] = 0
    other = SnapshotSettings(protected_dirs=("vendor",))
    restore_commit(gitrepo, first, other, planned=plan)
    assert scans[0] == 1 and (repo / "a.txt").read_text() == "one\n"


def test_a_suspect_path_is_hashed_and_refused_when_its_content_moved_on(repo: Path) -> None:
    """A write between the capture reading a file and the plan's lstat would leave a stamp that
    matches later: the file's ctime (after the scan began) makes it a suspect, and its content
    is compared with what the capture recorded."""
    gitrepo, point = _point(repo, {"a.txt": "one\n"})
    write(repo, "a.txt", "two\n")
    started = time.time_ns() - 10_000_000_000  # a scan long ago: every touched path is suspect
    from ledger.git.capture.scan import capture_tree
    from ledger.git.restore.plan import build_plan, resolve_commit

    captured = capture_tree(gitrepo)
    plan = build_plan(gitrepo, resolve_commit(gitrepo, point), captured)
    settings = SnapshotSettings()
    kept = stamp_plan(gitrepo, plan, captured, settings, started)
    assert kept is not None and still_current(gitrepo, kept)
    write(repo, "a.txt", "moved on after the capture\n")  # as if between its read and the stamp
    assert stamp_plan(gitrepo, plan, captured, settings, started) is None
