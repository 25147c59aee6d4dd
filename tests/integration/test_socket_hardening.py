"""The watcher's sockets are the user's alone and survive bad or idle clients (issue 23, parts 5
and 6): no other user can keep ``rewind serve --watch`` from serving, a second watcher names the
one that serves, bad hellos and requests are declined with an answer (never a traceback), and
idle connections cost no thread and keep out no real client. Real watcher processes, real
sockets, and a real second OS user where the machine allows it
(docs/capture.md#served-snapshots, docs/capture.md#hosted-sessions)."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.bridge.hosted import HELLO_VERSION, MAX_SESSIONS, bridge_env
from ledger.bridge.hosted import socket_path as bridge_path
from ledger.bridge.private_socket import PATH_MAX
from ledger.bridge.snapshot_socket import find_repository, serving
from ledger.bridge.snapshot_socket import socket_path as snapshot_path
from tests.gitkit import ROOT, fresh_tree, one_commit_repo
from tests.watchkit import start_watch, stop_watch, watch

pytestmark = pytest.mark.needs("peer_credentials")  # served snapshots, hosted sessions

OTHER_USER = "rewindother"
OK = {"ok": True, "ahead": True}
"""The hosting's answer to a hello it accepts (``ahead``: events may be written ahead)."""


@pytest.fixture(autouse=True)
def watcher_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our environment as the watcher's (tests.watchkit.start_watch sets these): hosting needs
    the two to be equal."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("REWIND_FEED_VERIFY", "0")


def _snapshot(repo: Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "snapshot", "--json"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    payload: dict[str, object] = json.loads(proc.stdout)
    return payload


def _serve_watch(repo: Path) -> subprocess.CompletedProcess[str]:
    """``rewind serve --watch`` expected to refuse (it ends by itself)."""
    return subprocess.run(
        [sys.executable, "-m", "ledger", "serve", "--watch"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _hello_line(repo: Path) -> bytes:
    found = find_repository(repo)
    assert found is not None
    hello = {
        "v": HELLO_VERSION,
        "op": "bridge",
        "root": str(found[0]),
        "gitDir": str(found[1]),
        "env": bridge_env(os.environ),
    }
    return json.dumps(hello).encode() + b"\n"


def _ask(path: Path, data: bytes, *, timeout: float = 20) -> dict[str, object]:
    """Send ``data`` on a new connection to ``path`` and read the one-line answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(str(path))
        # The server may decline before it has read everything (too long) and close.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.sendall(data)
        answer: dict[str, object] = json.loads(conn.makefile("rb").readline())
        return answer


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


@contextlib.contextmanager
def _idle_connections(path: Path, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections to ``path`` that never send anything."""
    conns: list[socket.socket] = []
    try:
        for _ in range(count):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conns.append(conn)
            conn.connect(str(path))
        yield conns
    finally:
        for conn in conns:
            conn.close()


# --- no other user can take the repository's place -------------------------------------------


def _other_user() -> str:
    """A second OS user (created once, as root), or skip."""
    if os.getuid() != 0:
        pytest.skip("needs root to act as another user")
    if shutil.which("runuser") is None:
        pytest.skip("needs runuser to run a process as another user")
    try:
        pwd.getpwnam(OTHER_USER)
    except KeyError:
        if shutil.which("useradd") is None:
            pytest.skip("needs useradd to create another user")
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
            check=True,
            capture_output=True,
        )
    return OTHER_USER


@pytest.fixture
def shared_repo() -> Iterator[Path]:
    """A repository another user can reach (every directory above it is 0755, as in a home
    directory): only the private dir's own permissions keep them out."""
    top = Path(tempfile.mkdtemp(prefix="rewind-sockets-", dir="/tmp"))
    try:
        top.chmod(0o755)
        yield one_commit_repo(top / "repo")
    finally:
        shutil.rmtree(top, ignore_errors=True)


_SQUATTER = """
import json, os, socket, sys, zlib

root, git_dir, old_name = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3])
private = os.path.join(git_dir, "pi-rewind")
tried = {}
held = []
def attempt(what, action):
    try:
        held.append(action())
        tried[what] = "ok"
    except OSError as exc:
        tried[what] = type(exc).__name__
def bind(address):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(address)
    s.listen(8)
    return s
attempt("old abstract name", lambda: bind(old_name))
attempt("mkdir private dir", lambda: os.mkdir(private, 0o777))
attempt("bind snapshot.sock", lambda: bind(os.path.join(private, "snapshot.sock")))
attempt("bind bridge.sock", lambda: bind(os.path.join(private, "bridge.sock")))
attempt("create serve.lock", lambda: os.open(os.path.join(private, "serve.lock"), os.O_CREAT | os.O_RDWR, 0o666))
print(json.dumps(tried), flush=True)
sys.stdin.read()  # hold whatever was taken until the test ends
"""


def _old_abstract_name(root: Path, git_dir: Path) -> bytes:
    """The name the snapshot service used to bind (an abstract socket any user could take)."""
    a = zlib.crc32(os.fsencode(root))
    b = zlib.crc32(os.fsencode(git_dir), a)
    return b"\0rewind-ledger/snapshot/%08x%08x" % (a, b)


def test_another_user_cannot_keep_the_watcher_from_serving_or_reach_its_sockets(
    shared_repo: Path,
) -> None:
    user = _other_user()
    found = find_repository(shared_repo)
    assert found is not None
    _snapshot(shared_repo)  # the private dir exists, as after any capture
    squatter = subprocess.Popen(
        ["runuser", "-u", user, "--", "/usr/bin/python3", "-c", _SQUATTER, str(found[0]),
         str(found[1]), _old_abstract_name(*found).hex()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )  # fmt: skip
    assert squatter.stdin is not None and squatter.stdout is not None
    try:
        tried = json.loads(squatter.stdout.readline())
        assert tried["old abstract name"] == "ok"  # what used to keep the watcher away
        for what in ("bind snapshot.sock", "bind bridge.sock", "create serve.lock"):
            assert tried[what] == "PermissionError", (what, tried)
        with watch(shared_repo) as watcher:
            (shared_repo / "new.txt").write_text("served\n")
            assert _snapshot(shared_repo)["tree"] == fresh_tree(shared_repo)
            connect = (
                "import socket, sys\n"
                "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                "try:\n    s.connect(sys.argv[1]); print('connected')\n"
                "except OSError as exc:\n    print(type(exc).__name__)\n"
            )
            for path in (snapshot_path(found[1]), bridge_path(found[1])):
                reached = subprocess.run(
                    ["runuser", "-u", user, "--", "/usr/bin/python3", "-c", connect, str(path)],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    cwd="/",
                )
                assert reached.stdout.strip() == "PermissionError", (path, reached)
            err = stop_watch(watcher)
        assert "served 1 snapshots" in err and "Traceback" not in err
    finally:
        squatter.stdin.close()
        squatter.wait(timeout=30)


def test_a_private_dir_others_may_write_or_a_symlink_is_refused_before_listening(
    repo: Path, tmp_path: Path
) -> None:
    private = repo / ".git" / "pi-rewind"
    private.mkdir()
    private.chmod(0o777)
    refused = _serve_watch(repo)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "may be written by other users (mode 0777)" in refused.stderr
    assert "hint:" in refused.stderr
    assert not (private / "snapshot.sock").exists() and not (private / "bridge.sock").exists()
    assert _snapshot(repo)["tree"] == fresh_tree(repo)  # captured by itself
    shutil.rmtree(private)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    private.symlink_to(elsewhere)
    refused = _serve_watch(repo)
    assert refused.returncode == 1 and "is a symbolic link" in refused.stderr
    assert list(elsewhere.iterdir()) == []


# --- one server per repository -----------------------------------------------------------------


def test_a_second_watcher_is_refused_naming_the_pid_of_the_one_serving(repo: Path) -> None:
    with watch(repo) as first:
        second = _serve_watch(repo)
        assert second.returncode == 1
        assert f"another 'rewind serve' (pid {first.pid}) already serves" in second.stderr
        assert "hint:" in second.stderr and "Traceback" not in second.stderr
        stop_watch(first)
    with watch(repo) as again:  # the lock went with the first one
        stop_watch(again)


def test_a_killed_watchers_lock_and_sockets_are_taken_over_by_the_next(repo: Path) -> None:
    first = start_watch(repo)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    git_dir = repo / ".git"
    assert snapshot_path(git_dir).exists(), "a killed watcher cannot remove its socket"
    with watch(repo) as second:
        assert _snapshot(repo)["tree"] == fresh_tree(repo)
        assert "served 1 snapshots" in stop_watch(second)


def test_a_repository_deeper_than_a_socket_address_is_still_served(tmp_path: Path) -> None:
    """``sun_path`` holds 108 bytes: the snapshot socket is then reached through its directory's
    descriptor; Pi's extension connects to ``bridge.sock`` by path, so it is not hosted there
    (and the watcher says so)."""
    deep = tmp_path / ("d" * (PATH_MAX - len(str(tmp_path))))
    repo = one_commit_repo(deep / "repo")
    found = find_repository(repo)
    assert found is not None and len(str(snapshot_path(found[1]))) > PATH_MAX
    with watch(repo) as watcher:
        assert serving(*found)
        (repo / "deep.txt").write_text("deep\n")
        assert _snapshot(repo)["tree"] == fresh_tree(repo)
        err = stop_watch(watcher)
    assert "not hosting Pi sessions" in err and "served 1 snapshots" in err


# --- bad and idle clients of the bridge socket -------------------------------------------------


def test_bad_hellos_are_declined_with_an_answer_and_the_watcher_keeps_hosting(repo: Path) -> None:
    watcher = start_watch(repo)
    path = bridge_path(repo / ".git")
    assert _ask(path, b"[" * 200_000 + b"\n") == {"ok": False, "why": "hello too long"}
    assert _ask(path, b"[" * 60_000 + b"\n") == {"ok": False, "why": "unknown hello"}
    assert _ask(path, b"\xff\xfe{}\n") == {"ok": False, "why": "unknown hello"}
    assert _ask(path, b'"bridge"\n') == {"ok": False, "why": "unknown hello"}
    wrong_types = {"v": HELLO_VERSION, "op": "bridge", "root": 5, "gitDir": [], "env": "x"}
    assert _ask(path, json.dumps(wrong_types).encode() + b"\n")["why"] == "another repository"
    assert _ask(path, _hello_line(repo)) == OK
    err = stop_watch(watcher)
    assert "Traceback" not in err and "RecursionError" not in err
    assert (
        "hello too long: 1" in err and "unknown hello: 3" in err and "hosted 1 Pi sessions" in err
    )


def test_idle_connections_cost_no_thread_and_keep_out_no_real_session(repo: Path) -> None:
    watcher = start_watch(repo)
    path = bridge_path(repo / ".git")
    assert _ask(path, _hello_line(repo)) == OK
    time.sleep(0.5)
    before = _threads(watcher.pid)
    with _idle_connections(path, 300):
        time.sleep(1.0)
        during = _threads(watcher.pid)
        assert during <= before + 2, (before, during)  # was one thread per connection
        assert _ask(path, _hello_line(repo)) == OK  # while they wait
    assert _ask(path, _hello_line(repo)) == OK  # and after
    err = stop_watch(watcher)
    assert "hosted 3 Pi sessions" in err and "busy: " in err and "Traceback" not in err


def test_sessions_beyond_the_cap_are_declined_busy(repo: Path) -> None:
    watcher = start_watch(repo)
    path = bridge_path(repo / ".git")
    before = _threads(watcher.pid)
    sessions: list[socket.socket] = []
    answers = []
    try:
        for _ in range(MAX_SESSIONS + 3):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sessions.append(conn)
            conn.settimeout(20)
            conn.connect(str(path))
            conn.sendall(_hello_line(repo))
            answers.append(json.loads(conn.makefile("rb").readline()))
        assert answers.count(OK) == MAX_SESSIONS
        assert answers[MAX_SESSIONS:] == [{"ok": False, "why": "busy"}] * 3
        assert _threads(watcher.pid) <= before + MAX_SESSIONS + 2
    finally:
        for conn in sessions:
            conn.close()
    deadline = time.monotonic() + 30
    while _ask(path, _hello_line(repo)) != OK:  # room again once they end
        assert time.monotonic() < deadline, "sessions were not ended"
        time.sleep(0.1)
    err = stop_watch(watcher)
    busy = int(err.split("busy: ")[1].split()[0])
    assert busy >= 3 and "Traceback" not in err  # (and any retries above while sessions ended)


# --- bad and idle clients of the snapshot socket -----------------------------------------------


def test_bad_requests_and_idle_connections_leave_snapshots_served(repo: Path) -> None:
    watcher = start_watch(repo)
    path = snapshot_path(repo / ".git")
    assert _ask(path, b"[" * 200_000 + b"\n") == {"ok": False, "why": "request too long"}
    assert _ask(path, b"[" * 60_000 + b"\n") == {"ok": False, "why": "unknown request"}
    assert _ask(path, b"\xff\xfe{}\n") == {"ok": False, "why": "unknown request"}
    before = _threads(watcher.pid)
    with _idle_connections(path, 300):
        time.sleep(0.5)
        assert _threads(watcher.pid) <= before + 2
        (repo / "while-idle.txt").write_text("x\n")
        assert _snapshot(repo)["tree"] == fresh_tree(repo)  # served: counted below
    err = stop_watch(watcher)
    assert "served 1 snapshots" in err and "Traceback" not in err
    assert "request too long: 1" in err and "unknown request: 2" in err and "busy: " in err


def test_a_group_writable_umask_still_gives_a_private_dir_only_the_user_may_write(
    tmp_path: Path,
) -> None:
    # With umask 002 (common on shared machines) a private dir made by default rules would be
    # group-writable, and the watcher would refuse to listen there.
    repo = one_commit_repo(tmp_path / "repo")
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "snapshot"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: os.umask(0o002),
    )
    assert proc.returncode == 0, proc.stderr
    private = repo / ".git" / "pi-rewind"
    assert private.stat().st_mode & 0o777 == 0o700
    with watch(repo) as watcher:
        _snapshot(repo)
        assert "served 1 snapshots" in stop_watch(watcher), "the watcher listens there"
