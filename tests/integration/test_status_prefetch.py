"""The capture's ``git status``, started by a cold command before its imports
(ledger/git/capture/prefetch.py, docs/capture.md#status-prefetch): taken only when it is exactly
the capture's status on an index nothing changed since, under a lock held throughout, and never
left running once the lock is let go.

Real git and real processes: the lock is probed from another process, the CLI's git is a shim
that records whether its parent had loaded pygit2 when it started the status."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.git.capture import prefetch
from ledger.git.capture.scan import capture_tree
from ledger.git.liveness import take_lock
from ledger.git.repo import GitRepo
from ledger.git.runner import GitRunner
from tests.campaignkit import fault_campaign
from tests.gitkit import fresh_tree, git, init_repo, run_python, write
from tests.snapshotkit import NO_PROTECTION


@pytest.fixture(autouse=True)
def _no_prefetch_left() -> Iterator[None]:
    yield
    prefetch.stop()


def _repo(tmp_path: Path) -> tuple[Path, GitRepo]:
    root = init_repo(tmp_path / "repo")
    for i in range(30):
        write(root, f"d{i % 3}/f{i}.txt", f"file {i}\n")
    write(root, ".gitignore", "*.log\n")
    write(root, "d1/.gitignore", "*.tmp\n")
    repo = GitRepo.discover(root)
    capture_tree(repo, NO_PROTECTION)  # the kept index exists: a prefetch has something to read
    return root, repo


def _status_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The ``git status`` commands the capture runs itself (observed, then run for real)."""
    runs: list[list[str]] = []
    real = GitRunner.run

    def run(self: GitRunner, args: list[str], **kwargs: object) -> object:
        if args and args[0] == "status":
            runs.append(list(args))
        return real(self, args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(GitRunner, "run", run)
    return runs


def _lock_is_free(root: Path) -> bool:
    """Asked of another process, without waiting."""
    code = (
        "import sys\nfrom pathlib import Path\nfrom ledger.git.capture.index import PrivateIndex\n"
        f"index = PrivateIndex(Path({str(root / '.git')!r}))\n"
        "try:\n    with index.locked(timeout_s=0.0):\n        pass\nexcept Exception:\n"
        "    sys.exit(3)\n"
    )
    probe = run_python(code, cwd=root)
    return probe.wait(timeout=60) == 0


def test_a_prefetched_status_is_taken_by_the_capture_and_gives_the_exact_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, repo = _repo(tmp_path)
    write(root, "d0/f0.txt", "changed\n")
    write(root, "d2/new.txt", "new\n")
    runs = _status_runs(monkeypatch)

    assert prefetch.start(str(root), str(root / ".git"))
    assert not _lock_is_free(root)  # held from before git started
    result = capture_tree(repo, NO_PROTECTION)

    assert runs == []  # the capture ran no status of its own
    assert result.tree == fresh_tree(root)
    assert _lock_is_free(root)  # let go once the capture ended


def test_a_rule_file_changed_after_the_prefetch_started_makes_the_capture_run_status_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, repo = _repo(tmp_path)
    write(root, "d1/scratch.tmp", "ignored\n")
    write(root, "d1/notes.bak", "listed by the prefetched status\n")
    runs = _status_runs(monkeypatch)

    assert prefetch.start(str(root), str(root / ".git"))
    running = prefetch._current
    assert running is not None
    running.proc.wait(timeout=60)  # it read the old rules
    write(root, "d1/.gitignore", "*.bak\n")  # same size, new rule

    result = capture_tree(repo, NO_PROTECTION)
    assert len(runs) >= 1  # the prefetched status was not used
    assert result.tree == fresh_tree(root)
    assert "notes.bak" not in git(root, "ls-tree", "-r", "--name-only", result.tree)


def test_no_prefetch_while_a_restore_is_running(tmp_path: Path) -> None:
    root, _ = _repo(tmp_path)
    journals = root / ".git" / "pi-rewind" / "journal"
    journals.mkdir(parents=True, exist_ok=True)
    (journals / "1-abc.json").write_text("{}")
    fd = take_lock(journals / "1-abc.lock")  # held: the restore is running
    assert fd is not None
    try:
        assert not prefetch.start(str(root), str(root / ".git"))
        assert _lock_is_free(root)
    finally:
        os.close(fd)
    assert prefetch.start(str(root), str(root / ".git"))  # a finished restore's journal: fine


def test_no_prefetch_while_another_process_holds_the_capture_lock(tmp_path: Path) -> None:
    root, _ = _repo(tmp_path)
    code = (
        "import time\nfrom pathlib import Path\nfrom ledger.git.capture.index import PrivateIndex\n"
        f"index = PrivateIndex(Path({str(root / '.git')!r}))\n"
        "with index.locked():\n    print('held', flush=True)\n    time.sleep(120)\n"
    )
    holder = run_python(code, cwd=root)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        started = time.monotonic()
        assert not prefetch.start(str(root), str(root / ".git"))
        assert time.monotonic() - started < 5  # it did not wait for the lock
    finally:
        holder.kill()
        holder.wait()


def test_an_unused_prefetch_is_stopped_before_its_lock_is_let_go(tmp_path: Path) -> None:
    root, _ = _repo(tmp_path)
    assert prefetch.start(str(root), str(root / ".git"))
    running = prefetch._current
    assert running is not None
    prefetch.stop()
    assert running.proc.poll() is not None  # ended (and reaped) first
    assert _lock_is_free(root)
    assert not (root / ".git" / "pi-rewind" / "index.lock").exists()


def _shim(tmp_path: Path, *, delay_s: float = 0.0) -> tuple[Path, Path]:
    """A ``git`` first on PATH that logs, for each ``status``, whether its parent had loaded
    pygit2 when it started it (then waits ``delay_s`` and runs the real git)."""
    real = shutil.which("git")
    assert real is not None
    log = tmp_path / "status.log"
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "git").write_text(
        "#!/bin/sh\n"
        'case " $* " in *" status "*)\n'
        f'  if grep -q _pygit2 /proc/$PPID/maps; then echo "after $$" >> "{log}"; '
        f'else echo "before $$" >> "{log}"; fi\n'
        "  trap 'kill $! 2>/dev/null; exit 143' TERM\n"
        f"  sleep {delay_s} & wait $!;;\n"
        "esac\n"
        f'exec "{real}" "$@"\n'
    )
    (shim / "git").chmod(0o755)
    return shim, log


def _restore(world: object, shim: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "restore", str(world.session), world.entry]
        + ["--mode", "files", "--yes"],
        cwd=world.repo,
        env={
            **fault_campaign._env(),
            "PI_CODING_AGENT_DIR": str(world.agent_dir),
            "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
            **env,
        },
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="no /proc/PID/maps to look at")
@pytest.mark.parametrize("prefetching", [True, False])
def test_a_cold_restore_starts_its_status_before_loading_pygit2_and_restores_exactly(
    tmp_path: Path, prefetching: bool
) -> None:
    world = fault_campaign.build_world(tmp_path, 40, 16)
    assert fault_campaign.rewind(world, "snapshot").returncode == 0  # the kept index exists
    shim, log = _shim(tmp_path)
    done = _restore(world, shim, **({} if prefetching else {"REWIND_STATUS_PREFETCH": "0"}))
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    statuses = [line.split()[0] for line in log.read_text().splitlines()]
    assert statuses[0] == ("before" if prefetching else "after")
    assert len(statuses) == 1  # one scan for the whole command, as without the prefetch
    undone = fault_campaign.rewind(world, "undo", str(world.session), "--yes")
    assert undone.returncode == 0, undone.stderr
    assert fault_campaign.snapshot_files(world.repo) == world.before


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="no /proc/PID/maps to look at")
def test_a_restore_terminated_while_its_prefetched_status_runs_leaves_no_git_and_no_lock(
    tmp_path: Path,
) -> None:
    world = fault_campaign.build_world(tmp_path, 10, 16)
    assert fault_campaign.rewind(world, "snapshot").returncode == 0
    before = fault_campaign.snapshot_files(world.repo)
    shim, log = _shim(tmp_path, delay_s=30)
    done = _restore(world, shim)
    deadline = time.monotonic() + 60
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert log.exists(), "the prefetched status never started"
    time.sleep(0.3)  # the command is importing its code meanwhile
    done.send_signal(signal.SIGTERM)
    _, err = done.communicate(timeout=60)
    assert done.returncode != 0 and "Traceback" not in err
    status_pid = int(log.read_text().split()[1])
    assert not Path(f"/proc/{status_pid}").exists()  # stopped before the command ended
    assert _lock_is_free(world.repo)
    assert fault_campaign.snapshot_files(world.repo) == before  # nothing changed
