"""A bounded restore (the agent tool's, docs/pi.md#the-agents-rewind-tool) writes only what its
plan sorted: when the work tree changed between the plan and the restore's lock (the user at
work), the capture under the lock refuses it with nothing written, where an ordinary restore
would write the new plan (its undo snapshot keeping what it overwrote)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.errors import PlanOutgrownError
from ledger.git.repo import GitRepo
from ledger.git.restore.plan import plan_restore
from ledger.git.restore.run import restore_commit
from tests.gitkit import write
from tests.snapshotkit import NO_PROTECTION, snapshot


def _point(repo: Path) -> str:
    write(repo, "agent.py", "at the point\n")
    write(repo, "other.md", "old notes\n")
    point = snapshot(repo)
    write(repo, "agent.py", "the agent's attempt\n")
    return point


def test_a_bounded_restore_refuses_when_a_planned_file_changed_after_its_plan(repo: Path) -> None:
    point = _point(repo)
    git_repo = GitRepo.discover(repo)
    plan = plan_restore(git_repo, point, NO_PROTECTION)
    assert plan.modified == ("agent.py",)
    write(repo, "agent.py", "the user edits the planned file\n")
    with pytest.raises(PlanOutgrownError) as refused:
        restore_commit(git_repo, point, NO_PROTECTION, planned=plan.as_bounded())
    assert refused.value.paths == ["agent.py"]
    assert (repo / "agent.py").read_text() == "the user edits the planned file\n"


def test_an_ordinary_restore_writes_over_a_planned_file_changed_after_its_plan(
    repo: Path,
) -> None:
    point = _point(repo)
    git_repo = GitRepo.discover(repo)
    plan = plan_restore(git_repo, point, NO_PROTECTION)
    write(repo, "agent.py", "the user edits the planned file\n")
    outcome = restore_commit(git_repo, point, NO_PROTECTION, planned=plan)
    assert outcome.changed and (repo / "agent.py").read_text() == "at the point\n"


def test_a_bounded_restore_writes_only_its_planned_files(repo: Path) -> None:
    point = _point(repo)
    git_repo = GitRepo.discover(repo)
    plan = plan_restore(git_repo, point, NO_PROTECTION)
    write(repo, "other.md", "the user's new notes\n")  # not in the plan: left as it is
    outcome = restore_commit(git_repo, point, NO_PROTECTION, planned=plan.as_bounded())
    assert outcome.changed and (repo / "agent.py").read_text() == "at the point\n"
    assert (repo / "other.md").read_text() == "the user's new notes\n"
