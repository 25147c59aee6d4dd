"""``rewind snapshot`` answered by a running ``rewind serve`` (``--watch`` here; Pi's bridge does
the same): the same snapshot a local capture makes, declined for another environment or user,
one server per repository, real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.bridge.snapshot_socket import find_repository, serving, socket_path
from tests.cli.helpers import run_process
from tests.gitkit import ROOT, fresh_tree, git
from tests.watchkit import start_watch, stop_watch

pytestmark = pytest.mark.needs("peer_credentials")  # served snapshots, hosted sessions


def _run_snapshot(
    repo: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``rewind snapshot ARGS`` as a real process with ``env`` added to ours."""
    return subprocess.run(
        [sys.executable, "-m", "ledger", "snapshot", *args],
        cwd=cwd or repo,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def _snapshot(repo: Path, *, env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    proc = _run_snapshot(repo, "--json", env=env, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _auto_watch(seconds: int) -> None:
    agent = Path(os.environ["PI_CODING_AGENT_DIR"])
    agent.mkdir(parents=True, exist_ok=True)
    rewind = {"snapshot": {"autoWatchSeconds": seconds}}
    (agent / "settings.json").write_text(json.dumps({"rewind": rewind}))


def test_served_snapshots_are_the_exact_work_tree_after_each_change(
    repo: Path, watching: subprocess.Popen[str]
) -> None:
    (repo / "src").mkdir()
    trees = []
    for step in range(4):
        (repo / "src" / f"new-{step}.txt").write_text(f"step {step}\n")
        (repo / "README.md").write_text(f"readme {step}\n")
        if step == 2:
            (repo / "src" / "new-0.txt").unlink()
        payload = _snapshot(repo, cwd=repo / "src")
        assert payload["tree"] == fresh_tree(repo)
        assert git(repo, "rev-parse", f"{payload['commit']}^{{tree}}").strip() == payload["tree"]
        trees.append(payload["tree"])
    again = _snapshot(repo)
    assert again["reused"] is True and again["tree"] == trees[-1]
    assert set(again) == {"commit", "tree", "reused", "skipped", "ms"}
    err = stop_watch(watching, signal.SIGTERM)
    assert "served 5 snapshots" in err and "declined" not in err


def test_text_output_and_skips_are_the_same_as_a_local_capture(
    repo: Path, watching: subprocess.Popen[str]
) -> None:
    (repo / "node_modules").mkdir()
    (repo / "node_modules" / "dep.js").write_text("dep\n")
    served = run_process("snapshot", cwd=repo)
    local = _run_snapshot(repo, env={"REWIND_SERVED": "0"})
    assert served.code == 0 and local.returncode == 0
    strip = lambda out: [ln for ln in out.splitlines() if not ln.startswith("took")]  # noqa: E731
    assert strip(served.out)[2:] == ["skipped  node_modules/ (protected-dir)"]
    assert strip(served.out)[1:] == strip(local.stdout)[1:]
    assert "served 1 snapshots" in stop_watch(watching)


def test_a_client_with_another_git_environment_captures_by_itself(
    repo: Path, watching: subprocess.Popen[str]
) -> None:
    (repo / "ignored.log").write_text("noise\n")
    excludes = repo.parent / "excludes"
    excludes.write_text("*.log\n")
    payload = _snapshot(
        repo,
        env={
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "core.excludesFile",
            "GIT_CONFIG_VALUE_0": str(excludes),
        },
    )
    assert "ignored.log" not in git(repo, "ls-tree", "--name-only", payload["tree"])
    assert "ignored.log" in git(repo, "ls-tree", "--name-only", _snapshot(repo)["tree"])
    err = stop_watch(watching)
    assert "served 1 snapshots" in err and "another environment: 1" in err


def test_another_user_cannot_reach_the_socket(repo: Path, watching: subprocess.Popen[str]) -> None:
    """The socket is a 0600 file in the user's private dir (a second user trying to take the
    repository's place: tests/integration/test_socket_hardening.py)."""
    if os.getuid() != 0 or not Path("/usr/bin/setpriv").exists():
        pytest.skip("needs root and setpriv to connect as another user")
    found = find_repository(repo)
    assert found is not None
    client = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "try:\n    s.connect(sys.argv[1]); print('connected')\n"
        "except OSError as exc:\n    print(type(exc).__name__)\n"
    )
    proc = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            client,
            str(socket_path(found[1])),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert proc.stdout.strip() == "PermissionError", proc
    assert "served 0 snapshots" in stop_watch(watching)


def test_an_answer_the_cli_cannot_print_is_not_used(repo: Path) -> None:
    """A server of another version (or a broken one) answering ``ok`` with other fields: the
    client captures by itself instead of failing."""
    import socket
    import threading

    found = find_repository(repo)
    assert found is not None
    path = socket_path(found[1])
    path.parent.mkdir(mode=0o700, exist_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            report = {"commit": "0" * 40, "tree": "0" * 40}
            conn.sendall(
                json.dumps({"ok": True, "report": report, "warnings": []}).encode() + b"\n"
            )

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        assert _snapshot(repo)["tree"] == fresh_tree(repo)
        thread.join(timeout=30)
        assert not thread.is_alive()  # it was asked, and its answer was not used
    finally:
        server.close()


def test_one_server_per_repository_and_none_outside_git(
    repo: Path, tmp_path: Path, watching: subprocess.Popen[str]
) -> None:
    second = run_process("serve", "--watch", cwd=repo)
    assert second.code == 1
    assert "already serves this repository's snapshots" in second.err and "hint:" in second.err
    plain = tmp_path / "plain"
    plain.mkdir()
    outside = run_process("serve", "--watch", cwd=plain)
    assert outside.code == 1 and "error:" in outside.err and "Traceback" not in outside.err


def test_watch_exits_by_itself_when_idle(repo: Path) -> None:
    # The snapshot's process must reach the watcher before its first idle check: 3 s, not 1,
    # leaves room for a slow process start under load (else the snapshot is taken locally).
    proc = start_watch(repo, "--idle-exit", "3")
    _snapshot(repo)
    started = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "served 1 snapshots" in err
    assert time.monotonic() - started < 20


def test_find_repository_follows_a_worktree_git_file(repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    (linked / "sub").mkdir()
    found = find_repository(linked / "sub")
    assert found == (linked.resolve(), (repo / ".git" / "worktrees" / "linked").resolve())
    assert find_repository(repo) == (repo.resolve(), (repo / ".git").resolve())
    assert socket_path(found[1]) != socket_path((repo / ".git").resolve())


def test_auto_watch_setting_starts_a_watcher_that_serves_the_next_snapshots(
    repo: Path,
) -> None:
    # Each command below must reach the watcher before it has been idle this long: 6 s, not 3,
    # leaves room for slow process starts under load (a watcher that ended in between is
    # started again, and says so).
    _auto_watch(6)
    found = find_repository(repo)
    assert found is not None
    first = _run_snapshot(repo, "--json", env={"REWIND_FEED_VERIFY": "0"})
    assert first.returncode == 0, first.stderr
    assert "watching" in first.stderr and "autoWatchSeconds" in first.stderr
    deadline = time.monotonic() + 60
    while not serving(*found):
        assert time.monotonic() < deadline, "no watcher started"
        time.sleep(0.05)
    (repo / "later.txt").write_text("later\n")
    served = _run_snapshot(repo, "--json")
    assert served.returncode == 0 and "watching" not in served.stderr  # served: none started
    assert json.loads(served.stdout)["tree"] == fresh_tree(repo)
    local = run_process("snapshot", cwd=repo)  # also served; REWIND_SERVED=0 never starts one
    assert local.code == 0 and "watching" not in local.err
    # Another git environment: declined, captured here, and no second watcher is started.
    declined = _run_snapshot(repo, env={"GIT_CONFIG_COUNT": "0", "EMAIL": "x@y"})
    assert declined.returncode == 0 and "watching" not in declined.stderr
    deadline = time.monotonic() + 60
    while serving(*found):  # the watcher ends by itself when idle
        assert time.monotonic() < deadline, "the watcher did not end when idle"
        time.sleep(0.2)


def test_auto_watch_is_off_by_default_and_with_rewind_served_0(repo: Path) -> None:
    found = find_repository(repo)
    assert found is not None
    assert "watching" not in run_process("snapshot", cwd=repo).err
    _auto_watch(3)
    proc = _run_snapshot(repo, env={"REWIND_SERVED": "0"})
    assert proc.returncode == 0 and "watching" not in proc.stderr
    time.sleep(0.5)
    assert not serving(*found)
