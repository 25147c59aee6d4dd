"""``rewind restore``, ``undo``, ``diff`` and ``status`` run by the repository's running watcher
(docs/capture.md#served-commands): real processes, the same output, exit status and files as in
a process of their own; a command that would wait runs in its own process; other commands'
captures answered by the watcher; one scan per restore without a watcher."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.demo import DemoWorld, build_world, run_prompts
from tests.gitkit import ROOT, git_call_log
from tests.watchkit import start_watch, stop_watch

pytestmark = pytest.mark.needs("peer_credentials")  # served captures


def _world(root: Path) -> DemoWorld:
    return run_prompts(build_world(root))


def _files(repo: Path) -> dict[str, str]:
    return {
        str(p.relative_to(repo)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def _env(**extra: str) -> dict[str, str]:
    """Ours, as the watchers of these tests have it (start_watch adds the same two)."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "REWIND_FEED_VERIFY": "0", **extra}


def _process(
    world: DemoWorld, *args: str, env: dict[str, str], **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """``rewind --agent-dir AGENT ARGS`` as a real process in the world's repository."""
    options: dict[str, object] = {"capture_output": True, **kwargs}
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(world.agent_dir), *args],
        cwd=world.repo,
        text=True,
        timeout=120,
        env=env,
        **options,
    )


def _rewind(world: DemoWorld, *args: str, served: bool = True) -> dict:
    env = _env() if served else _env(REWIND_SERVED="0")
    proc = _process(world, *args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout
    result: dict = lines[0]
    return result


def _steps(world: DemoWorld, *, served: bool) -> list[tuple[dict, dict[str, str]]]:
    """restore, undo, diff, status; each command's output and the files after it."""
    (world.repo / "hello.py").write_text("edited by hand before the rewind\n")
    out = []
    for args in (
        ("diff", "@", world.users[1]),
        ("status", "@"),
        ("restore", "@", world.users[1], "--mode", "files", "--yes"),
        ("status", "@"),
        ("undo", "@", "--yes"),
        ("diff", "@", world.users[0]),
    ):
        result = _rewind(world, *args, served=served)
        text = json.dumps(result, sort_keys=True)
        for i, entry in enumerate([*world.users, *world.assistants]):
            text = text.replace(entry, f"<entry {i}>")
        text = re.sub(r"[0-9a-f]{40}", "<sha>", text.replace(world.session.stem, "<session>"))
        text = re.sub(r'"(ms|record|leaf|session|at|time|timestamp)": [^,}]+', r'"\1": "_"', text)
        text = re.sub(r'"entry": "[0-9a-f]{8}"', '"entry": "<record>"', text)
        out.append((json.loads(text), _files(world.repo)))
    return out


def _count(stderr: str, pattern: str) -> int:
    found = re.search(pattern, stderr)
    return int(found.group(1)) if found else 0


def test_restore_undo_diff_and_status_run_by_the_watcher_give_what_they_give_alone(
    tmp_path: Path,
) -> None:
    local = _steps(_world(tmp_path / "local"), served=False)
    world = _world(tmp_path / "served")
    watcher = start_watch(world.repo)
    try:
        served = _steps(world, served=True)
    finally:
        err = stop_watch(watcher, signal.SIGTERM)
    assert served == local
    assert "declined" not in err, err
    assert _count(err, r"commands asked of this watcher: served: (\d+)") == 6, err


def test_a_command_the_watcher_does_not_run_has_its_captures_served(tmp_path: Path) -> None:
    world = _world(tmp_path / "w")
    (world.repo / "hello.py").write_text("edited by hand\n")
    watcher = start_watch(world.repo)
    try:
        checkpoint = _rewind(world, "checkpoint", "@")
    finally:
        err = stop_watch(watcher, signal.SIGTERM)
    assert checkpoint["commit"]
    assert _count(err, r"served \d+ snapshots and (\d+) captures") == 1, err


def test_a_served_command_that_would_wait_for_a_turn_runs_in_its_own_process(
    tmp_path: Path,
) -> None:
    world = _world(tmp_path / "w")
    (world.repo / "hello.py").write_text("edited by hand\n")
    before = _files(world.repo)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "REWIND_FEED_VERIFY": "0",
        "REWIND_TURN_WAIT": "1",
    }
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from ledger.turngate import TurnGate; "
            f"g = TurnGate(Path({str(world.repo / '.git')!r})); assert g.begin_turn(timeout_s=10); "
            "print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        env=env,
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    watcher = start_watch(world.repo, env=env)
    try:
        proc = _process(world, "restore", "@", world.users[1], "--mode", "files", "--yes", env=env)
    finally:
        holder.kill()
        holder.wait()
        err = stop_watch(watcher, signal.SIGTERM)
    # Its own process showed the wait (and Ctrl-C would have cancelled it), then refused.
    assert proc.returncode == 1, proc.stderr
    assert "waiting for it to end before writing files" in proc.stderr
    assert _files(world.repo) == before
    assert _count(err, r"would wait: (\d+)") == 1, err


def test_another_environment_or_umask_runs_the_command_in_its_own_process(
    tmp_path: Path,
) -> None:
    world = _world(tmp_path / "w")
    watcher = start_watch(world.repo)
    try:
        env = _env()
        other_env = _process(world, "status", "@", env=_env(GIT_AUTHOR_NAME="someone else"))
        other_umask = subprocess.run(
            ["sh", "-c", 'umask 077 && exec "$@"', "sh", sys.executable, "-m", "ledger"]
            + ["--agent-dir", str(world.agent_dir), "status", "@"],
            cwd=world.repo,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    finally:
        err = stop_watch(watcher, signal.SIGTERM)
    assert other_env.returncode == 0 and other_umask.returncode == 0
    assert "latest rewind point" in other_env.stdout and "latest rewind point" in other_umask.stdout
    assert "another environment: 1" in err and "another umask: 1" in err, err
    assert "commands asked of this watcher" not in err, err


def _git_shim(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``git`` logs each of its subcommands, then runs the real one."""
    shim, log = git_call_log(tmp_path)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "REWIND_SERVED": "0",
        "PATH": f"{shim}:{os.environ['PATH']}",
    }
    return env, log


@pytest.mark.parametrize("command", ["restore", "undo"])
def test_without_a_watcher_a_restore_or_undo_scans_the_work_tree_once(
    tmp_path: Path, command: str
) -> None:
    world = _world(tmp_path / "w")
    (world.repo / "hello.py").write_text("edited by hand before the rewind\n")
    _rewind(world, "restore", "@", world.users[1], "--mode", "files", "--yes", served=False)
    (world.repo / "hello.py").write_text("edited by hand after the rewind\n")
    env, log = _git_shim(tmp_path)
    args = (
        ["restore", "@", world.users[0], "--mode", "files"]
        if command == "restore"
        else ["undo", "@"]
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(world.agent_dir), *args, "--yes"],
        cwd=world.repo,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().split()
    assert calls.count("status") == 1, calls


def test_a_command_nobody_served_starts_a_watcher_for_the_next_ones(tmp_path: Path) -> None:
    """``rewind.snapshot.autoWatchSeconds`` (here through ``$REWIND_AUTO_WATCH``): a command
    that ran in its own process leaves a watcher in the background, never waited for."""
    from ledger.bridge.snapshot_socket import serving

    world = _world(tmp_path / "w")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REWIND_AUTO_WATCH": "30"}
    first = _process(world, "status", "@", env=env)
    try:
        assert first.returncode == 0, first.stderr
        assert "watching" in first.stderr and "in the background" in first.stderr
        git_dir = world.repo / ".git"
        for _ in range(100):
            if serving(world.repo, git_dir):
                break
            time.sleep(0.1)
        assert serving(world.repo, git_dir), "no watcher serves the repository"
    finally:
        subprocess.run(
            [sys.executable, "-m", "ledger", "serve", "--stop"],
            cwd=world.repo,
            capture_output=True,
            timeout=60,
            env=env,
        )


def _combined(world: DemoWorld, *args: str, served: bool) -> str:
    env = _env() if served else _env(REWIND_SERVED="0")
    proc = _process(
        world,
        *args,
        env=env,
        capture_output=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream: the order of warnings and output shows
    )
    assert proc.returncode == 0, proc.stdout
    text = proc.stdout
    for i, entry in enumerate([*world.users, *world.assistants]):
        text = text.replace(entry, f"<entry {i}>")
    return re.sub(r"\b[0-9a-f]{8,40}\b", "<id>", text)


def test_warnings_and_output_come_in_the_order_they_were_written(tmp_path: Path) -> None:
    outputs = []
    for served in (False, True):
        world = _world(tmp_path / f"w{int(served)}")
        subprocess.run(["git", "checkout", "-q", "-b", "elsewhere"], cwd=world.repo, check=True)
        (world.repo / "hello.py").write_text("edited by hand\n")
        watcher = start_watch(world.repo) if served else None
        try:
            outputs.append(
                _combined(
                    world, "restore", "@", world.users[1], "--mode", "files", "--yes", served=served
                )
            )
        finally:
            if watcher is not None:
                err = stop_watch(watcher, signal.SIGTERM)
                assert "served: 1" in err, err
    local, served_text = outputs
    assert "you are on branch elsewhere" in local
    assert served_text == local


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_served_restore_never_asks_on_the_watchers_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watcher started in a terminal has a terminal on stdin and stderr; a command it runs for
    a client must still answer as the client's own process would without one: confirmation
    required, nothing changed (the client asks only when it would not ask itself)."""
    from ledger.cli import run_served_command

    world = _world(tmp_path / "w")
    (world.repo / "hello.py").write_text("edited by hand\n")
    before = _files(world.repo)
    monkeypatch.setattr(sys, "stdin", _Terminal("y\n"))
    monkeypatch.setattr(sys, "stderr", _Terminal())
    out, err = io.StringIO(), io.StringIO()
    argv = ["--agent-dir", str(world.agent_dir), "restore", "@", world.users[1], "--mode", "files"]
    code = run_served_command(argv, world.repo, out, err)
    assert code == 1, err.getvalue()
    assert "pass --yes to confirm" in err.getvalue()
    assert _files(world.repo) == before
    assert sys.stdin.read() == "y\n", "the watcher's stdin was read"


def test_a_reader_that_went_away_is_no_error_served_or_not(tmp_path: Path) -> None:
    """``rewind diff … | head``: the pipe closes before the output is written."""
    world = _world(tmp_path / "w")
    watcher = start_watch(world.repo)
    try:
        for served in (True, False):
            read, write = os.pipe()
            os.close(read)  # the reader is gone before anything is written
            env = _env() if served else _env(REWIND_SERVED="0")
            try:
                proc = _process(
                    world,
                    "diff",
                    "@",
                    world.users[0],
                    env=env,
                    capture_output=False,
                    stdout=write,
                    stderr=subprocess.PIPE,
                )
            finally:
                os.close(write)
            assert proc.returncode == 0, proc.stderr
            assert "Traceback" not in proc.stderr and "error" not in proc.stderr
    finally:
        err = stop_watch(watcher, signal.SIGTERM)
    assert "served: 1" in err, err


def test_a_client_that_gave_up_before_go_never_has_its_command_run(tmp_path: Path) -> None:
    """The watcher accepted the command, but its client left before saying ``go`` (it will
    run the command itself): the watcher runs nothing."""
    import json as json_module

    from ledger.bridge.private_socket import connect_private
    from ledger.bridge.session_env import bridge_env
    from ledger.cli.served import current_umask

    world = _world(tmp_path / "w")
    (world.repo / "hello.py").write_text("edited by hand\n")
    before = _files(world.repo)
    watcher = start_watch(world.repo)
    try:
        conn = connect_private(world.repo / ".git" / "pi-rewind" / "bridge.sock", 5.0)
        assert not isinstance(conn, str), conn
        argv = ["--agent-dir", str(world.agent_dir), "restore", "@", world.users[1]]
        hello = {
            "v": 1,
            "op": "command",
            "command": "restore",
            "root": str(world.repo),
            "gitDir": str(world.repo / ".git"),
            "env": bridge_env(_env()),
            "argv": [*argv, "--mode", "files", "--yes"],
            "cwd": str(world.repo),
            "umask": current_umask(),
        }
        with conn:
            conn.sendall(json_module.dumps(hello).encode() + b"\n")
            assert conn.makefile("rb").readline() == b'{"ok": true}\n'
        time.sleep(0.5)
    finally:
        err = stop_watch(watcher, signal.SIGTERM)
    assert "no go: 1" in err, err
    assert _files(world.repo) == before


def test_a_program_calling_main_never_leaves_a_watcher_behind(tmp_path: Path) -> None:
    """``rewind demo`` and other programs call ``main()``: no background process, whatever
    ``autoWatchSeconds`` says (only a real ``rewind`` process starts one)."""
    from ledger.bridge.snapshot_socket import serving

    world = _world(tmp_path / "w")
    script = (
        "import sys\nfrom ledger.cli import main\n"
        f"for argv in (['snapshot'], ['status', '@']):\n"
        f"    assert main(['--agent-dir', {str(world.agent_dir)!r}, *argv]) == 0\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REWIND_AUTO_WATCH": "30"}
    subprocess.run([sys.executable, "-c", script], cwd=world.repo, env=env, check=True, timeout=120)
    time.sleep(1.0)
    assert not serving(world.repo, world.repo / ".git")
