"""A print-mode bridge (``pi -p``) does not load the whole authorship index for its captures
(issue 34: the prompt's first capture loaded every record, ~0.2 s at 100k files, to learn the
latest snapshot; print mode never lists, ledger/bridge/warm_up.py).

A launcher runs the real bridge and counts full loads of the index (``AuthorshipReader``
refreshes) after each answer; the prompts' snapshots stay exact and their authorship records
are the ones a bridge with a UI writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ledger.authorship.store import AuthorshipStore
from tests.bridgekit import FakePi, prompts_stay_exact

_LAUNCHER = """
import sys
out = sys.argv.pop(1)
import ledger.bridge.server as server
from ledger.engine import authorship_log
loads = []
refresh = authorship_log.AuthorshipReader.refresh
def counted(self, *args, **kwargs):
    loads.append(1)
    return refresh(self, *args, **kwargs)
authorship_log.AuthorshipReader.refresh = counted
original = server.BridgeServer._send
def _send(self, message):
    if message.get("type") == "result":
        with open(out, "w") as f:
            f.write(str(len(loads)))
    original(self, message)
server.BridgeServer._send = _send
from ledger.cli import main
sys.exit(main(["serve", "--stdio"]))
"""


def _counted(cwd: Path, agent: Path, out: Path) -> FakePi:
    return FakePi(cwd, agent, bridge_argv=[sys.executable, "-c", _LAUNCHER, str(out)])


def _records(repo: Path) -> int:
    return len(AuthorshipStore(repo / ".git" / "pi-rewind").read().records)


def test_a_print_mode_bridge_captures_without_loading_the_whole_authorship_index(
    repo: Path, isolated_env: Path, tmp_path: Path
) -> None:
    agent = isolated_env / ".pi" / "agent"
    earlier = FakePi(repo, agent)  # an index with records already, as in any used repository
    assert earlier.event("session_start", {"reason": "startup"}).error is None
    prompts_stay_exact(earlier, 2, "ui")
    assert earlier.close() == 0
    before = _records(repo)
    assert before > 0

    out = tmp_path / "loads.txt"
    pi = _counted(repo, agent, out)
    pi.has_ui = False
    try:
        assert pi.event("session_start", {"reason": "startup"}).error is None
        prompts_stay_exact(pi, 2, "print")
        assert out.read_text() == "0", "no full load of the index in print mode"
    finally:
        assert pi.close() == 0
    # Each print-mode capture is recorded as with a UI: pre-prompt + turn, per prompt.
    assert _records(repo) > before


def test_with_a_ui_the_bridge_keeps_the_index_loaded(
    repo: Path, isolated_env: Path, tmp_path: Path
) -> None:
    """The launcher sees what it should: a bridge with a UI loads the index once and keeps it."""
    out = tmp_path / "loads.txt"
    pi = _counted(repo, isolated_env / ".pi" / "agent", out)
    try:
        assert pi.event("session_start", {"reason": "startup"}).error is None
        prompts_stay_exact(pi, 1, "ui")
        assert int(out.read_text()) >= 1
    finally:
        assert pi.close() == 0
