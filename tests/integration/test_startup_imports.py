"""A process imports only what it uses: no pydantic in the CLI's record-writing commands, nor in
a spawned bridge answering ``session_start`` and a prompt (issue 34, start-up at the floor).

Importing pydantic and the models cost 0.13–0.44 s per process. The records are written by
``ledger.record_fast`` and host messages decoded by ``ledger.bridge.protocol``'s plain checks;
pydantic stays for the schemas and for a host message out of the ordinary. Checked on real
processes with Python's own import log (``PYTHONPROFILEIMPORTTIME``: every module imported by
the process, by any thread, until it ends).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ledger.demo import DemoWorld, build_world, run_prompts
from ledger.records import TURN
from tests.bridgekit import FakePi
from tests.gitkit import ROOT


def _imported(stderr: str) -> set[str]:
    """Module names from ``-X importtime`` lines (``import time: self | cumulative | name``)."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def _pydantic(modules: set[str]) -> list[str]:
    return sorted(
        m
        for m in modules
        if m.split(".")[0] in {"pydantic", "pydantic_core"}
        or m
        in {
            "ledger.record_models",
            "ledger.bridge.protocol_models",
        }
    )


@pytest.fixture
def world(tmp_path: Path) -> DemoWorld:
    return run_prompts(build_world(tmp_path / "demo"))


def _rewind(world: DemoWorld, *args: str) -> set[str]:
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "ledger",
            "--agent-dir",
            str(world.agent_dir),
            *args,
        ],
        cwd=world.repo,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    modules = _imported(done.stderr)
    assert "ledger.cli" in modules  # the log was read
    return modules


def test_record_writing_commands_do_not_import_pydantic(world: DemoWorld) -> None:
    for args in (
        ["--version"],
        ["restore", "--help"],
        ["checkpoint", "@"],
        ["restore", "@", world.users[1], "--yes"],
        ["undo", "@", "--yes"],
    ):
        modules = _rewind(world, *args)
        assert not _pydantic(modules), (args, _pydantic(modules))
    assert "ledger.record_fast" in modules  # the undo wrote its record without the models


def test_a_spawned_bridge_answers_session_start_and_a_prompt_without_pydantic(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # the bridge's own -X importtime
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    try:
        assert pi.event("session_start", {"reason": "startup"}).error is None
        pi.prompt("write a file", lambda: (repo / "a.txt").write_text("a\n"))
        assert len(pi.custom(TURN)) == 1  # a record was written
    finally:
        assert pi.proc.stdin is not None and pi.proc.stderr is not None
        pi.proc.stdin.close()
        stderr = pi.proc.stderr.read().decode()
        pi.proc.wait(timeout=60)
    modules = _imported(stderr)
    assert "ledger.bridge.server" in modules  # the log was read
    assert not _pydantic(modules), _pydantic(modules)


def test_an_event_named_by_a_list_is_refused_and_the_bridge_keeps_serving(
    repo: Path, isolated_env: Path
) -> None:
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    try:
        pi.send_raw(orjson.dumps({"type": "event", "id": 3, "event": ["ping"]}))
        assert pi.read() == {
            "type": "error",
            "id": 3,
            "error": {"code": "unknown-event", "message": "unknown event: ['ping']"},
        }
        assert pi.event("ping").error is None
    finally:
        pi.close()
