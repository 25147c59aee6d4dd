"""A spawned bridge answers Pi's ``session_start`` before it loads pygit2 or the engine, and
that answer is the one the full start gives (issue 34 item 2; ledger/bridge/quick_start.py).

Which modules are loaded at the moment of the answer is read inside the real bridge process:
a launcher runs ``rewind serve --stdio`` as ``python -m ledger`` would, and records
``sys.modules`` when the first ``result`` is written (it only observes). The answers are
compared with the full start's (``REWIND_QUICK_START=0``) in the same situations, and where
the quick answer does not apply (a restore journal left behind, a shadow to migrate, a session
with points, a fork), the full start answers as before.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.records import TURN
from tests.bridgekit import FakePi, Reply

_LAUNCHER = """
import json, sys
out = sys.argv.pop(1)
import ledger.bridge.server as server
original = server.BridgeServer._send
def _send(self, message):
    if message.get("type") == "result" and not getattr(server, "_seen", False):
        server._seen = True
        with open(out, "w") as f:
            json.dump(sorted(sys.modules), f)
    original(self, message)
server.BridgeServer._send = _send
from ledger.cli import main
sys.argv = ["rewind", "serve", "--stdio"]  # as the extension runs it (the serve fast path)
sys.exit(main())
"""

HEAVY = ("pygit2", "ledger.engine", "ledger.git.repo", "ledger.git.capture", "ledger.retention")
"""What the usual answer does without: pygit2 (~65-130 ms with ssl) and the engine's graph."""

SHARED = ("orjson", "uuid", "platform", "secrets", "socket", "hashlib", "subprocess")
"""What the rest of rewind imports and the usual answer does without either (issue 34, stop
42: ~25-30 ms of it): orjson (with uuid and platform; the wire speaks the standard library's
json until orjson is loaded: ledger/bridge/wire_json.py), secrets and socket (presence),
hashlib (session ids, shadow keys), subprocess (git is spawned by ledger/git/locate.py)."""


@pytest.fixture
def agent(isolated_env: Path) -> Path:
    return isolated_env / ".pi" / "agent"


def _observed(cwd: Path, agent: Path, out: Path, **kwargs: Any) -> FakePi:
    """A FakePi whose bridge records the modules loaded when it first answers, into ``out``."""
    return FakePi(cwd, agent, **kwargs, bridge_argv=[sys.executable, "-c", _LAUNCHER, str(out)])


def _heavy(out: Path) -> list[str]:
    modules: list[str] = json.loads(out.read_text())
    assert "ledger.bridge.server" in modules  # the list was taken inside the bridge
    return [m for m in modules if m.startswith(HEAVY)]


def test_a_spawned_bridge_answers_session_start_before_loading_pygit2_or_the_engine(
    repo: Path, agent: Path, tmp_path: Path
) -> None:
    out = tmp_path / "modules.json"
    pi = _observed(repo, agent, out)
    try:
        reply = pi.event("session_start", {"reason": "startup"})
        assert reply.error is None
        assert (reply.status, reply.notices) == ("◆ 0 points / 0 snapshots", [])
        assert _heavy(out) == []
        # The engine is up for the first prompt: its turn is recorded.
        pi.prompt("one", lambda: (repo / "one.txt").write_text("1\n"))
        assert len(pi.custom(TURN)) == 1
        assert pi.event("ping").status == "◆ 2 points / 2 snapshots"
    finally:
        pi.close()


def test_a_spawned_bridge_answers_session_start_before_loading_orjson_subprocess_or_sockets(
    repo: Path, agent: Path, tmp_path: Path
) -> None:
    out = tmp_path / "modules.json"
    pi = _observed(repo, agent, out)
    try:
        reply = pi.event("session_start", {"reason": "startup"})
        assert (reply.error, reply.status, reply.notices) == (None, "◆ 0 points / 0 snapshots", [])
        modules: list[str] = json.loads(out.read_text())
        assert "ledger.bridge.server" in modules
        assert [m for m in modules if m.split(".")[0] in SHARED] == []
        # Later lines go through orjson, once the engine loaded it: a prompt is recorded.
        pi.prompt("one", lambda: (repo / "one.txt").write_text("1\n"))
        assert len(pi.custom(TURN)) == 1
        assert pi.event("ping").status == "◆ 2 points / 2 snapshots"
    finally:
        pi.close()


def test_with_the_quick_start_off_the_engine_is_loaded_before_the_answer(
    repo: Path, agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher sees what it should: the full start loads pygit2 before answering."""
    monkeypatch.setenv("REWIND_QUICK_START", "0")
    out = tmp_path / "modules.json"
    pi = _observed(repo, agent, out)
    try:
        assert pi.event("session_start", {"reason": "startup"}).error is None
        assert "pygit2" in _heavy(out)
    finally:
        pi.close()


def _answer(reply: Reply) -> tuple[Any, ...]:
    return (
        reply.result,
        reply.notices,
        reply.status,
        reply.panel,
        reply.error,
        [call["method"] for call in reply.calls],
    )


def _both(
    cwd: Path,
    agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    payload: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Iterator[tuple[str, Reply, FakePi]]:
    """The same session_start answered with the quick start on and off (each then closed)."""
    for quick in ("1", "0"):
        monkeypatch.setenv("REWIND_QUICK_START", quick)
        pi = FakePi(cwd, agent, **kwargs)
        try:
            yield quick, pi.event("session_start", payload or {"reason": "startup"}), pi
        finally:
            pi.close()


def _same_answers(
    cwd: Path,
    agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    payload: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Reply:
    answers = {q: reply for q, reply, _ in _both(cwd, agent, monkeypatch, payload, **kwargs)}
    assert _answer(answers["1"]) == _answer(answers["0"])
    return answers["1"]


def test_the_quick_answer_is_the_full_start_answer(
    repo: Path, agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reply = _same_answers(repo, agent, monkeypatch)
    assert reply.status == "◆ 0 points / 0 snapshots"
    # From a subdirectory, and for the other reasons Pi starts a session with.
    (repo / "sub").mkdir()
    _same_answers(repo / "sub", agent, monkeypatch)
    for reason in ("new", "resume", "reload"):
        _same_answers(repo, agent, monkeypatch, {"reason": reason})


def test_settings_warnings_and_silent_checkpoints_are_answered_alike(
    repo: Path, agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "settings.json").write_text('{"rewind": {"silentCheckpoints": "yes", "bogus": 1}}')
    reply = _same_answers(repo, agent, monkeypatch)
    assert reply.notices and all(n["level"] == "warning" for n in reply.notices)
    (agent / "settings.json").write_text('{"rewind": {"silentCheckpoints": true}}')
    assert _same_answers(repo, agent, monkeypatch).status is None


def test_another_live_session_here_is_told_alike(
    repo: Path, agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWIND_QUICK_START", "0")
    other = FakePi(repo, agent)
    try:
        assert other.event("session_start", {"reason": "startup"}).error is None
        reply = _same_answers(repo, agent, monkeypatch)
        assert reply.status is not None and reply.status.endswith("2 sessions here")
        assert any("session" in n["text"] for n in reply.notices)
    finally:
        other.close()


def test_an_interrupted_restore_or_a_session_with_points_gets_the_full_answer(
    repo: Path, agent: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A session with points: the footer counts them through the engine.
    first = FakePi(repo, agent)
    try:
        first.event("session_start", {"reason": "startup"})
        first.prompt("one", lambda: (repo / "one.txt").write_text("1\n"))
        entries = list(first.entries)
    finally:
        first.close()
    out = tmp_path / "modules.json"
    resumed = _observed(repo, agent, out, entries=entries)
    try:
        reply = resumed.event("session_start", {"reason": "resume"})
        assert reply.status == "◆ 2 points / 2 snapshots"
        assert "pygit2" in _heavy(out)  # answered by the full start
    finally:
        resumed.close()
    reply = _same_answers(repo, agent, monkeypatch, {"reason": "resume"}, entries=entries)
    assert reply.status == "◆ 2 points / 2 snapshots"
    # Anything in the restore journal directory: the full start reads it.
    journal = repo / ".git" / "pi-rewind" / "journal"
    journal.mkdir(parents=True, exist_ok=True)
    (journal / "not-a-journal.json").write_text("{}")
    _same_answers(repo, agent, monkeypatch)


def test_no_repository_is_answered_alike(
    tmp_path: Path, agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.txt").write_text("a\n")
    made = FakePi(plain, agent)  # makes its shadow repository (docs/shadow.md), and says so
    try:
        assert made.event("session_start", {"reason": "startup"}).notices
    finally:
        made.close()
    reply = _same_answers(plain, agent, monkeypatch)
    assert reply.status is not None and "shadow repository" in reply.status


def test_an_engine_that_cannot_start_after_the_quick_answer_turns_rewind_off_and_says_why(
    repo: Path, agent: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The engine's start fails after the quick answer went out (injected into the real bridge
    # process through sitecustomize): the bridge keeps serving and the next answer says why.
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import ledger.bridge.dispatch as d\n"
        "def broken(*args, **kwargs):\n"
        "    raise OSError(28, 'No space left on device')\n"
        "d._run_engine = broken\n"
    )
    monkeypatch.setenv("PYTHONPATH", f"{hook}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("REWIND_QUICK_START", "1")
    pi = FakePi(repo, agent)
    try:
        first = pi.event("session_start", {"reason": "startup"})
        assert first.error is None and first.status == "◆ 0 points / 0 snapshots"
        later = pi.event("before_agent_start", {"prompt": "hello"})
        texts = [n["text"] for n in later.notices]
        assert any(t.startswith("Rewind: off: OSError") for t in texts), later
        assert pi.event("agent_end", {}).error is None, "still serving"
    finally:
        pi.close()


def test_a_restore_recorded_before_the_session_ended_leaves_the_next_start_quick(
    repo: Path, agent: Path, tmp_path: Path
) -> None:
    """A ``/rewind`` restore's journal stays until something settles it; the session's end
    does so once the restore's record is in the session file, so the next Pi start is not made
    to take the full start by a journal of a restore long recorded."""
    pi = FakePi(repo, agent)
    try:
        pi.event("session_start", {"reason": "startup"})
        user, _ = pi.prompt("write a", lambda: (repo / "a.txt").write_text("one\n"))
        pi.event("rewind_apply", {"action": "files", "entryId": user})
        assert not (repo / "a.txt").exists()
        journal = repo / ".git" / "pi-rewind" / "journal"
        assert any(journal.iterdir()), "the restore's journal is there until settled"
        pi.write_file()  # as Pi has written it once the session has an assistant message
        pi.event("session_shutdown", {"reason": "quit"})
    finally:
        pi.close()
    assert not any(journal.iterdir()), sorted(p.name for p in journal.iterdir())
    out = tmp_path / "modules.json"
    following = _observed(repo, agent, out)
    try:
        following.event("session_start", {"reason": "startup"})
        assert _heavy(out) == [], "the next start answers before loading the engine"
    finally:
        following.close()


def test_a_restore_whose_record_pi_holds_only_in_memory_keeps_its_journal_at_the_end(
    repo: Path, agent: Path
) -> None:
    """The session file decides: a record Pi has not written yet cannot be found by a later
    process, so the journal that names the way back stays."""
    pi = FakePi(repo, agent)
    try:
        pi.event("session_start", {"reason": "startup"})
        user, _ = pi.prompt("write a", lambda: (repo / "a.txt").write_text("one\n"))
        pi.event("rewind_apply", {"action": "files", "entryId": user})
        pi.event("session_shutdown", {"reason": "quit"})
    finally:
        pi.close()
    journal = repo / ".git" / "pi-rewind" / "journal"
    assert [p.suffix for p in journal.iterdir() if p.suffix == ".json"] == [".json"]
