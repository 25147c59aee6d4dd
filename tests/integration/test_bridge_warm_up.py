"""Once ``session_start`` is answered, a bridge with a UI prepares the session's first
``/rewind`` in the background (ledger/bridge/warm_up.py, issue 34): its change feed takes its
base scan (so the first capture is fed, not a full scan), and the list's neighbouring diffs are
kept on disk. Print mode prepares nothing. Real ``rewind serve --stdio`` processes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ledger.engine.kept_diffs import FILE_NAME
from tests.bridgekit import FakePi

TIMEOUT_S = 20.0


def _wait_for(found: object, timeout: float = TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def _session(repo: Path, agent: Path, prompts: int = 4) -> FakePi:
    pi = FakePi(repo, agent)
    pi.event("session_start", {"reason": "startup"})
    for n in range(prompts):
        pi.prompt(f"prompt {n}", lambda n=n: (repo / f"f{n}.txt").write_text(f"{n}\n"))
    pi.write_file()
    pi.close()
    return pi


def _resume(repo: Path, agent: Path, built: FakePi, *, has_ui: bool = True) -> FakePi:
    pi = FakePi(repo, agent, entries=built.entries, session_file=built.session_file)
    pi.header = built.header
    pi._ids = built._ids + 1000
    pi.has_ui = has_ui
    return pi


@pytest.mark.needs("change_feed")  # the base scan is the feed's
def test_the_first_capture_of_a_fresh_bridge_is_fed(repo: Path, tmp_path: Path) -> None:
    built = _session(repo, tmp_path / "agent")
    private = repo / ".git" / "pi-rewind"
    state = private / "capture-state.json"
    before = state.stat().st_mtime_ns
    (private / "feed-status.json").unlink(missing_ok=True)
    pi = _resume(repo, tmp_path / "agent", built)
    pi.event("session_start", {"reason": "resume"})
    # No capture asked for: the base scan is the bridge's own, in the background.
    assert _wait_for(lambda: state.stat().st_mtime_ns != before), "no base scan was taken"
    time.sleep(0.3)  # the scan's last writes
    reply = pi.event("rewind_list")
    assert reply.error is None
    pi.close()
    status = json.loads((private / "feed-status.json").read_text())
    # One full scan, the base (counted as "no base scan yet" by the feed); the list's fed.
    assert status["full"] == 1 and status["fed"] >= 1, status


def test_a_fresh_bridge_keeps_the_lists_diffs_before_the_first_list(
    repo: Path, tmp_path: Path
) -> None:
    built = _session(repo, tmp_path / "agent")
    kept = repo / ".git" / "pi-rewind" / FILE_NAME
    kept.unlink(missing_ok=True)
    pi = _resume(repo, tmp_path / "agent", built)
    pi.event("session_start", {"reason": "resume"})
    try:
        assert _wait_for(lambda: kept.exists() and kept.stat().st_size > 100)
    finally:
        pi.close()


def test_print_mode_prepares_nothing(repo: Path, tmp_path: Path) -> None:
    built = _session(repo, tmp_path / "agent")
    kept = repo / ".git" / "pi-rewind" / FILE_NAME
    kept.unlink(missing_ok=True)
    pi = _resume(repo, tmp_path / "agent", built, has_ui=False)
    pi.event("session_start", {"reason": "resume"})
    time.sleep(1.5)
    pi.close()
    assert not kept.exists()
