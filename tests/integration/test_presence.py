"""Sessions here (issue 27): two real bridges on one repository know of each other, say so once,
mark their footers while both live, and forget a killed or ended one; ``rewind status`` and
``rewind doctor`` list the live sessions."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ledger.facilities import facilities
from ledger.git.liveness import boot_id
from tests.bridgekit import FakePi

MARK = " · 2 sessions here"
NOTICE = "Rewind: another Pi session works in this directory too (session "


def _registry(repo: Path) -> Path:
    return repo / ".git" / "pi-rewind" / "sessions"


def _entries(repo: Path) -> list[str]:
    directory = _registry(repo)
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def _start(repo: Path, agent_dir: Path) -> tuple[FakePi, Any]:
    pi = FakePi(repo, agent_dir)
    reply = pi.event("session_start", {"reason": "startup"})
    assert reply.error is None
    return pi, reply


def _pid(pi: FakePi) -> int:
    proc = pi.proc
    assert isinstance(proc, subprocess.Popen)
    return proc.pid


def _rewind(agent_dir: Path, cwd: Path, *args: str) -> dict[str, Any]:
    """The real CLI in its own process, ``--json``."""
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(agent_dir), *args, "--json"],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return orjson.loads(done.stdout.splitlines()[0])


@pytest.fixture
def pair(repo: Path, isolated_env: Path) -> Iterator[tuple[FakePi, FakePi, Any]]:
    agent_dir = isolated_env / ".pi" / "agent"
    first, reply = _start(repo, agent_dir)
    assert reply.status == "◆ 0 points / 0 snapshots"
    assert not any(NOTICE in n["text"] for n in reply.notices), "alone: nothing to say"
    second, second_reply = _start(repo, agent_dir)
    yield first, second, second_reply
    for pi in (first, second):
        if isinstance(pi.proc, subprocess.Popen) and pi.proc.poll() is None:
            pi.close()


def test_a_second_session_is_told_of_the_first_and_both_footers_say_two(
    pair: tuple[FakePi, FakePi, Any],
) -> None:
    first, second, reply = pair
    notices = [n for n in reply.notices if n["text"].startswith(NOTICE)]
    assert len(notices) == 1 and notices[0]["level"] == "warning"
    text = notices[0]["text"]
    assert f"session {first.label()}, pid {first.pi_pid}, started " in text
    assert text.endswith("a restore in one overwrites what the other's agent writes")
    assert reply.status == "◆ 0 points / 0 snapshots" + MARK

    # The first learns of the second at its next event (no push): told once, footer marked.
    told = first.event("before_agent_start", {"prompt": "hello"})
    assert told.status is not None and told.status.endswith(MARK)
    about = [n["text"] for n in told.notices if n["text"].startswith(NOTICE)]
    assert len(about) == 1
    assert about[0].startswith(NOTICE + f"{second.label()}, pid {second.pi_pid}, started ")
    again = first.event("turn_start", {"turnIndex": 0})
    assert again.status is not None and again.status.endswith(MARK)
    assert not any(n["text"].startswith(NOTICE) for n in again.notices), "told once only"
    later = second.event("before_agent_start", {"prompt": "hi"})
    assert later.status is not None and later.status.endswith(MARK)
    assert not any(n["text"].startswith(NOTICE) for n in later.notices)


def test_a_turn_in_flight_is_announced(pair: tuple[FakePi, FakePi, Any], repo: Path) -> None:
    first, second, _ = pair
    first.event("before_agent_start", {"prompt": "work"})
    first.event("turn_start", {"turnIndex": 0})
    session_file = second.write_file()
    listed = _rewind(second.agent_dir, repo, "status", str(session_file))["liveSessions"]
    busy = {entry["pid"]: entry["busy"] for entry in listed}
    assert busy == {_pid(first): True, _pid(second): False}
    first.user("work")
    first.assistant("done")
    first.event("turn_end", {"turnIndex": 0, "role": "assistant"})
    first.event("agent_end", {})
    listed = _rewind(second.agent_dir, repo, "status", str(session_file))["liveSessions"]
    assert {entry["pid"]: entry["busy"] for entry in listed} == {
        _pid(first): False,
        _pid(second): False,
    }


def test_status_and_doctor_list_the_live_sessions(
    pair: tuple[FakePi, FakePi, Any], repo: Path
) -> None:
    first, second, _ = pair
    session_file = first.write_file()
    pids = {_pid(first), _pid(second)}
    status = _rewind(first.agent_dir, repo, "status", str(session_file))
    assert {entry["pid"] for entry in status["liveSessions"]} == pids
    assert {entry["sessionId"] for entry in status["liveSessions"]} == {
        first.header["id"],
        second.header["id"],
    }
    assert all(entry["kind"] == "bridge" for entry in status["liveSessions"])
    assert status["runningRestores"] == []
    doctor = _rewind(first.agent_dir, repo, "doctor")
    assert doctor["ok"] is True
    assert {entry["pid"] for entry in doctor["liveSessions"]} == pids

    text = subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(first.agent_dir), "doctor"],
        cwd=repo,
        capture_output=True,
        timeout=120,
        check=True,
    ).stdout.decode()
    assert "sessions here 2 live Pi sessions in this work tree" in text
    said = subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(first.agent_dir)]
        + ["status", str(session_file)],
        cwd=repo,
        capture_output=True,
        timeout=120,
        check=True,
    ).stdout.decode()
    assert "sessions here: 2 live Pi sessions" in said
    assert f"session {first.label()}, pid {first.pi_pid}, started " in said
    assert "(this one)" in said
    assert f"session {first.label()}, pid {first.pi_pid}" in text
    assert f"session {second.label()}, pid {second.pi_pid}" in text


def test_a_killed_session_is_forgotten_at_the_next_read(
    pair: tuple[FakePi, FakePi, Any], repo: Path
) -> None:
    first, second, _ = pair
    status = first.event("before_agent_start", {"prompt": "x"}).status
    assert status is not None and status.endswith(MARK)
    before = _entries(repo)
    assert len([n for n in before if n.endswith(".json")]) == 2
    assert len([n for n in before if n.endswith(".lock")]) == 2
    killed = _pid(second)
    os.kill(killed, signal.SIGKILL)
    assert isinstance(second.proc, subprocess.Popen)
    second.proc.wait(timeout=30)
    # A killed process removes nothing; but the other bridge's own background work (its
    # warm-up's base scan asks the registry who is busy) is a reader too, and may already have
    # removed the dead entry (the entry before its lock), so only the survivor's files are pinned.
    now = _entries(repo)
    assert [n for n in now if not n.startswith(f"{killed}-")] == [
        n for n in before if not n.startswith(f"{killed}-")
    ], "the killed session's end changed no other file"
    assert set(now) <= set(before), "nothing was added"
    time.sleep(1.1)  # the footer's view of the registry is at most a second old
    reply = first.event("turn_start", {"turnIndex": 0})
    assert reply.status == "◆ 0 points / 0 snapshots"
    assert not any(n["text"].startswith(NOTICE) for n in reply.notices)
    after = _entries(repo)
    assert [n for n in after if n.startswith(f"{killed}-")] == [], "the dead entry was cleaned"
    assert [n for n in before if n.startswith(f"{_pid(first)}-")] == after, "nothing else changed"
    listed = _rewind(first.agent_dir, repo, "doctor")["liveSessions"]
    assert [entry["pid"] for entry in listed] == [_pid(first)]


def test_a_session_that_ends_normally_removes_its_entry(
    pair: tuple[FakePi, FakePi, Any], repo: Path
) -> None:
    first, second, _ = pair
    gone = _pid(second)
    assert len([n for n in _entries(repo) if n.startswith(f"{gone}-")]) == 2, "entry and lock"
    second.event("session_shutdown", {"reason": "quit"})
    assert [n for n in _entries(repo) if n.startswith(f"{gone}-")] == [], "withdrawn at shutdown"
    assert second.close() == 0
    reply = first.event("before_agent_start", {"prompt": "alone again"})
    assert reply.status == "◆ 0 points / 0 snapshots"
    first.close()
    assert _entries(repo) == [], "the end of input withdraws the last one"


def test_a_bridge_that_ends_without_shutdown_removes_its_entry(
    repo: Path, isolated_env: Path
) -> None:
    pi, _ = _start(repo, isolated_env / ".pi" / "agent")
    assert len(_entries(repo)) == 2
    assert pi.close() == 0
    assert _entries(repo) == []


def test_entries_that_are_not_ours_or_dead_are_ignored_and_cleaned(
    repo: Path, isolated_env: Path
) -> None:
    agent_dir = isolated_env / ".pi" / "agent"
    pi, _ = _start(repo, agent_dir)
    own = _entries(repo)
    directory = _registry(repo)
    (directory / "1-garbage-aaaaaa.json").write_bytes(b"{not json")
    (directory / "2-strpid-bbbbbb.json").write_text(
        '{"version": 1, "sessionId": "x", "pid": "1", "startedMs": 1, "host": "h"}'
    )
    # A dead process's entry with a free lock, and one claiming our own pid without a lock
    # whose start time is not ours (a reused pid): both dead.
    entry = {
        "version": 1,
        "sessionId": "dead",
        "sessionFile": None,
        "pid": os.getpid(),
        "pidStart": 1,
        "bootId": "old-boot",
        "host": "elsewhere",
        "startedMs": 1,
        "kind": "bridge",
        "busy": False,
        "lock": True,
    }
    (directory / "3-dead-cccccc.json").write_bytes(orjson.dumps(entry))
    (directory / "3-dead-cccccc.lock").write_bytes(b"")
    # (This host and boot: another host's entry without a lock cannot be judged here; it is
    # kept and named, tests/integration/test_registry_liveness.py.)
    # Without a process table (REWIND_PORTABLE=1) no start time can tell a reused pid: a pid
    # nobody has then.
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    pid = os.getpid() if facilities().process_table else int(gone.stdout)
    reused = {**entry, "pid": pid, "lock": False, "host": socket.gethostname(), "bootId": boot_id()}
    (directory / "4-reused-dddddd.json").write_bytes(orjson.dumps(reused))
    time.sleep(1.1)
    reply = pi.event("before_agent_start", {"prompt": "x"})
    assert reply.error is None and reply.status == "◆ 0 points / 0 snapshots"
    assert not any(n["text"].startswith(NOTICE) for n in reply.notices)
    assert _entries(repo) == own, "every dead or unreadable entry is gone, ours stays"
    assert pi.close() == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Unix sockets")
@pytest.mark.needs("peer_credentials")
def test_a_session_hosted_by_the_watcher_counts_and_leaves_with_its_connection(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.bridge.hosted import socket_path
    from tests.gitkit import ROOT
    from tests.watchkit import start_watch, stop_watch

    # Our environment as the watcher's: hosting needs the two to be equal.
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("REWIND_FEED_VERIFY", "0")
    agent_dir = isolated_env / ".pi" / "agent"
    watcher = start_watch(repo, env={**os.environ, "PI_CODING_AGENT_DIR": str(agent_dir)})
    try:
        hosted = FakePi(repo, agent_dir, hosted=socket_path(repo / ".git"))
        assert hosted.event("session_start", {"reason": "startup"}).status == (
            "◆ 0 points / 0 snapshots"
        )
        own, reply = _start(repo, agent_dir)
        assert reply.status is not None and reply.status.endswith(MARK)
        about = [n["text"] for n in reply.notices if n["text"].startswith(NOTICE)]
        # Pi's pid (the peer of the watcher's connection: this process), not the watcher's.
        assert len(about) == 1 and f"pid {hosted.pi_pid}," in about[0], about
        assert f"pid {watcher.pid}," not in about[0]
        listed = _rewind(agent_dir, repo, "doctor")["liveSessions"]
        assert {(e["pid"], e["kind"]) for e in listed} == {
            (watcher.pid, "hosted"),
            (_pid(own), "bridge"),
        }
        assert hosted.close() == 0  # the connection ends: the watcher withdraws the entry
        deadline = time.monotonic() + 10
        while any(n.startswith(f"{watcher.pid}-") for n in _entries(repo)):
            assert time.monotonic() < deadline, _entries(repo)
            time.sleep(0.05)
        time.sleep(1.1)  # the footer's view of the registry is at most a second old
        assert own.event("before_agent_start", {"prompt": "x"}).status == (
            "◆ 0 points / 0 snapshots"
        )
        assert own.close() == 0
    finally:
        stop_watch(watcher)
