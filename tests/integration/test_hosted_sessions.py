"""Pi sessions hosted by the repository's watcher (``rewind serve --watch``): the bridge protocol
on ``<git-dir>/pi-rewind/bridge.sock`` instead of a bridge process. Real watcher processes and
real sockets; the extension's half is :class:`tests.bridgekit.FakePi` (docs/capture.md#hosted-sessions).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import time
from pathlib import Path

import pytest

from ledger.bridge.hosted import HELLO_VERSION, bridge_env, socket_path
from ledger.bridge.snapshot_socket import find_repository
from ledger.engine import messages as M
from ledger.records import TURN
from tests.bridgekit import FakePi, HostedRefused, prompts_stay_exact
from tests.gitkit import ROOT, fresh_tree, git
from tests.watchkit import start_watch, stop_watch

pytestmark = pytest.mark.needs("peer_credentials")  # served snapshots, hosted sessions


@pytest.fixture(autouse=True)
def watcher_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our environment as the watcher's (tests.watchkit.start_watch sets these): hosting needs
    the two to be equal."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("REWIND_FEED_VERIFY", "0")


def _agent_env(isolated_env: Path) -> dict[str, str]:
    """Our environment as a bridge of FakePi's has it (its agent dir set)."""
    return {**os.environ, "PI_CODING_AGENT_DIR": str(isolated_env / ".pi" / "agent")}


def _hosted(repo: Path, isolated_env: Path) -> FakePi:
    pi = FakePi(repo, isolated_env / ".pi" / "agent", hosted=socket_path(repo / ".git"))
    assert pi.event("session_start", {"reason": "startup"}).error is None
    return pi


def _hello(repo: Path, **changes: object) -> dict[str, object]:
    found = find_repository(repo)
    assert found is not None
    hello: dict[str, object] = {
        "v": HELLO_VERSION,
        "op": "bridge",
        "root": str(found[0]),
        "gitDir": str(found[1]),
        "env": bridge_env(os.environ),
        **changes,
    }
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(str(socket_path(repo / ".git")))
        conn.sendall(json.dumps(hello).encode() + b"\n")
        answer: dict[str, object] = json.loads(conn.makefile("rb").readline())
        return answer


def test_a_hosted_session_records_each_prompt_with_the_exact_work_tree(
    repo: Path, isolated_env: Path
) -> None:
    watcher = start_watch(repo, env=_agent_env(isolated_env))
    pi = _hosted(repo, isolated_env)
    prompts_stay_exact(pi, 3, "hosted")
    assert len(pi.custom(TURN)) == 3
    assert pi.close() == 0
    err = stop_watch(watcher)
    assert "hosted 1 Pi sessions" in err


def test_a_tree_restore_in_a_hosted_session_writes_the_files_and_later_prompts_stay_exact(
    repo: Path, isolated_env: Path
) -> None:
    """The watcher's thread restores (under the private index's lock, re-entrant in that thread)
    while its feed and verifier share the lock."""
    watcher = start_watch(repo, env=_agent_env(isolated_env))
    pi = _hosted(repo, isolated_env)
    prompts = [
        pi.prompt(f"write {n}", lambda n=n: (repo / "a.txt").write_text(f"{n}\n")) for n in range(3)
    ]
    reply = pi.navigate(prompts[1][1], M.TREE_RESTORE)
    assert {"level": "info", "text": M.FILES_RESTORED_TO_POINT} in reply.notices
    assert (repo / "a.txt").read_text() == "1\n"
    _, assistant = pi.prompt("after", lambda: (repo / "b.txt").write_text("b\n"))
    turn = pi.custom(TURN)[-1]
    bound = {entry: turn["snapshots"][i] for entry, i in turn["bindings"]}
    assert git(repo, "rev-parse", f"{bound[assistant]}^{{tree}}").strip() == fresh_tree(repo)
    assert pi.close() == 0
    stop_watch(watcher)


def test_the_socket_is_the_users_alone(repo: Path, isolated_env: Path) -> None:
    watcher = start_watch(repo)
    path = socket_path(repo / ".git")
    info = os.lstat(path)
    assert stat.S_ISSOCK(info.st_mode) and info.st_uid == os.getuid()
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert os.lstat(path.parent).st_mode & 0o022 == 0
    stop_watch(watcher)
    assert not path.exists(), "the socket goes with the watcher"


def test_a_hello_in_another_environment_or_for_another_repository_is_declined(
    repo: Path, tmp_path: Path
) -> None:
    watcher = start_watch(repo)
    env = bridge_env(os.environ)
    assert _hello(repo) == {"ok": True, "ahead": True}
    assert _hello(repo, env={**env, "GIT_AUTHOR_NAME": "x"}) == {
        "ok": False,
        "why": "another environment",
    }
    assert _hello(repo, env={**env, "PI_CODING_AGENT_DIR": str(tmp_path)})["ok"] is False
    assert _hello(repo, root=str(tmp_path))["why"] == "another repository"
    assert _hello(repo, v=99)["why"] == "another protocol version"
    assert _hello(repo, op="snapshot")["why"] == "unknown hello"
    err = stop_watch(watcher)
    assert "another environment: 2" in err and "another repository: 1" in err


def test_fakepi_refuses_to_run_where_the_watcher_declines(repo: Path, isolated_env: Path) -> None:
    watcher = start_watch(repo)  # its environment lacks FakePi's agent dir
    with pytest.raises(HostedRefused, match="another environment"):
        FakePi(repo, isolated_env / "elsewhere", hosted=socket_path(repo / ".git"))
    stop_watch(watcher)


def test_the_watcher_does_not_end_idle_while_a_session_is_connected(
    repo: Path, isolated_env: Path
) -> None:
    # The session must connect before the watcher's first idle check (--idle-exit after its
    # start): 3 s, not 1, leaves room for a slow start under load; then connected for longer
    # than that.
    watcher = start_watch(repo, "--idle-exit", "3", env=_agent_env(isolated_env))
    pi = _hosted(repo, isolated_env)
    time.sleep(4.5)
    assert watcher.poll() is None, "ended while a session was connected"
    pi.prompt("still here", lambda: (repo / "late.txt").write_text("x\n"))
    assert len(pi.custom(TURN)) == 1
    assert pi.close() == 0
    _, err = watcher.communicate(timeout=30)  # idle now: it ends by itself
    assert watcher.returncode == 0 and "hosted 1 Pi sessions" in err


def test_stopping_the_watcher_ends_its_sessions_after_their_event_and_removes_the_socket(
    repo: Path, isolated_env: Path
) -> None:
    watcher = start_watch(repo, env=_agent_env(isolated_env))
    pi = _hosted(repo, isolated_env)
    pi.prompt("one", lambda: (repo / "one.txt").write_text("1\n"))
    watcher.send_signal(signal.SIGTERM)
    _, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, err
    assert pi.proc.stdout is not None and pi.proc.stdout.readline() == b"", "session ended"
    assert not socket_path(repo / ".git").exists()
    assert len(pi.custom(TURN)) == 1


def test_a_socket_left_by_a_killed_watcher_is_replaced_by_the_next_one(
    repo: Path, isolated_env: Path
) -> None:
    first = start_watch(repo)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    path = socket_path(repo / ".git")
    assert path.exists(), "a killed watcher cannot remove its socket"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe, pytest.raises(OSError):
        probe.connect(str(path))  # stale: nobody listens
    second = start_watch(repo, env=_agent_env(isolated_env))
    pi = _hosted(repo, isolated_env)
    pi.prompt("after", lambda: (repo / "after.txt").write_text("x\n"))
    assert len(pi.custom(TURN)) == 1
    assert pi.close() == 0
    stop_watch(second)


def test_rewind_hosted_0_keeps_the_watcher_from_hosting(repo: Path) -> None:
    watcher = start_watch(repo, env={**os.environ, "REWIND_HOSTED": "0"})
    assert not socket_path(repo / ".git").exists()
    assert "hosted" not in stop_watch(watcher)
