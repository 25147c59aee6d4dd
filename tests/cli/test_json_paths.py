"""Every ``--json`` output is valid UTF-8 JSON whatever the file names.

A file named with Latin-1 bytes (``caf\\xe9.txt``: not UTF-8) is created, changed and left changed
by a recorded agent; then every command that can print a path runs with ``--json`` as a real
process (the bytes a user's pipe receives). Each output must decode as UTF-8 and parse, the name
must appear as git quotes it (``"caf\\351.txt"``) and its ``<key>Bytes`` field must give back
the exact bytes. Before the fix, these commands ended with ``error: internal error: TypeError:
str is not valid UTF-8: surrogates not allowed``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.enginekit import Agent
from tests.gitkit import ROOT, git

LATIN1 = b"caf\xe9.txt"
QUOTED = '"caf\\351.txt"'


@pytest.fixture
def agent(repo: Path, tmp_path: Path) -> Agent:
    agent = Agent.start(repo, tmp_path / "agent")
    raw = os.fsencode(repo) + b"/" + LATIN1

    def create(r: Path) -> None:
        with open(raw, "wb") as f:
            f.write(b"one\n")

    def edit(r: Path) -> None:
        with open(raw, "wb") as f:
            f.write(b"two caf\xe9\n")  # the patch itself holds a byte that is not UTF-8

    agent.prompt("Create it", create)
    agent.prompt("Edit it", edit)
    with open(raw, "wb") as f:  # a change outside the agent: status, restore and undo plans
        f.write(b"three\n")
    return agent


def _run(agent: Agent, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", *args, "--json", "--agent-dir", str(agent.agent_dir)],
        cwd=agent.repo,
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _found(value: Any) -> list[tuple[str, Any, Any]]:
    """Every (key, value, bytes field) where a value is the quoted name."""
    hits: list[tuple[str, Any, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if item == QUOTED or (isinstance(item, list) and QUOTED in item):
                hits.append((key, item, value.get(f"{key}Bytes")))
            hits.extend(_found(item))
    elif isinstance(value, list):
        for item in value:
            hits.extend(_found(item))
    return hits


def _decode(raw: Any) -> list[bytes]:
    items = raw if isinstance(raw, list) else [raw]
    return [base64.b64decode(i) for i in items if i is not None]


def test_every_json_command_prints_utf8_json_with_the_quoted_name_and_its_bytes(
    agent: Agent,
) -> None:
    user = agent.session().branch()[-2].id  # the second prompt's user entry
    commands: list[tuple[str, ...]] = [
        ("show", "@", user),
        ("show",),
        ("show", "@", user, "--stat"),
        ("show", "@", user, "--numstat", "-M"),
        ("log", "@", "--patch"),
        ("log", "@", "--stat"),
        ("log", "@", "--name-status"),
        ("log", "@"),
        ("status", "@"),
        ("diff", "@", user),
        ("diff", "@", user, "--patch"),
        ("restore", "@", user, "--dry-run"),
        ("sessions",),
        ("tree", "@"),
        ("doctor",),
        ("sweep", "--dry-run"),
    ]
    quoted_in = set()
    for args in commands:
        result = _run(agent, *args)
        assert result.returncode in (0, 1), (args, result.stderr)
        assert b"internal error" not in result.stderr, (args, result.stderr)
        assert result.returncode == 0 or args[0] == "doctor", (args, result.stderr)
        for line in result.stdout.splitlines():
            payload = json.loads(line.decode("utf-8"))  # strict UTF-8, then JSON
            for key, _item, raw in _found(payload):
                assert raw is not None, (args, key)
                assert LATIN1 in _decode(raw), (args, key)
                quoted_in.add(args[0])
            for text in _patches(payload):
                assert base64.b64decode(text).count(b"two caf\xe9\n")  # the content's own byte
    # The name shows up where each of these commands lists paths.
    assert {"show", "log", "status", "diff", "restore"} <= quoted_in


def _patches(value: Any) -> list[str]:
    if isinstance(value, dict):
        found = [v for k, v in value.items() if k == "patchBytes" and isinstance(v, str)]
        for item in value.values():
            found.extend(_patches(item))
        return found
    if isinstance(value, list):
        return [p for item in value for p in _patches(item)]
    return []


def test_text_output_quotes_the_name_in_status_and_keeps_gits_bytes_in_show(
    agent: Agent,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "ledger", "--agent-dir", str(agent.agent_dir)]
    status = subprocess.run(
        [*base, "status", "@"], cwd=agent.repo, capture_output=True, env=env, timeout=120
    )
    assert status.returncode == 0, status.stderr
    assert b'  M "caf\\351.txt"\n' in status.stdout
    show = subprocess.run(
        [*base, "show", "--stat"], cwd=agent.repo, capture_output=True, env=env, timeout=120
    )
    data = json.loads(_run(agent, "show").stdout)
    expected = subprocess.run(
        ["git", "diff", "--no-color", "--stat", "--no-renames", data["before"], data["after"]],
        cwd=agent.repo,
        capture_output=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    ).stdout
    assert show.returncode == 0 and show.stdout.endswith(b"\n" + expected + b"\n")
    assert b'"caf\\351.txt"' in expected
    assert git(agent.repo, "status", "--porcelain")  # the work tree was left as it was


def test_status_quotes_a_name_with_a_double_quote_as_git_and_restore_do(
    repo: Path, tmp_path: Path
) -> None:
    """``a"b.txt`` is valid UTF-8 but git quotes it (``"a\\"b.txt"``); ``rewind status`` used to
    print it raw while restore and diff messages quoted it."""
    agent = Agent.start(repo, tmp_path / "agent")
    agent.prompt("Create it", lambda r: (r / 'a"b.txt').write_text("one\n"))
    (repo / 'a"b.txt').write_text("changed by hand\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "ledger", "--agent-dir", str(agent.agent_dir)]
    status = subprocess.run(
        [*base, "status", "@"], cwd=repo, capture_output=True, env=env, timeout=120
    )
    assert status.returncode == 0, status.stderr
    porcelain = git(repo, "status", "--porcelain")
    assert '"a\\"b.txt"' in porcelain  # git's own quoting of the name
    assert b'  M "a\\"b.txt"\n' in status.stdout, status.stdout
