"""A restore killed with ``kill -9`` (the whole process group) at any moment, or out of disk space,
never loses a byte: ``rewind doctor`` reports the interruption, ``rewind undo`` brings back the
exact pre-restore state, also after a sweep two days later and ``git gc --prune=now``
(docs/design.md#crash-safe-restore)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ledger.clock import FixedClock
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import open_journals
from ledger.retention.plan import Policy
from ledger.retention.sweep import run_sweep
from tests.campaignkit import fault_campaign
from tests.gitkit import git


@pytest.mark.slow
@pytest.mark.parametrize(("files", "file_bytes"), [(1500, 64), (60, 400_000)])
def test_a_restore_killed_at_any_moment_is_reported_and_undone_exactly(
    tmp_path: Path, files: int, file_bytes: int
) -> None:
    outcomes = fault_campaign.campaign(
        tmp_path, files=files, file_bytes=file_bytes, runs=5, echo=False
    )
    assert all(o.exact for o in outcomes), [o.detail for o in outcomes if not o.exact]
    interrupted = [o for o in outcomes if o.interrupted]
    assert interrupted, "no kill landed inside the restore: the campaign tested nothing"
    assert all(o.doctor_code == 1 for o in interrupted)


def _killed_at(world: object, step: str, *args: str) -> None:
    """Run ``rewind ARGS`` in a process that SIGKILLs itself when the restore reaches ``step``."""
    code = (
        "import os, signal, sys\n"
        "from ledger.cli import main\n"
        "from ledger.git.restore.apply import Steps\n"
        "original = Steps.reach\n"
        "def reach(self, step):\n"
        f"    if step == {step!r}:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return original(self, step)\n"
        "Steps.reach = reach\n"
        f"sys.exit(main({list(args)!r}))\n"
    )
    result = subprocess.run(
        [fault_campaign.sys.executable, "-c", code],
        cwd=world.repo,
        capture_output=True,
        text=True,
        env={**fault_campaign._env(), "PI_CODING_AGENT_DIR": str(world.agent_dir)},
    )
    assert result.returncode == -9, result.stderr


def test_a_recovery_killed_mid_write_is_recovered_to_the_state_before_the_first_restore(
    tmp_path: Path,
) -> None:
    world = _interrupted_world(tmp_path)
    _killed_at(world, "after-write", "undo", str(world.session), "--yes")  # the recovery dies too
    assert len(open_journals(GitRepo.discover(world.repo))[0]) == 2

    undo = fault_campaign.rewind(world, "undo", str(world.session), "--yes")
    assert undo.returncode == 0, undo.stderr
    assert fault_campaign.snapshot_files(world.repo) == world.before
    assert open_journals(GitRepo.discover(world.repo)) == ([], [])
    assert fault_campaign.rewind(world, "doctor").returncode == 0


def _interrupted_world(tmp_path: Path) -> object:
    world = fault_campaign.build_world(tmp_path, 400, 64)
    # A deterministic interruption: the restore kills itself mid-write, after its deletions.
    _killed_at(
        world,
        "after-delete",
        "restore",
        str(world.session),
        world.entry,
        "--mode",
        "files",
        "--yes",
    )
    return world


def test_an_interrupted_restore_survives_a_sweep_two_days_later_and_gc(tmp_path: Path) -> None:
    world = _interrupted_world(tmp_path)
    repo = GitRepo.discover(world.repo)
    journals, _ = open_journals(repo)
    assert [j.state for j in journals] == ["writing"]
    assert fault_campaign.snapshot_files(world.repo) != world.before  # deletions happened: mixed

    later = FixedClock(int(time.time() * 1000) + 2 * 86_400_000)
    run_sweep(
        repo,
        world.session,
        world.agent_dir,
        scan_mode="repo-sessions",
        policy=Policy(max_snapshots=0, max_age_days=0.5, pin_labeled_entries=False),
        clock=later,
    )
    git(world.repo, "reflog", "expire", "--expire=now", "--all")
    git(world.repo, "gc", "-q", "--prune=now")

    doctor = fault_campaign.rewind(world, "doctor")
    assert (
        doctor.returncode == 1 and "interrupted" in doctor.stderr and "rewind undo" in doctor.stderr
    )
    refused = fault_campaign.rewind(
        world, "restore", str(world.session), world.entry, "--mode", "files", "--yes"
    )
    assert refused.returncode == 1 and "interrupted" in refused.stderr
    undo = fault_campaign.rewind(world, "undo", str(world.session), "--yes")
    assert undo.returncode == 0, undo.stderr
    assert fault_campaign.snapshot_files(world.repo) == world.before
    assert fault_campaign.rewind(world, "doctor").returncode == 0
    # The recovery is recorded: undo again returns to the interrupted restore's target.
    again = fault_campaign.rewind(world, "undo", str(world.session), "--yes")
    assert again.returncode == 0, again.stderr


def _mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root; skipped (run the tests as root to include it)")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip()}); skipped")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_a_full_work_tree_file_system_refuses_before_changing_anything(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    _mount_tmpfs(mount, "3m")
    try:
        world = fault_campaign.build_world(mount / "w", 20, 60_000)  # v1 and v2: ~1.2 MB each
        filler = mount / "filler"
        free = os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize
        filler.write_bytes(b"\0" * max(0, free - 600_000))
        result = fault_campaign.rewind(
            world, "restore", str(world.session), world.entry, "--mode", "files", "--yes"
        )
        assert result.returncode == 1
        assert "not enough free space" in result.stderr and "Traceback" not in result.stderr
        assert fault_campaign.snapshot_files(world.repo) == world.before
        assert open_journals(GitRepo.discover(world.repo)) == ([], [])
    finally:
        _umount(mount)


def test_a_full_agent_dir_after_the_files_changed_leaves_a_working_undo(tmp_path: Path) -> None:
    mount = tmp_path / "agentfs"
    _mount_tmpfs(mount, "1m")
    try:
        world = fault_campaign.build_world(tmp_path / "w", 50, 64)
        moved = mount / "agent"
        shutil.copytree(world.agent_dir, moved)
        world.agent_dir = moved
        world.session = moved / world.session.relative_to(tmp_path / "w" / "agent")
        size = (
            world.session.stat().st_size
        )  # end the file on a page boundary: the append needs a new page
        with world.session.open("ab") as handle:
            handle.write(b"\n" * (-size % 4096))
        filler = mount / "filler"
        try:
            with filler.open("wb") as handle:
                while True:
                    handle.write(b"\0" * 4096)
                    handle.flush()
        except OSError:
            pass
        result = fault_campaign.rewind(
            world, "restore", str(world.session), world.entry, "--mode", "files", "--yes"
        )
        assert (
            result.returncode == 1
            and "Traceback" not in result.stderr
            and "internal error" not in result.stderr
        )
        doctor = fault_campaign.rewind(world, "doctor")
        assert doctor.returncode == 1 and "interrupted" in doctor.stderr
        filler.unlink()
        undo = fault_campaign.rewind(world, "undo", str(world.session), "--yes")
        assert undo.returncode == 0, undo.stderr
        assert fault_campaign.snapshot_files(world.repo) == world.before
    finally:
        _umount(mount)


def test_the_bridge_says_at_session_start_that_a_restore_was_interrupted(tmp_path: Path) -> None:
    from tests.bridgekit import FakePi

    world = _interrupted_world(tmp_path)
    fake = FakePi(world.repo, world.agent_dir)
    try:
        reply = fake.event("session_start", {"reason": "startup"})
        assert reply.error is None
        texts = [n["text"] for n in reply.notices]
        assert any("was interrupted" in t and "rewind undo" in t for t in texts), texts
    finally:
        fake.close()
