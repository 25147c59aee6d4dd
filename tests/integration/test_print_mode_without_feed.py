"""A ``pi -p`` bridge where the machine has no change feed (macOS; ``REWIND_PORTABLE=1``) never
loads the feed (ledger/cli/serve.py ``_print_mode_feed``).

The feed could only report itself off there, and its module, loaded in a background thread,
took the GIL from the prompt's own captures; it was also that thread's half-imported module
that once cost a prompt its pre-prompt point (ledger/loaded_modules.py). A launcher runs the
real bridge and writes, after each answer, whether the feed's import has started; a print-mode
run with a change feed shows the launcher sees it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.bridgekit import FakePi, prompts_stay_exact

_LAUNCHER = """
import sys
out = sys.argv.pop(1)
import ledger.bridge.server as server
original = server.BridgeServer._send
def _send(self, message):
    if message.get("type") == "result":
        with open(out, "a") as f:
            f.write("feed\\n" if "ledger.git.feed.service" in sys.modules else "none\\n")
    original(self, message)
server.BridgeServer._send = _send
from ledger.cli import main
sys.exit(main(["serve", "--stdio"]))
"""


def _launched(cwd: Path, agent: Path, out: Path) -> FakePi:
    return FakePi(cwd, agent, bridge_argv=[sys.executable, "-c", _LAUNCHER, str(out)])


def _print_mode_run(repo: Path, agent: Path, out: Path) -> list[str]:
    pi = _launched(repo, agent, out)
    pi.has_ui = False
    try:
        assert pi.event("session_start", {"reason": "startup"}).error is None
        prompts_stay_exact(pi, 2, "print")
        assert pi.event("session_shutdown", {"reason": "quit"}).error is None
    finally:
        assert pi.close() == 0
    return out.read_text().split()


def test_without_a_change_feed_a_print_mode_bridge_never_loads_the_feed(
    repo: Path, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWIND_PORTABLE", "1")
    monkeypatch.setenv("REWIND_AUTO_WATCH", "0")
    seen = _print_mode_run(repo, isolated_env / ".pi" / "agent", tmp_path / "feed.txt")
    assert seen and set(seen) == {"none"}, seen
    assert not (repo / ".git" / "pi-rewind" / "feed-status.json").exists()


@pytest.mark.needs("change_feed")
def test_with_a_change_feed_the_launcher_sees_the_feed_loaded(
    repo: Path, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWIND_AUTO_WATCH", "0")
    assert os.environ.get("REWIND_PORTABLE") != "1"
    seen = _print_mode_run(repo, isolated_env / ".pi" / "agent", tmp_path / "feed.txt")
    assert "feed" in seen, seen
