"""The live-session registry (issue 32, item 7): an entry is whole or absent and a live session
is never hidden by a damaged one; an entry whose owner is gone is dead even when its lock is
held by another process (a descriptor left behind) or its pid was reused; ``rewind sweep``
removes dead, unreadable and stray files there and ``rewind doctor`` names them.

Every session here is a real process announcing itself through :func:`ledger.presence.announce`;
the listings are made from other processes (this one, or the real CLI)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ledger.git.liveness import boot_id, proc_start
from ledger.presence import live_sessions, registry_dir
from tests.gitkit import ROOT

# A session owner. ``limit``: the file size limit while it announces (a nearly full disk: the
# entry's write is cut short); ``hand``: pass its lock descriptor to a long-lived child, as a
# process forked without exec would keep it. Then it waits for lines on stdin: the first lifts
# the limit and lists the registry (the bridge lists it for its footer at every event).
_OWNER = r"""
import os, resource, signal, subprocess, sys
from pathlib import Path
from ledger.presence import announce, live_sessions

git_dir, limit, hand = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
own = announce(git_dir, "0123456789abcdef-session", "/sessions/one.jsonl")
assert own is not None
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
child = None
if hand:
    fd = own._lock_fd
    child = subprocess.Popen(["sleep", "600"], pass_fds=(fd,))
print("announced", own.presence.stem, child.pid if child else 0, flush=True)
sys.stdin.readline()
live_sessions(git_dir)
print("listed", flush=True)
sys.stdin.readline()
"""


class Owner:
    def __init__(self, git_dir: Path, *, limit: int = 0, hand: bool = False) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _OWNER, str(git_dir), str(limit), "1" if hand else "0"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        assert line and line[0] == "announced", (line, self._stderr())
        self.stem, self.child = line[1], int(line[2])

    def _stderr(self) -> str:
        return self.proc.stderr.read() if self.proc.stderr and self.proc.poll() is not None else ""

    def step(self, expect: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == expect

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)  # reaped: no zombie keeps the pid

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        if self.child:
            os.kill(self.child, signal.SIGKILL)


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


def _names(repo: Path) -> set[str]:
    directory = registry_dir(repo / ".git")
    return {p.name for p in directory.iterdir()} if directory.is_dir() else set()


@pytest.fixture
def agent_dir(isolated_env: Path) -> Path:
    path = isolated_env / ".pi" / "agent"
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_a_short_write_on_a_full_disk_never_hides_a_live_session(repo: Path) -> None:
    """Before: the entry's write was cut short (the disk nearly full), the half entry renamed
    into place, and every listing skipped the live session as unreadable, for good."""
    git_dir = repo / ".git"
    owner = Owner(git_dir, limit=100)
    try:
        entry = registry_dir(git_dir) / f"{owner.stem}.json"
        if entry.exists():
            json.loads(entry.read_bytes())  # whole or absent, never half an entry
        listed = {e.pid: e for e in live_sessions(git_dir)}
        assert owner.proc.pid in listed, "a live session is hidden by its damaged entry"
        assert not listed[owner.proc.pid].whole  # found by its held lock and name

        # Its owner lists the registry (the footer does at every event) and writes it again.
        owner.step("listed")
        listed = {e.pid: e for e in live_sessions(git_dir)}
        assert listed[owner.proc.pid].whole
        assert listed[owner.proc.pid].session_file == "/sessions/one.jsonl"
        json.loads(entry.read_bytes())
    finally:
        owner.end()
    assert live_sessions(git_dir) == []


def test_an_entry_whose_owner_died_is_dead_though_another_process_holds_its_lock(
    repo: Path,
) -> None:
    """The owner died (``kill -9``) but a descriptor of its lock lives on in another process:
    before, the held lock alone made the entry live for as long as that process ran, whoever
    had the owner's pid by then. Its identity is checked too: the owner is gone."""
    git_dir = repo / ".git"
    owner = Owner(git_dir, hand=True)
    try:
        assert [e.pid for e in live_sessions(git_dir)] == [owner.proc.pid]
        owner.kill()
        assert live_sessions(git_dir) == []
        assert not any(n.startswith(owner.stem) for n in _names(repo)), _names(repo)
    finally:
        owner.end()


@pytest.mark.needs("process_table")
def test_a_reused_pid_without_a_lock_is_judged_dead_by_its_start_time(repo: Path) -> None:
    """Where the file system has no ``flock`` an entry says ``"lock": false`` and the identity
    decides: a live process that has the entry's pid but another start time is not the owner
    (its pid was reused); the real owner, with its own start time, is live."""
    git_dir = repo / ".git"
    directory = registry_dir(git_dir)
    directory.mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        start = proc_start(sleeper.pid)
        assert start is not None
        entry = {
            "version": 1,
            "sessionId": "reused",
            "sessionFile": None,
            "pid": sleeper.pid,
            "pidStart": start - 1,
            "bootId": boot_id(),
            "host": socket.gethostname(),
            "startedMs": 1,
            "kind": "bridge",
            "busy": False,
            "lock": False,
        }
        (directory / f"{sleeper.pid}-reused-aaaaaa.json").write_bytes(orjson.dumps(entry))
        (directory / f"{sleeper.pid}-owner-bbbbbb.json").write_bytes(
            orjson.dumps({**entry, "sessionId": "owner", "pidStart": start})
        )
        assert [e.session_id for e in live_sessions(git_dir)] == ["owner"]
        assert _names(repo) == {f"{sleeper.pid}-owner-bbbbbb.json"}
    finally:
        sleeper.kill()
        sleeper.wait()
    assert live_sessions(git_dir) == [] and _names(repo) == set()


def test_the_sweep_removes_dead_unreadable_and_stray_files_and_the_doctor_names_them(
    repo: Path, agent_dir: Path
) -> None:
    """Before: files that were no entry (and entries of gone sessions nobody listed) stayed in
    the registry for good, and nothing named them."""
    git_dir = repo / ".git"
    live, dead = Owner(git_dir), Owner(git_dir)
    try:
        dead.kill()
        directory = registry_dir(git_dir)
        (directory / "1-garbage-cccccc.json").write_bytes(b'{"version": 1, "sess')
        (directory / "1-garbage-cccccc.lock").write_bytes(b"")
        (directory / "2-orphan-dddddd.lock").write_bytes(b"")
        (directory / "notes.txt").write_text("not an entry\n")
        (directory / ".1-garbage-cccccc.json.abcdef.tmp").write_bytes(b"{")
        (directory / f"{live.stem}.extra").write_text("claimed by a live session\n")

        doctor = _rewind(repo, agent_dir, "doctor")
        report = json.loads(doctor.stdout)
        assert [e["pid"] for e in report["liveSessions"]] == [live.proc.pid]
        named = {Path(item["path"]).name for item in report["leftovers"] if item["removable"]}
        # The doctor's own listing already dropped the dead entries; what is left it names.
        assert "notes.txt" in named, report["leftovers"]
        assert f"{live.stem}.extra" not in named

        swept = _rewind(repo, agent_dir, "sweep")
        assert swept.returncode == 0, swept.stderr
        assert _names(repo) == {f"{live.stem}.json", f"{live.stem}.lock", f"{live.stem}.extra"}
        assert [e.pid for e in live_sessions(git_dir)] == [live.proc.pid]
    finally:
        live.end()
        dead.end()
