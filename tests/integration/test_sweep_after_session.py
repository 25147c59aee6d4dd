"""A ``pi -p`` run's shutdown sweep runs once the run is over, off Pi's path, where someone runs
it then (ledger/retention/after_session.py, docs/design.md#when-sweeps-run): the watcher the
bridge starts for the later runs, when the session file holds the session, or the watcher that
hosts the session; else the shutdown answer sweeps, as before. Real bridges, a real watcher, a
real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.bridge.hosted import socket_path
from ledger.bridge.snapshot_socket import find_repository, serving
from ledger.git.repo import GitRepo
from ledger.git.store.chain import Store
from tests.bridgekit import FakePi, prompts_stay_exact
from tests.gitkit import ROOT
from tests.watchkit import start_watch, stop_watch


def _snapshots(repo: Path) -> set[str]:
    return set(Store(GitRepo.discover(repo)).snapshots())


def _wait(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _watcher_argv(repo: Path) -> list[str] | None:
    """The argv of the watcher running in ``repo`` (None: none runs)."""
    here = os.path.realpath(repo)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"--watch" in argv and os.readlink(f"/proc/{pid}/cwd") == here:
                return [part.decode() for part in argv if part]
        except OSError:
            continue
    return None


def _stop_watcher(repo: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "ledger", "serve", "--stop"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _keep_one(isolated_env: Path) -> Path:
    agent = isolated_env / ".pi" / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "settings.json").write_text(json.dumps({"rewind": {"retention": {"maxSnapshots": 1}}}))
    return agent


def _print_run(
    repo: Path,
    isolated_env: Path,
    *,
    written: bool,
    deferred: bool,
    hosted: Path | None = None,
) -> tuple[FakePi, set[str]]:
    """A pi -p session of three prompts, retention keeping one snapshot; its store before the
    end. ``written``: Pi wrote the session file (it does once the model has answered);
    ``deferred``: the shutdown answer is expected to sweep nothing (else: to sweep);
    ``hosted``: the watcher's bridge socket to connect to."""
    pi = FakePi(repo, _keep_one(isolated_env), hosted=hosted)
    pi.has_ui = False
    assert pi.event("session_start", {"reason": "startup"}).error is None
    prompts_stay_exact(pi, 3, "print")
    if written:
        pi.write_file()
    before = _snapshots(repo)
    assert len(before) > 2, "no startup sweep"
    reply = pi.event("session_shutdown", {"reason": "quit"})
    assert reply.error is None
    if deferred:
        assert _snapshots(repo) == before, "the answer Pi waits for swept nothing"
    else:
        assert len(_snapshots(repo)) <= 2, "nobody to hand it to: the answer swept, as ever"
    return pi, before


def test_without_a_watcher_to_start_the_shutdown_answer_sweeps_as_before(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody would run the sweep after the run: the answer sweeps (a bridge's own exit after
    its input ended is given only seconds by the extension before it is killed)."""
    monkeypatch.setenv("REWIND_AUTO_WATCH", "0")
    pi, before = _print_run(repo, isolated_env, written=True, deferred=False)
    assert pi.close() == 0
    assert _snapshots(repo) < before
    assert _watcher_argv(repo) is None


@pytest.mark.needs("peer_credentials")  # a watcher to start
def test_the_watcher_started_for_later_runs_sweeps_from_the_session_file(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REWIND_AUTO_WATCH", raising=False)
    found = find_repository(repo)
    assert found is not None
    pi, before = _print_run(repo, isolated_env, written=True, deferred=True)
    assert not serving(*found), "no watcher during the run"
    try:
        assert pi.close() == 0
        _wait(lambda: _watcher_argv(repo) is not None, "the watcher for later runs")
        argv = _watcher_argv(repo)
        assert argv is not None
        assert argv[argv.index("--sweep-session") + 1] == str(pi.session_file), argv
        assert argv[argv.index("--sweep-agent-dir") + 1] == str(pi.agent_dir), argv
        _wait(lambda: len(_snapshots(repo)) <= 2, "the watcher to sweep")
        assert _snapshots(repo) < before
        _wait(lambda: serving(*found), "the watcher to serve after its sweep")
    finally:
        _stop_watcher(repo)


@pytest.mark.needs("peer_credentials")  # a watcher to start
def test_a_session_file_without_the_session_is_swept_in_the_shutdown_answer(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pi had not written the session (no file here): the watcher could not read it, so the
    answer sweeps from the entries the bridge mirrored, and the watcher gets no sweep."""
    monkeypatch.delenv("REWIND_AUTO_WATCH", raising=False)
    pi, before = _print_run(repo, isolated_env, written=False, deferred=False)
    assert not pi.session_file.exists()
    try:
        assert pi.close() == 0
        assert _snapshots(repo) < before
        _wait(lambda: _watcher_argv(repo) is not None, "the watcher for later runs")
        assert "--sweep-session" not in (_watcher_argv(repo) or [])
    finally:
        _stop_watcher(repo)


@pytest.mark.needs("peer_credentials")
def test_a_session_hosted_by_the_watcher_is_swept_there_once_pi_has_let_go(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later pi -p run, hosted by the watcher: no sweep beside its captures or in its
    shutdown answer; the watcher's session thread sweeps once the connection is closed."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the watcher's environment, for hosting
    monkeypatch.setenv("REWIND_FEED_VERIFY", "0")
    agent = _keep_one(isolated_env)
    watcher = start_watch(repo, env={**os.environ, "PI_CODING_AGENT_DIR": str(agent)})
    try:
        pi, before = _print_run(
            repo, isolated_env, written=False, deferred=True, hosted=socket_path(repo / ".git")
        )
        assert pi.close() == 0
        _wait(lambda: len(_snapshots(repo)) <= 2, "the watcher to sweep after the session")
        assert _snapshots(repo) < before
    finally:
        err = stop_watch(watcher)
    assert "hosted 1 Pi sessions" in err, err
