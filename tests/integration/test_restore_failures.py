"""A restore that fails part-way rolls back to the undo snapshot (D13): failures injected with
the ``fault`` hook at every step, a failing rollback, concurrent changes, and the lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.errors import InterruptedRestoreError, RestoreFailedError
from ledger.git.capture.index import PrivateIndex
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import open_journals
from ledger.git.restore.run import STEPS, restore_commit
from ledger.git.store.chain import STORE_REF
from tests.gitkit import ROOT, files, fresh_tree, git, write
from tests.snapshotkit import restore, snapshot


class Injected(Exception):
    pass


def fail_at(*steps: str):
    calls: list[str] = []

    def hook(step: str) -> None:
        calls.append(step)
        if step in steps:
            raise Injected(f"injected at {step}")

    hook.calls = calls  # type: ignore[attr-defined]
    return hook


def _diverge(repo: Path) -> None:
    """Make the work tree differ from the rich point in every way a restore handles."""
    write(repo, "mod.txt", "modified\n")
    (repo / "gone.txt").unlink()
    for i in range(3):
        write(repo, f"created/{i}.txt", f"{i}\n")
    (repo / "type").unlink()
    write(repo, "type/child.txt", "a directory now\n")
    (repo / "exec.sh").chmod(0o644)
    (repo / "link").unlink()
    os.symlink("mod.txt", repo / "link")


@pytest.fixture
def rich(repo: Path) -> tuple[Path, str]:
    write(repo, "mod.txt", "original\n")
    write(repo, "gone.txt", "deleted later\n")
    write(repo, "type", "a file at the point\n")
    write(repo, "exec.sh", "#!/bin/sh\n", mode=0o755)
    write(repo, "keep/deep/file.txt", "kept\n")
    os.symlink("keep", repo / "link")
    return repo, snapshot(repo)


@pytest.mark.parametrize("verify", ["paths", "capture"])
@pytest.mark.parametrize("step", STEPS)
def test_a_failure_at_any_step_leaves_the_work_tree_exactly_as_before(
    rich: tuple[Path, str], step: str, verify: str
) -> None:
    repo, point = rich
    _diverge(repo)
    before = files(repo)
    before_tree = fresh_tree(repo)

    with pytest.raises(RestoreFailedError, match=f"injected at {step}") as info:
        restore(repo, point, fault=fail_at(step), verify=verify)

    assert files(repo) == before
    undo = info.value.rolled_back_to
    assert undo is not None
    assert git(repo, "rev-parse", f"{undo}^{{tree}}").strip() == before_tree
    assert git(repo, "merge-base", "--is-ancestor", undo, STORE_REF) == ""


def test_the_fault_hook_sees_every_step_in_order(rich: tuple[Path, str]) -> None:
    repo, point = rich
    _diverge(repo)
    hook = fail_at()

    restore(repo, point, fault=hook)

    assert hook.calls == list(STEPS)  # type: ignore[attr-defined]


def test_a_failing_rollback_leaves_the_journal_open_and_recovery_brings_every_byte_back(
    rich: tuple[Path, str],
) -> None:
    repo, point = rich
    _diverge(repo)
    before = files(repo)

    with pytest.raises(RestoreFailedError, match="the rollback failed too") as info:
        restore(repo, point, fault=fail_at("after-write", "rollback:after-delete"))

    assert info.value.rolled_back_to is None
    assert "rewind undo" in (info.value.hint or "")
    journals, _ = open_journals(GitRepo.discover(repo))
    assert [j.state for j in journals] == ["writing"]
    with pytest.raises(InterruptedRestoreError):  # no second restore on top of a mixed tree
        restore(repo, point)
    restore_commit(GitRepo.discover(repo), journals[0].undo, recovering=journals[0])
    assert files(repo) == before
    assert open_journals(GitRepo.discover(repo)) == ([], [])


def test_a_keyboard_interrupt_rolls_back_and_propagates(rich: tuple[Path, str]) -> None:
    repo, point = rich
    _diverge(repo)
    before = files(repo)

    def interrupt(step: str) -> None:
        if step == "after-write":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        restore(repo, point, fault=interrupt)

    assert files(repo) == before


def test_the_capture_index_stays_locked_for_the_whole_restore(rich: tuple[Path, str]) -> None:
    repo, point = rich
    _diverge(repo)
    seen: list[str] = []

    probe = (
        "import sys\nfrom pathlib import Path\nfrom ledger.errors import GitError\n"
        "from ledger.git.capture.index import PrivateIndex\ntry:\n"
        "    with PrivateIndex(Path(sys.argv[1])).locked(timeout_s=0.05): print('acquired')\n"
        "except GitError as exc: print(exc.message)\n"
    )

    def try_lock(step: str) -> None:
        # Another process must be kept out for the whole restore (this one may re-enter).
        other = subprocess.run(
            [sys.executable, "-c", probe, str(repo / ".git")],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        assert "locked by another process" in other.stdout, (step, other.stdout, other.stderr)
        seen.append(step)

    restore(repo, point, fault=try_lock)
    assert seen == list(STEPS)
    with PrivateIndex(repo / ".git").locked(timeout_s=1):
        pass  # released afterwards


def test_a_directory_appearing_where_a_file_goes_stops_the_restore_and_survives(repo: Path) -> None:
    write(repo, "restored.txt", "at the point\n")
    point = snapshot(repo)
    (repo / "restored.txt").unlink()
    write(repo, "created.txt", "after the point\n")
    before = files(repo)

    def agent_writes(step: str) -> None:
        if step == "after-delete":
            write(repo, "restored.txt/agent.txt", "written concurrently\n")

    with pytest.raises(RestoreFailedError, match="restored.txt") as info:
        restore(repo, point, fault=agent_writes)

    assert info.value.rolled_back_to is not None
    assert (repo / "restored.txt/agent.txt").read_text() == "written concurrently\n"
    after = files(repo)
    assert {k: v for k, v in after.items() if not k.startswith("restored.txt")} == before


@pytest.mark.parametrize("verify", ["paths", "capture"])
def test_a_concurrent_edit_of_a_restored_file_fails_verification(repo: Path, verify: str) -> None:
    write(repo, "a.txt", "point\n")
    write(repo, "b.sh", "#!/bin/sh\n", mode=0o755)
    point = snapshot(repo)
    write(repo, "a.txt", "latest\n")
    (repo / "b.sh").chmod(0o644)
    before = files(repo)

    def agent_writes(step: str) -> None:
        if step == "after-write":
            write(repo, "a.txt", "point, edited concurrently\n")

    with pytest.raises(RestoreFailedError, match="does not match the snapshot.*a.txt") as info:
        restore(repo, point, fault=agent_writes, verify=verify)

    assert info.value.rolled_back_to is not None
    assert files(repo) == before


def test_capture_verification_sees_a_concurrent_edit_elsewhere_and_leaves_it(repo: Path) -> None:
    write(repo, "a.txt", "point\n")
    write(repo, "other.txt", "untouched by the restore\n")
    point = snapshot(repo)
    write(repo, "a.txt", "latest\n")

    def agent_writes(step: str) -> None:
        if step == "after-write":
            write(repo, "other.txt", "edited concurrently\n")

    with pytest.raises(RestoreFailedError, match="does not match the snapshot.*other.txt"):
        restore(repo, point, fault=agent_writes, verify="capture")

    assert (repo / "a.txt").read_text() == "latest\n"
    assert (repo / "other.txt").read_text() == "edited concurrently\n"


def test_a_failure_after_a_submodule_checkout_puts_its_head_back(
    superproject: tuple[Path, dict[str, str]],
) -> None:
    sup, points = superproject
    head = git(sup / "nested", "rev-parse", "HEAD").strip()

    with pytest.raises(RestoreFailedError):
        restore(sup, points["first"], fault=fail_at("after-submodules"))

    assert git(sup / "nested", "rev-parse", "HEAD").strip() == head
    assert git(sup / "nested", "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert (sup / "nested/file.txt").read_text() == "submodule v2\n"
