"""Issue 23, part 2: a session file with few line breaks costs a bounded read, not minutes.

A 1.5 GiB sparse file (one "line" of zero bytes) in the sessions folder hung every command that
lists sessions: the header read re-counted newlines over its whole growing buffer after every
64 KiB. As a ``parentSession`` it was read whole (1.5 GiB) on every command. Now a header is
looked for in the first 1 MiB only and such a file is refused like any unreadable session: a
warning and a skip in scans, a clear ``error:``/warning when named.

The commands run as real processes with a ``timeout``: on the old code they do not finish in
it, and the test fails with ``TimeoutExpired`` (no timed assertions: speed is shown by
``tools/bench_session_head.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.errors import SessionAppendError, SessionFileError
from ledger.safe_read import MAX_SESSION_BYTES
from ledger.session.store import SessionAppender, read_header, read_session
from ledger.session_names import id_tail
from tests.cli.helpers import Result
from tests.enginekit import Agent
from tests.gitkit import ROOT

HUGE = 1500 << 20
"""1.5 GiB: under the 2 GiB whole-file bound, so only the header bound can refuse it early."""
ONE_MIB = 1 << 20
"""The header bound (``ledger.session.store.MAX_HEADER_BYTES``), spelled out so that this file
also runs against the old code."""
TIMEOUT_S = 60
"""Far above what a bounded read needs, far below what the old quadratic read took."""


def _rewind(*args: str | Path, cwd: Path) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _sparse_one_line_file(path: Path, size: int = HUGE) -> Path:
    """A file of ``size`` zero bytes without a newline, costing no disk (a sparse file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    os.truncate(path, size)
    return path


def _with_parent(agent: Agent, parent: Path) -> None:
    first, rest = agent.session_file.read_bytes().split(b"\n", 1)
    header = json.loads(first)
    header["parentSession"] = str(parent)
    agent.session_file.write_bytes(json.dumps(header).encode() + b"\n" + rest)


def _no_crash(result: Result) -> None:
    assert "Traceback" not in result.err and "internal error" not in result.err, result.err


@pytest.fixture
def two_sessions(repo: Path, isolated_env: Path) -> tuple[Agent, Agent]:
    """Two real sessions of ``repo`` with rewind points, written by the real engine."""
    agent_dir = isolated_env / ".pi" / "agent"
    first = Agent.start(repo, agent_dir)
    first.prompt("one", lambda r: (r / "a.txt").write_text("1\n"))
    second = Agent.start(repo, agent_dir)
    second.prompt("two", lambda r: (r / "b.txt").write_text("2\n"))
    return first, second


def _session_id(agent: Agent) -> str:
    return str(json.loads(agent.session_file.read_bytes().split(b"\n", 1)[0])["id"])


def test_sessions_lists_the_real_sessions_beside_a_huge_one_line_file(
    two_sessions: tuple[Agent, Agent], repo: Path
) -> None:
    first, second = two_sessions
    _sparse_one_line_file(first.session_file.parent / "zz-huge.jsonl")
    result = _rewind("sessions", cwd=repo)
    _no_crash(result)
    assert result.code == 0, result.err
    listed = result.out
    assert _session_id(first) in listed and _session_id(second) in listed, listed
    assert "zz-huge" not in listed


def test_sessions_warns_about_the_huge_file_it_skips(
    two_sessions: tuple[Agent, Agent], repo: Path
) -> None:
    first, _second = two_sessions
    huge = _sparse_one_line_file(first.session_file.parent / "zz-huge.jsonl")
    result = _rewind("sessions", cwd=repo)
    assert result.code == 0, result.err
    warnings = [line for line in result.err.splitlines() if str(huge) in line]
    assert warnings and warnings[0].startswith("warning: "), result.err
    assert "first line is longer than 1 MiB" in warnings[0]


@pytest.mark.parametrize(
    "args",
    [("log", "@"), ("doctor",), ("sweep", "--scan", "repo-sessions", "--dry-run"), ("tree", "@")],
    ids=["log", "doctor", "sweep-scan", "tree"],
)
def test_commands_that_scan_the_sessions_folder_skip_a_huge_one_line_file(
    two_sessions: tuple[Agent, Agent], repo: Path, args: tuple[str, ...]
) -> None:
    first, _second = two_sessions
    _sparse_one_line_file(first.session_file.parent / "zz-huge.jsonl")
    result = _rewind(*args, cwd=repo)
    _no_crash(result)
    assert result.code == 0, (args, result)


def test_a_huge_one_line_parent_session_ends_the_lineage_with_a_clear_warning(
    two_sessions: tuple[Agent, Agent], repo: Path, tmp_path: Path
) -> None:
    first, _second = two_sessions
    huge = _sparse_one_line_file(tmp_path / "parents" / "huge-parent.jsonl")
    _with_parent(first, huge)
    for args in (
        ("log", first.session_file, "--lineage"),
        ("tree", first.session_file),
        ("sweep", first.session_file, "--dry-run"),
    ):
        result = _rewind(*args, cwd=repo)
        _no_crash(result)
        assert result.code == 0, (args, result)
        assert "unreadable" in result.err and "first line is longer than 1 MiB" in result.err, (
            args,
            result.err,
        )
    lineage = _rewind("log", first.session_file, "--lineage", cwd=repo)
    rows = lineage.out.splitlines()
    tail = id_tail(_session_id(first))  # forks made seconds apart share the id's prefix
    assert rows and all(row.startswith(tail) for row in rows), lineage.out


def test_a_huge_one_line_file_named_directly_is_a_clear_error(repo: Path, tmp_path: Path) -> None:
    huge = _sparse_one_line_file(tmp_path / "huge.jsonl")
    for args in (("log", huge), ("tree", huge)):
        result = _rewind(*args, cwd=repo)
        _no_crash(result)
        assert result.code == 1, (args, result)
        assert result.err.startswith(f"error: {huge}: not a Pi session file"), result.err
        assert "first line is longer than 1 MiB" in result.err


def test_a_header_followed_by_a_long_line_is_still_a_session(tmp_path: Path) -> None:
    """The bound is on finding the header, not on the file: a real header followed by one
    line longer than the bound reads as before (header and whole session)."""
    path = tmp_path / "long.jsonl"
    header = {"type": "session", "version": 3, "id": "s-long", "timestamp": "t", "cwd": "/x"}
    entry = {"type": "custom", "id": "e0000001", "parentId": None, "timestamp": "t"}
    entry["data"] = "x" * (2 * ONE_MIB)
    path.write_bytes(json.dumps(header).encode() + b"\n" + json.dumps(entry).encode() + b"\n")
    assert read_header(path)["id"] == "s-long"
    session = read_session(path)
    assert [e.id for e in session.entries] == ["e0000001"]


def test_a_header_line_longer_than_the_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "padded.jsonl"
    header = {"type": "session", "version": 3, "id": "s-pad", "pad": "x" * ONE_MIB}
    path.write_bytes(json.dumps(header).encode() + b"\n")
    for read in (read_header, read_session):
        with pytest.raises(SessionFileError, match="first line is longer than 1 MiB"):
            read(path)


def test_an_append_to_a_session_over_the_whole_file_bound_is_refused_unwritten(
    tmp_path: Path,
) -> None:
    """The appender reads the whole file once to find the leaf: past the 2 GiB bound it refuses
    before holding any of it, and writes nothing."""
    path = tmp_path / "grown.jsonl"
    header = {"type": "session", "version": 3, "id": "s-grown", "timestamp": "t", "cwd": "/x"}
    path.write_bytes(json.dumps(header).encode() + b"\n")
    os.truncate(path, MAX_SESSION_BYTES + 1)
    with pytest.raises(SessionAppendError, match="larger than"):
        SessionAppender(path).append_custom("rewind-test", {})
    assert path.stat().st_size == MAX_SESSION_BYTES + 1
