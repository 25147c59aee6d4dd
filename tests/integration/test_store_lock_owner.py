"""The store ref's lock belongs to the process that took it (issue 32, item 1): a writer stopped
inside its swap keeps its lock however old it gets; ``rewind sweep`` removes a lock only when its
owner is provably gone; a writer never renames anything over the ref once its lock is no longer
the file it created; a writer's success always means its snapshot is kept.

Real processes throughout: each writer is a Python process appending through
:class:`~ledger.git.store.chain.Store`, stopped by ``SIGSTOP`` at the moment it writes the new
value (the one point both the old and the new swap share: the value is written, the rename is
next); the sweep and the doctor are the real CLI; git is real git."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.git.repo import GitRepo
from ledger.git.store.chain import STORE_REF, Identity, Store
from tests.gitkit import ROOT, git

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

# One append in its own process. With PAUSE=1 it stops itself (SIGSTOP) when it first writes a
# ref value (a 40-hex line) to a file: inside the swap, under the lock, just before the rename.
_WRITER = r"""
import os, re, signal, sys
from pathlib import Path
from ledger.errors import LedgerError
from ledger.git.repo import GitRepo
from ledger.git.store.chain import Identity, Store

snapshot, pause = sys.argv[1], sys.argv[2] == "1"
value = re.compile(rb"[0-9a-f]{40}\n")
state = {"paused": False}

def _maybe_pause(data):
    if pause and not state["paused"] and value.fullmatch(bytes(data)):
        state["paused"] = True
        print("paused", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)

real_write, real_pwrite = os.write, os.pwrite
def write(fd, data):
    _maybe_pause(data)
    return real_write(fd, data)
def pwrite(fd, data, offset):
    _maybe_pause(data)
    return real_pwrite(fd, data, offset)
os.write, os.pwrite = write, pwrite

store = Store(GitRepo.discover(Path.cwd()))
try:
    head = store.append(snapshot, Identity("T", "t@e"), 1_700_000_000, 0)
except LedgerError as exc:
    print("failed", exc.message, flush=True)
    sys.exit(3)
print("ok", head, flush=True)
"""


class Writer:
    def __init__(self, repo: Path, snapshot: str, *, pause: bool) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.snapshot = snapshot
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, snapshot, "1" if pause else "0"],
            cwd=repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_paused(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.strip() == "paused", (line, self.proc.stderr.read() if self.proc.stderr else "")
        deadline = time.monotonic() + 10
        while _state(self.proc.pid) != "T":
            assert time.monotonic() < deadline, "the writer did not stop"
            time.sleep(0.01)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def finish(self) -> tuple[int, str]:
        out, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, out + err


def _state(pid: int) -> str:
    """The process state letter from ``/proc`` (``T``: stopped); ``ps`` elsewhere."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        done = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True)
        return done.stdout.strip()[:1]


def _commit(repo: Path, message: str) -> str:
    return git(repo, "commit-tree", EMPTY_TREE, "-m", message).strip()


def _rewind(repo: Path, agent_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(agent_dir), *args, "--json"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _age(path: Path, seconds: float) -> None:
    st = os.lstat(path)
    os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds), follow_symlinks=False)


def _kept(repo: Path) -> set[str]:
    return set(Store(GitRepo.discover(repo)).snapshots())


def _assert_sound(repo: Path) -> None:
    fsck = subprocess.run(
        ["git", "fsck", "--no-dangling", "--no-progress"], cwd=repo, capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    git(repo, "rev-parse", "--verify", "-q", f"{STORE_REF}^{{commit}}")


@pytest.fixture
def agent_dir(isolated_env: Path) -> Path:
    path = isolated_env / ".pi" / "agent"
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_a_sweep_leaves_the_lock_of_a_writer_stopped_inside_its_swap_and_its_snapshot_is_kept(
    repo: Path, agent_dir: Path
) -> None:
    """The reported run: writer 1 stopped inside its swap for "more than 10 s", a sweep, writer
    2 appends, writer 1 resumes. Before: the sweep removed the lock by age."""
    base = _commit(repo, "base")
    Store(GitRepo.discover(repo)).append(base, _ident(), 1_700_000_000, 0)
    lock = repo / ".git" / (STORE_REF + ".lock")
    s1, s2 = _commit(repo, "one"), _commit(repo, "two")

    first = Writer(repo, s1, pause=True)
    first.wait_paused()
    assert lock.exists()
    inode = os.lstat(lock).st_ino
    _age(lock, 60)  # "stopped for more than 10 s"

    swept = _rewind(repo, agent_dir, "sweep")
    assert swept.returncode == 0, swept.stderr
    assert lock.exists() and os.lstat(lock).st_ino == inode, "the sweep removed a live lock"
    doctor = json.loads(_rewind(repo, agent_dir, "doctor").stdout)
    assert doctor["storeLock"]["state"] == "live" and not doctor["storeLock"]["stale"]
    assert doctor["storeLock"]["ownerPid"] == first.proc.pid

    # Writer 2 cannot take the lock while writer 1 lives: it says so (it never claims success
    # without its snapshot kept), and a later append of its succeeds.
    second = Writer(repo, s2, pause=False)
    code, out = second.finish()
    assert code == 3 and f"pid {first.proc.pid}" in out, out

    first.resume()
    code, out = first.finish()
    assert code == 0, out
    assert s1 in _kept(repo), "writer 1 reported success: its snapshot must be kept"
    code, out = Writer(repo, s2, pause=False).finish()
    assert code == 0, out
    assert {base, s1, s2} <= _kept(repo)
    assert not lock.exists()
    git(repo, "gc", "--prune=now", "--quiet")
    assert {base, s1, s2} <= _kept(repo)
    _assert_sound(repo)


def test_a_writer_whose_lock_was_taken_from_it_never_renames_over_the_ref(repo: Path) -> None:
    """Writer 1's lock removed while it is stopped inside its swap (as the old sweep did by
    age, or a user's ``rm``), writer 2 stopped holding a fresh lock, writer 1 resumes. Before:
    writer 1 renamed writer 2's half-written lock over the ref and reported success (the ref was
    left empty, writer 1's snapshot unkept)."""
    base = _commit(repo, "base")
    Store(GitRepo.discover(repo)).append(base, _ident(), 1_700_000_000, 0)
    lock = repo / ".git" / (STORE_REF + ".lock")
    s1, s2 = _commit(repo, "one"), _commit(repo, "two")

    first = Writer(repo, s1, pause=True)
    first.wait_paused()
    lock.unlink()
    second = Writer(repo, s2, pause=True)
    second.wait_paused()
    assert lock.exists()

    first.resume()
    time.sleep(0.2)  # writer 1 finds its lock gone and retries against writer 2's
    second.resume()
    code2, out2 = second.finish()
    code1, out1 = first.finish()
    assert code2 == 0, out2
    assert s2 in _kept(repo)
    if code1 == 0:
        assert s1 in _kept(repo), "writer 1 reported success: its snapshot must be kept"
    else:
        assert "failed" in out1, out1
        code1, out1 = Writer(repo, s1, pause=False).finish()
        assert code1 == 0, out1
    assert {base, s1, s2} <= _kept(repo)
    assert not lock.exists()
    _assert_sound(repo)


def test_a_dead_writers_lock_is_removed_by_the_sweep_and_by_the_next_writer(
    repo: Path, agent_dir: Path
) -> None:
    """A writer killed inside its swap leaves its lock: its owner is provably gone, so the
    sweep removes it at once (no age needed) and so does the next append; a lock that is not
    rewind's (git's own) is never removed, however old, and the doctor names it."""
    base = _commit(repo, "base")
    Store(GitRepo.discover(repo)).append(base, _ident(), 1_700_000_000, 0)
    lock = repo / ".git" / (STORE_REF + ".lock")

    for remover in ("sweep", "writer"):
        victim = Writer(repo, _commit(repo, f"killed {remover}"), pause=True)
        victim.wait_paused()
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.finish()
        assert lock.exists()
        doctor = _rewind(repo, agent_dir, "doctor")
        report = json.loads(doctor.stdout)
        assert doctor.returncode == 1 and report["storeLock"]["state"] == "gone", report
        assert "rewind sweep' removes it" in report["hint"], report["hint"]
        if remover == "sweep":
            swept = json.loads(_rewind(repo, agent_dir, "sweep").stdout)
            assert str(lock) in swept["upkeep"]["leftoversRemoved"], swept["upkeep"]
        else:
            s = _commit(repo, "after a kill")
            code, out = Writer(repo, s, pause=False).finish()
            assert code == 0 and s in _kept(repo), out
        assert not lock.exists()
        leftovers = [p for p in lock.parent.iterdir() if p.name != "store"]
        assert leftovers == [] or _rewind(repo, agent_dir, "sweep").returncode == 0
        assert [p.name for p in lock.parent.iterdir()] == ["store"]

    # git's own lock (no identity of ours), an hour old: named, never removed.
    lock.write_text(base + "\n")
    _age(lock, 3600)
    doctor = _rewind(repo, agent_dir, "doctor")
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 1 and report["storeLock"]["state"] == "foreign", report
    assert f"rm '{lock}'" in report["hint"], report["hint"]
    assert _rewind(repo, agent_dir, "sweep").returncode == 0
    assert lock.exists(), "a lock that is not rewind's was removed"
    lock.unlink()
    _assert_sound(repo)


def test_a_stopped_writers_old_lock_is_not_removed_and_a_dead_ones_is(repo: Path) -> None:
    """The removal rule by itself (:func:`clean_leftovers`, what every sweep and upkeep runs):
    a lock whose owner is stopped and 10 minutes old stays; once the owner is killed it goes."""
    from ledger.git.store.leftovers import clean_leftovers

    base = _commit(repo, "base")
    Store(GitRepo.discover(repo)).append(base, _ident(), 1_700_000_000, 0)
    lock = repo / ".git" / (STORE_REF + ".lock")
    writer = Writer(repo, _commit(repo, "one"), pause=True)
    writer.wait_paused()
    _age(lock, 600)
    assert str(lock) not in {str(i.path) for i in clean_leftovers(GitRepo.discover(repo))}
    assert lock.exists()
    os.kill(writer.proc.pid, signal.SIGKILL)
    writer.finish()
    removed = {str(i.path) for i in clean_leftovers(GitRepo.discover(repo))}
    assert str(lock) in removed and not lock.exists()
    _assert_sound(repo)


def _ident() -> Identity:
    return Identity("T", "t@e")
