"""The memory of one-shot commands a watcher serves is released once they stop coming, not after
each (ledger/bridge/hosted.py, ``_release_soon``): a full collection of a watcher holding a large
tree costs tens of milliseconds with the GIL held, and the next command waited for it."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from ledger.bridge import hosted as hosted_module
from ledger.bridge.hosted import HostedSessions
from ledger.cli.served import run_by_watcher

pytestmark = pytest.mark.needs("peer_credentials")  # no served commands without them


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Unix sockets")
def test_commands_in_a_row_release_their_memory_once_after_the_last(
    repo: Path,
    isolated_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = isolated_env / ".pi" / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))  # the hello's environment is ours
    monkeypatch.setenv("REWIND_AUTO_WATCH", "0")
    monkeypatch.chdir(repo)
    released: list[float] = []
    monkeypatch.setattr(hosted_module, "release_memory", lambda: released.append(time.monotonic()))
    monkeypatch.setattr(hosted_module, "RELEASE_AFTER_S", 1.0)
    # When each command's end asks for the release (its timer starts right after): the delay
    # is measured from there, not from when this thread, perhaps slowed by a loaded machine,
    # got to look.
    asked: list[float] = []
    release_soon = HostedSessions._release_soon

    def noted(self: HostedSessions) -> None:
        asked.append(time.monotonic())
        release_soon(self)

    monkeypatch.setattr(HostedSessions, "_release_soon", noted)
    hosted = HostedSessions(repo, repo / ".git")
    assert hosted.start(), hosted.refusal
    try:
        for _ in range(3):
            assert run_by_watcher(["--json", "status"]) is not None
            for thread in [t for t in threading.enumerate() if t.name == "rewind-hosted-session"]:
                thread.join(timeout=30)
        assert released == []  # none right after a command: the next one would wait for it
        assert hosted.commands == {"served": 3} and len(asked) == 3
        deadline = time.monotonic() + 30
        while not released and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        assert len(released) == 1, "once, after the last"
        assert released[0] >= asked[-1] + 1.0
    finally:
        hosted.close()
    capsys.readouterr()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Unix sockets")
def test_a_watcher_stopping_releases_nothing_more_later(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = isolated_env / ".pi" / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("REWIND_AUTO_WATCH", "0")
    monkeypatch.chdir(repo)
    released: list[float] = []
    monkeypatch.setattr(hosted_module, "release_memory", lambda: released.append(time.monotonic()))
    monkeypatch.setattr(hosted_module, "RELEASE_AFTER_S", 0.3)
    hosted = HostedSessions(repo, repo / ".git")
    assert hosted.start(), hosted.refusal
    try:
        assert run_by_watcher(["--json", "status"]) is not None
        for thread in [t for t in threading.enumerate() if t.name == "rewind-hosted-session"]:
            thread.join(timeout=30)
    finally:
        hosted.close()
    closed = time.monotonic()
    time.sleep(0.8)
    # (One due before the stop, on a machine slow to get there, is no release "later".)
    assert [at for at in released if at > closed] == []
    assert not [
        t for t in threading.enumerate() if t.name == "rewind-release-memory" and t.is_alive()
    ]
