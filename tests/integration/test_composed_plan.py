"""The agent tool's composed restore target is planned from the first plan's own capture
(:func:`ledger.git.restore.compose.plan_from_scan`): it touches only the files taken back, and
the restore's re-check under its lock still sees every change made to them since that capture,
while a left-alone file edited meanwhile stays as the user left it."""

from __future__ import annotations

from pathlib import Path

from ledger.git.repo import GitRepo
from ledger.git.restore.compose import keep_as_now, plan_from_scan
from ledger.git.restore.plan import RestorePlan
from ledger.git.restore.run import plan_restore, restore_commit
from ledger.git.store.snapshot import commit_snapshot, take_snapshot
from ledger.settings import SnapshotSettings


def _setup(repo: Path) -> tuple[GitRepo, str]:
    """A point where the agent's ``app.py`` was v1 and the user's ``notes.md`` absent; now
    the agent has changed ``app.py`` and the user wrote ``notes.md``."""
    (repo / "app.py").write_text("v1\n")
    r = GitRepo.discover(str(repo))
    point = take_snapshot(r, last_exact=None).commit
    (repo / "app.py").write_text("v2 broken\n")
    (repo / "notes.md").write_text("the user's notes\n")
    return r, point


def _composed_plan(r: GitRepo, point: str) -> tuple[str, RestorePlan]:
    first = plan_restore(r, point, SnapshotSettings())
    assert first.scan is not None
    assert sorted([*first.modified, *first.deleted]) == ["app.py", "notes.md"]
    kept = [(c.path, c.old) for c in first.changes if c.path == "notes.md"]
    tree = keep_as_now(r, first.target_tree, kept)
    target = commit_snapshot(r, tree, last_exact=None).commit
    plan = plan_from_scan(r, first, target)
    assert plan is not None
    return target, plan


def test_the_composed_plan_touches_only_the_files_taken_back(repo: Path) -> None:
    r, point = _setup(repo)
    target, plan = _composed_plan(r, point)
    assert plan.modified == ("app.py",) and not plan.added and not plan.deleted
    assert plan.scan is not None and set(plan.scan.stamps) == {"app.py"}
    (repo / "notes.md").write_text("the user kept typing\n")  # after the plan: not touched
    outcome = restore_commit(r, target, SnapshotSettings(), planned=plan)
    assert outcome.changed
    assert (repo / "app.py").read_text() == "v1\n"
    assert (repo / "notes.md").read_text() == "the user kept typing\n"


def test_a_file_taken_back_that_changed_since_the_capture_is_not_trusted(repo: Path) -> None:
    r, point = _setup(repo)
    target, plan = _composed_plan(r, point)
    (repo / "app.py").write_text("v3, written after the plan\n")
    outcome = restore_commit(r, target, SnapshotSettings(), planned=plan)
    # The plan's stamp no longer matches: the restore captured again, so its undo snapshot
    # holds the bytes written after the plan (nothing of them is lost).
    assert (repo / "app.py").read_text() == "v1\n"
    assert outcome.undo_commit is not None
    undo = r.pygit2.revparse_single(f"{outcome.undo_commit}:app.py")
    assert undo.read_raw() == b"v3, written after the plan\n"


def test_a_plan_without_a_scan_gives_no_composed_plan(repo: Path) -> None:
    r, point = _setup(repo)
    first = plan_restore(r, point, SnapshotSettings())
    assert plan_from_scan(r, first.with_scan(None), point) is None
