"""A bridge (``rewind serve --stdio``) sends its captures to the repository's watcher
(``rewind serve --watch``) and gets the same trees back; it falls back to its own feed when the
watcher is gone or declines, and ``rewind.snapshot.autoWatchSeconds`` starts a shared watcher.
Real processes throughout (docs/capture.md#shared-watcher)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.bridge.snapshot_socket import find_repository, serving
from ledger.engine import messages as M
from ledger.records import TURN
from tests.bridgekit import FakePi, prompts_stay_exact
from tests.gitkit import git
from tests.watchkit import stop_watch

pytestmark = pytest.mark.needs("peer_credentials")  # served snapshots, hosted sessions


def _bridge(repo: Path, isolated_env: Path) -> FakePi:
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    assert pi.event("session_start", {"reason": "startup"}).error is None
    return pi


def _served_counts(err: str) -> tuple[int, int]:
    words = err.split("rewind: served ")[1].split()
    return int(words[0]), int(words[3])


def _wait(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_bridge_sends_its_captures_to_the_running_watcher_and_stays_exact(
    repo: Path, isolated_env: Path, watching: subprocess.Popen[str]
) -> None:
    pi = _bridge(repo, isolated_env)
    prompts_stay_exact(pi, 3, "fed")
    assert pi.close() == 0
    snapshots, captures = _served_counts(stop_watch(watching))
    assert snapshots == 0 and captures >= 6, "two captures per prompt went to the watcher"


def test_a_restore_captures_in_the_bridge_and_the_watcher_still_serves_the_next_prompts(
    repo: Path, isolated_env: Path, watching: subprocess.Popen[str]
) -> None:
    """A restore holds the private index's lock while it captures (the undo point, the check
    after writing): those captures stay in the bridge, since the watcher would wait for that
    very lock. Delegation goes on afterwards."""
    pi = _bridge(repo, isolated_env)
    prompts = [
        pi.prompt(f"write {n}", lambda n=n: (repo / "a.txt").write_text(f"{n}\n")) for n in range(3)
    ]
    reply = pi.navigate(prompts[1][1], M.TREE_RESTORE)
    assert {"level": "info", "text": M.FILES_RESTORED_TO_POINT} in reply.notices
    assert (repo / "a.txt").read_text() == "1\n"
    prompts_stay_exact(pi, 2, "after-restore")
    assert pi.close() == 0
    err = stop_watch(watching)
    assert "declined" not in err, err
    assert _served_counts(err)[1] >= 10, "the prompts' captures, before and after the restore"


def test_a_bridge_whose_watcher_is_gone_runs_its_own_feed_and_serves_snapshots(
    repo: Path, isolated_env: Path, watching: subprocess.Popen[str]
) -> None:
    pi = _bridge(repo, isolated_env)
    prompts_stay_exact(pi, 1, "before")
    watching.kill()
    watching.communicate(timeout=30)
    prompts_stay_exact(pi, 2, "after")
    found = find_repository(repo)
    assert found is not None
    _wait(lambda: serving(*found), "the bridge to serve snapshots itself")
    pi.close()


def test_a_watcher_in_another_git_environment_is_not_used(
    repo: Path, isolated_env: Path, watching: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "noise.log").write_text("noise\n")
    excludes = repo.parent / "excludes"
    excludes.write_text("*.log\n")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.excludesFile")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(excludes))
    pi = _bridge(repo, isolated_env)  # the bridge sees the variables, the watcher does not
    prompts_stay_exact(pi, 2, "env")
    last = pi.custom(TURN)[-1]["snapshots"][-1]
    assert "noise.log" not in git(repo, "ls-tree", "--name-only", last)
    pi.close()
    err = stop_watch(watching)
    assert _served_counts(err) == (0, 0) and "another environment: 1" in err


def test_auto_watch_starts_a_shared_watcher_that_outlives_the_bridge(
    repo: Path, isolated_env: Path
) -> None:
    agent = isolated_env / ".pi" / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "settings.json").write_text(
        json.dumps({"rewind": {"snapshot": {"autoWatchSeconds": 3}}})
    )
    found = find_repository(repo)
    assert found is not None
    first = _bridge(repo, isolated_env)
    _wait(lambda: serving(*found), "the bridge to start a watcher")
    prompts_stay_exact(first, 2, "first")
    assert first.close() == 0
    assert serving(*found), "the watcher outlives the bridge"
    second = _bridge(repo, isolated_env)
    prompts_stay_exact(second, 2, "second")
    assert second.close() == 0
    _wait(lambda: not serving(*found), "the idle watcher to end by itself")


def test_a_bridge_with_its_own_feed_writes_its_final_counts_before_it_ends(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bridge skips the interpreter's teardown at exit: what it writes at the end is there."""
    monkeypatch.setenv("REWIND_SERVED", "0")  # no watcher: the bridge runs its own feed
    pi = _bridge(repo, isolated_env)
    prompts_stay_exact(pi, 3, "own")
    status_file = repo / ".git" / "pi-rewind" / "feed-status.json"
    status_file.unlink(missing_ok=True)
    assert pi.close() == 0
    status = json.loads(status_file.read_text())
    assert status["fed"] + status["full"] >= 1 and status["mode"] != "full-scan", status


def test_in_print_mode_a_bridge_without_a_watcher_feeds_its_turns_from_its_own_walk_and_stays_exact(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pi -p`` (no UI): the bridge's own feed starts its walk right after the first answer
    (issue 34: each capture of a print-mode prompt was a full scan). Once the walk is over, a
    scan is the base and the later captures are fed; every one stays exact; nothing serves
    ``rewind snapshot`` (no snapshot service in print mode)."""
    monkeypatch.setenv("REWIND_SERVED", "0")
    status_file = repo / ".git" / "pi-rewind" / "feed-status.json"
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    pi.has_ui = False
    assert pi.event("session_start", {"reason": "startup"}).error is None
    prompts_stay_exact(pi, 3, "print")
    found = find_repository(repo)
    assert found is not None and not serving(*found)
    assert pi.close() == 0
    status = json.loads(status_file.read_text())
    assert status["fed"] >= 2 and status["mode"] == "fed", status


def test_the_first_print_mode_bridge_of_the_day_starts_the_watcher_and_feeds_its_own_turns(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By default (autoWatchSeconds) the first ``pi -p`` starts the repository's watcher for
    the later runs and never waits on it: once the run is over, so that its imports, walk and
    first scan do not take the cores the run needs. The run's own captures come from its own
    feed (a new watcher's first capture would be a full scan), exact."""
    monkeypatch.delenv("REWIND_AUTO_WATCH")
    found = find_repository(repo)
    assert found is not None
    status_file = repo / ".git" / "pi-rewind" / "feed-status.json"
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    pi.has_ui = False
    assert pi.event("session_start", {"reason": "startup"}).error is None
    prompts_stay_exact(pi, 3, "first")
    assert not serving(*found), "no watcher competes with the run"
    status_file.unlink(missing_ok=True)
    assert pi.close() == 0
    status = json.loads(status_file.read_text())
    assert status["fed"] >= 2 and status["mode"] == "fed", status
    _wait(lambda: serving(*found), "the print-mode bridge to start a watcher as it ends")
    stop = subprocess.run(
        [sys.executable, "-m", "ledger", "serve", "--stop"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stop.returncode == 0 and "stopped the watcher" in stop.stdout, stop.stderr
    assert not serving(*found)


def test_a_first_capture_the_watcher_refuses_is_a_warning_with_its_hint_and_delegation_goes_on(
    repo: Path, isolated_env: Path, watching: subprocess.Popen[str]
) -> None:
    # The bridge's own first-capture limit travels with its capture request; the watcher's
    # refusal is the one a local capture would give, not a broken watcher.
    settings = isolated_env / ".pi" / "agent" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"rewind": {"snapshot": {"firstCaptureMaxFiles": 20}}}))
    (repo / "data").mkdir()
    for n in range(30):
        (repo / "data" / f"{n}.bin").write_text(f"{n}\n")
    pi = _bridge(repo, isolated_env)
    pi.event("before_agent_start", {"prompt": "first"})
    reply = pi.event("turn_start", {"turnIndex": 0})
    (warning,) = [n["text"] for n in reply.notices if n["level"] == "warning"]
    assert "a first snapshot of" in warning and "data/ (30 files" in warning
    assert "ignore them in .gitignore" in warning, "the hint comes along"
    pi.user("first")
    pi.assistant("done")
    pi.event("turn_end", {"turnIndex": 0, "role": "assistant"})
    pi.event("agent_end", {})
    (repo / ".gitignore").write_text("data/\n")
    prompts_stay_exact(pi, 1, "after")
    assert pi.close() == 0
    err = stop_watch(watching)
    assert _served_counts(err)[1] >= 2, "later captures still went to the watcher"


def test_by_default_the_first_bridge_starts_a_watcher_that_serves_the_next_and_stops_on_demand(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fast without configuration (issue 26): no settings file, no REWIND_AUTO_WATCH.
    monkeypatch.delenv("REWIND_AUTO_WATCH")
    found = find_repository(repo)
    assert found is not None
    first = _bridge(repo, isolated_env)
    _wait(lambda: serving(*found), "the first bridge to start a watcher by default")
    prompts_stay_exact(first, 1, "first")
    assert first.close() == 0
    assert serving(*found), "the watcher outlives the bridge (idle exit: ten minutes)"
    status = json.loads(
        subprocess.run(
            [sys.executable, "-m", "ledger", "serve", "--status", "--json"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )
    assert status["kind"] == "watcher" and status["hosting"]
    second = _bridge(repo, isolated_env)
    prompts_stay_exact(second, 1, "second")
    assert second.close() == 0
    stop = subprocess.run(
        [sys.executable, "-m", "ledger", "serve", "--stop"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stop.returncode == 0 and "stopped the watcher" in stop.stdout, stop.stderr
    assert not serving(*found)
