"""A restore that is still running is not an interrupted one (docs/design.md#crash-safe-restore).

A real ``rewind restore`` process is paused mid-write (after its deletions: the work tree is
mixed, its journal says ``writing``) through the fault hook of :mod:`ledger.git.restore.apply`,
the same hook ``test_crash_safe_restore.py`` uses to kill one there. While it waits, ``rewind
doctor`` names it by pid as information, and a second ``rewind restore`` or ``rewind undo`` waits
for it and then does its own work; none of them says "interrupted". Once the restore's process
is gone, its journal is an interrupted restore again, also when its pid now belongs to another
process, and also for a journal written before owners were recorded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.cli import main
from ledger.errors import RestoreRunningError
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import journal_dir, open_journals
from tests.campaignkit import fault_campaign
from tests.gitkit import git

World = Any  # fault_campaign.World, loaded from a file path

WAIT_S = 60.0

# A `rewind` process whose restore stops at STEP until the file GO exists (bounded), after
# writing its pid to PAUSED; or kills itself there with SIGKILL.
_HOOKED = """
import os, signal, sys, time
from pathlib import Path
from ledger.cli import main
from ledger.git.restore.apply import Steps
step, action, paused, go = sys.argv[1:5]
original = Steps.reach
def reach(self, name):
    if name == step:
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        Path(paused).write_text(str(os.getpid()))
        deadline = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.01)
    return original(self, name)
Steps.reach = reach
sys.exit(main(sys.argv[5:]))
"""


def _env(world: World) -> dict[str, str]:
    return {**fault_campaign._env(), "PI_CODING_AGENT_DIR": str(world.agent_dir)}


def _restore_args(world: World) -> list[str]:
    return ["restore", str(world.session), world.entry, "--mode", "files", "--yes"]


class Paused:
    """A ``rewind`` process held at a restore step (see :data:`_HOOKED`)."""

    def __init__(self, world: World, step: str, *args: str) -> None:
        self.paused = world.root / f"paused-{time.monotonic_ns()}"
        self.go = self.paused.with_name(self.paused.name + ".go")
        self.err = self.paused.with_name(self.paused.name + ".err")
        with self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _HOOKED,
                    step,
                    "pause",
                    str(self.paused),
                    str(self.go),
                    *args,
                ],
                cwd=world.repo,
                env=_env(world),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = time.monotonic() + WAIT_S
        while not self.paused.exists():
            assert self.proc.poll() is None, self.err.read_text()
            assert time.monotonic() < deadline, "the restore never reached its pause"
            time.sleep(0.01)
        self.pid = self.proc.pid

    def finish(self) -> int:
        self.go.touch()
        return self.proc.wait(timeout=WAIT_S)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT_S)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return fault_campaign.build_world(tmp_path, 300, 64)


@pytest.fixture
def paused(world: World) -> Iterator[Paused]:
    restore = Paused(world, "after-delete", *_restore_args(world))
    try:
        yield restore
    finally:
        restore.stop()


def _at_target(world: World) -> bool:
    """The work tree is exactly the restore's target: the v1 commit, nothing else."""
    return git(world.repo, "status", "--porcelain", "--untracked-files=all", "--ignored") == ""


def _while_waiting(world: World, paused: Paused, *args: str) -> tuple[int, str, str]:
    """Run ``rewind ARGS`` while ``paused`` holds its restore; let that restore go on once the
    command says it waits for it; return the command's code, stdout and stderr."""
    err = world.root / f"second-{time.monotonic_ns()}.err"
    with err.open("w") as handle:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ledger", *args],
            cwd=world.repo,
            env=_env(world),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=handle,
            text=True,
        )
    try:
        deadline = time.monotonic() + WAIT_S
        while "waiting for it to finish" not in err.read_text():
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.02)
        assert paused.finish() == 0, paused.err.read_text()
        out, _ = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err.read_text()


def test_doctor_names_a_running_restore_by_pid_and_does_not_call_it_interrupted(
    world: World, paused: Paused
) -> None:
    doctor = fault_campaign.rewind(world, "doctor")
    assert doctor.returncode == 0, doctor.stderr
    assert f"a restore is running (pid {paused.pid})" in doctor.stdout
    assert "interrupted" not in doctor.stdout + doctor.stderr
    report = json.loads(fault_campaign.rewind(world, "doctor", "--json").stdout)
    assert [j["pid"] for j in report["runningRestores"]] == [paused.pid]
    assert report["interruptedRestores"] == [] and report["ok"]

    assert paused.finish() == 0, paused.err.read_text()
    assert _at_target(world)
    after = json.loads(fault_campaign.rewind(world, "doctor", "--json").stdout)
    assert after["ok"] and after["runningRestores"] == [] and after["interruptedRestores"] == []
    assert open_journals(GitRepo.discover(world.repo)) == ([], [])


def test_a_second_restore_waits_for_the_running_one_and_then_succeeds(
    world: World, paused: Paused
) -> None:
    code, out, err = _while_waiting(world, paused, *_restore_args(world))

    assert code == 0, err
    assert f"a restore is running (pid {paused.pid})" in err
    assert "interrupted" not in out + err
    assert "already equal" in out  # it planned on the finished restore, not on the mixed tree
    assert _at_target(world)
    undo = fault_campaign.rewind(world, "undo", str(world.session), "--yes")
    assert undo.returncode == 0, undo.stderr
    assert fault_campaign.snapshot_files(world.repo) == world.before


def test_undo_during_a_restore_waits_for_it_and_then_undoes_it_exactly(
    world: World, paused: Paused
) -> None:
    code, out, err = _while_waiting(world, paused, "undo", str(world.session), "--yes")

    assert code == 0, err
    assert f"a restore is running (pid {paused.pid})" in err
    assert "interrupted" not in out + err
    assert "undid the last file rewind" in out
    assert fault_campaign.snapshot_files(world.repo) == world.before
    doctor = fault_campaign.rewind(world, "doctor")
    assert doctor.returncode == 0, doctor.stderr


def test_a_restore_running_longer_than_the_wait_refuses_with_its_pid_and_changes_nothing(
    world: World,
    paused: Paused,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ledger import recovery

    with pytest.raises(RestoreRunningError) as info:
        recovery.wait_for_running(GitRepo.discover(world.repo), timeout_s=0.3)
    assert info.value.pid == paused.pid
    assert info.value.repository == GitRepo.discover(world.repo).root

    mixed = fault_campaign.snapshot_files(world.repo)
    monkeypatch.setattr(recovery, "RUNNING_WAIT_S", 0.5)  # the CLI's bound, shortened
    for args in (_restore_args(world), ["undo", str(world.session), "--yes"]):
        capsys.readouterr()
        code = main([*args, "--agent-dir", str(world.agent_dir)], cwd=world.repo)
        err = capsys.readouterr().err
        assert code == 1
        assert f"error: a restore is running (pid {paused.pid})" in err and "hint: " in err
        assert "interrupted" not in err and "Traceback" not in err
        assert fault_campaign.snapshot_files(world.repo) == mixed

    assert paused.finish() == 0, paused.err.read_text()
    assert _at_target(world)


def _killed(world: World) -> Path:
    """Kill a restore with SIGKILL after its deletions; return its journal file."""
    result = subprocess.run(
        [sys.executable, "-c", _HOOKED, "after-delete", "kill", "-", "-", *_restore_args(world)],
        cwd=world.repo,
        env=_env(world),
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    journals, broken = open_journals(GitRepo.discover(world.repo))
    assert len(journals) == 1 and not broken
    return journals[0].path


def _start_time(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat.rpartition(b")")[2].split()[19])  # field 22


def _edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def _interrupted(world: World) -> bool:
    doctor = fault_campaign.rewind(world, "doctor")
    if doctor.returncode == 1 and "was interrupted" in doctor.stderr:
        return True
    assert doctor.returncode == 0, doctor.stderr
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.needs("process_table")
def test_a_killed_restore_is_interrupted_even_when_its_pid_runs_another_process(
    world: World,
) -> None:
    journal = _killed(world)
    assert _interrupted(world)
    other = subprocess.Popen(["sleep", "60"])
    try:
        start = _start_time(other.pid)
        # Its pid reused, by a process that even has the start time the journal names: the
        # lock the killed restore held is free, and the lock is the proof.
        _edit(journal, pid=other.pid, pid_start=start)
        assert _interrupted(world)
        # A journal from a file system without flock: only the identity tells.
        _edit(journal, lock=False)
        doctor = fault_campaign.rewind(world, "doctor")
        assert doctor.returncode == 0 and f"a restore is running (pid {other.pid})" in doctor.stdout
        _edit(journal, pid_start=start + 1)  # the same pid, another process: the owner is gone
        assert _interrupted(world)
    finally:
        other.kill()
        other.wait()
    undo = fault_campaign.rewind(world, "undo", str(world.session), "--yes")
    assert undo.returncode == 0, undo.stderr
    assert fault_campaign.snapshot_files(world.repo) == world.before


def test_a_journal_written_before_owners_were_recorded_is_interrupted_and_undone(
    world: World,
) -> None:
    journal = _killed(world)
    _edit(journal, pid_start=None, boot_id=None, lock=None, pid=os.getpid())  # a live pid, even
    (journal_dir(GitRepo.discover(world.repo)) / (journal.stem + ".lock")).unlink(missing_ok=True)

    assert _interrupted(world)
    refused = fault_campaign.rewind(world, *_restore_args(world))
    assert refused.returncode == 1 and "was interrupted" in refused.stderr
    undo = fault_campaign.rewind(world, "undo", str(world.session), "--yes")
    assert undo.returncode == 0, undo.stderr
    assert fault_campaign.snapshot_files(world.repo) == world.before
    assert open_journals(GitRepo.discover(world.repo)) == ([], [])
