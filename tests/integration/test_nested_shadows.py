"""Nested plain directories (issue 32, item 2): session B works in ``scratch/sub`` (a shadow
repository for ``sub``), session A in ``scratch`` (a second shadow, whose work tree holds
``sub/`` too). One file, two shadows: still one turn gate and one list of live sessions
(docs/shadow.md#nested-directories, docs/design.md#never-mid-turn).

Real ``rewind serve --stdio`` bridges for both sessions (:class:`tests.bridgekit.FakePi`) and
real ``rewind`` CLI processes:

- a CLI restore in A during B's turn waits, names B, and refuses after its bound with
  ``sub/work.txt`` unchanged; once B's turn ends it restores;
- a CLI restore in B waits for a turn of A just the same;
- ``/rewind`` (files only) and ``/tree`` in A are refused while B's turn runs;
- A's plan names ``sub/work.txt`` as B's agent's file; both footers and ``rewind status`` count
  both sessions;
- a CLI restore waiting for another *restore* (a real ``rewind restore`` paused mid-write) says
  that a restore is running, with its pid, not that a turn is (item 10).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from ledger.git.shadow.layout import shadow_home
from ledger.session_names import session_label
from ledger.turngate import TurnGate, held_exclusive, read_holder
from tests.bridgekit import FakePi, restore_that_waits_for_a_turn

WAIT_S = 60.0


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _rewind(
    agent_dir: Path, cwd: Path, *args: str, wait: str = "1"
) -> subprocess.CompletedProcess[bytes]:
    """The real CLI in its own process (``REWIND_TURN_WAIT`` = ``wait`` seconds)."""
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(agent_dir), *args],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, "REWIND_TURN_WAIT": wait},
    )


def _pid(pi: FakePi) -> int:
    assert isinstance(pi.proc, subprocess.Popen)
    return pi.proc.pid


def _short(pi: FakePi) -> str:
    """The id's random tail: how a restore's record names its session (it has no title)."""
    return session_label(str(pi.header["id"]))


def _begin_turn(pi: FakePi) -> None:
    pi.event("before_agent_start", {"prompt": "long task"})
    pi.event("turn_start", {"turnIndex": 0})


def _end_turn(pi: FakePi) -> None:
    pi.user("long task")
    pi.assistant("done")
    pi.event("turn_end", {"turnIndex": 0, "role": "assistant"})
    pi.event("agent_end", {})


@dataclass
class Nested:
    scratch: Path
    sub: Path
    agent_dir: Path
    outer: FakePi
    """Session A, in ``scratch``."""
    inner: FakePi
    """Session B, in ``scratch/sub``."""
    outer_point: str
    """A's first prompt: ``sub/work.txt`` was B's v1 then, ``a.txt`` did not exist."""
    inner_point: str
    """B's first prompt: ``work.txt`` did not exist then."""

    def restore_outer(self, *extra: str, wait: str = "1") -> subprocess.CompletedProcess[bytes]:
        args = ("restore", str(self.outer.session_file), self.outer_point, "--mode", "files")
        return _rewind(self.agent_dir, self.scratch, *args, *extra, wait=wait)

    def restore_inner(self, *extra: str, wait: str = "1") -> subprocess.CompletedProcess[bytes]:
        args = ("restore", str(self.inner.session_file), self.inner_point, "--mode", "files")
        return _rewind(self.agent_dir, self.sub, *args, *extra, wait=wait)

    def git_dir(self, directory: Path) -> Path:
        return shadow_home(self.agent_dir, directory) / "git"


@pytest.fixture
def nested(tmp_path: Path, isolated_env: Path) -> Iterator[Nested]:
    """B starts first in ``scratch/sub`` (its shadow serves ``sub``); then A starts in
    ``scratch`` (a second shadow, for ``scratch``). B's agent writes ``sub/work.txt`` (v1), A's
    agent writes ``a.txt``, B's agent rewrites ``sub/work.txt`` (v2)."""
    agent_dir = isolated_env / ".pi" / "agent"
    scratch = tmp_path / "scratch"
    sub = scratch / "sub"
    sub.mkdir(parents=True)
    _write(scratch / "notes.txt", "the user's\n")
    inner = FakePi(sub, agent_dir)
    outer: FakePi | None = None
    try:
        assert inner.event("session_start", {"reason": "startup"}).error is None
        inner_point, _ = inner.prompt("v1", act=lambda: _write(sub / "work.txt", "v1 by B\n"))
        outer = FakePi(scratch, agent_dir)
        assert outer.event("session_start", {"reason": "startup"}).error is None
        outer_point, _ = outer.prompt("a", act=lambda: _write(scratch / "a.txt", "a by A\n"))
        inner.prompt("v2", act=lambda: _write(sub / "work.txt", "v2 by B\n"))
        inner.write_file()
        outer.write_file()
        shadows = sorted(p.name for p in (agent_dir / "rewind" / "shadow").iterdir())
        assert len(shadows) == 2 and shadows[0].startswith("scratch-"), shadows
        yield Nested(scratch, sub, agent_dir, outer, inner, outer_point, inner_point)
    finally:
        for pi in (inner, outer):
            if pi is not None and isinstance(pi.proc, subprocess.Popen) and pi.proc.poll() is None:
                pi.close()


# --- one turn gate -------------------------------------------------------------------------------


def test_a_cli_restore_in_the_outer_directory_waits_for_the_inner_sessions_turn(
    nested: Nested,
) -> None:
    work = nested.sub / "work.txt"
    _begin_turn(nested.inner)
    refused = nested.restore_outer("--yes", wait="1")
    err = refused.stderr.decode()
    assert refused.returncode == 1, (refused.stdout.decode(), err)
    assert "waiting for it to end before writing files (up to 1 s; Ctrl-C cancels" in err
    who = f"a turn of session {nested.inner.label()} (pid {nested.inner.pi_pid}"
    assert f"error: {who}" in err, err
    assert str(nested.sub) in err, "it says where that session works"
    assert "hint: nothing was changed" in err
    assert work.read_text() == "v2 by B\n" and (nested.scratch / "a.txt").exists()

    # The turn ends a moment later: the same restore waits for it, then restores. The turn
    # ends once the command says it waits (not after a fixed time: a command that starts
    # slowly under load would find the turn over already and never wait), and a while after.
    args = ("restore", str(nested.outer.session_file), nested.outer_point, "--mode", "files")
    code, said = restore_that_waits_for_a_turn(
        ["--agent-dir", str(nested.agent_dir), *args, "--yes"],
        nested.scratch,
        unchanged=lambda: work.read_text() == "v2 by B\n",
        end_turn=lambda: _end_turn(nested.inner),
    )
    assert code == 0, said
    assert work.read_text() == "v1 by B\n" and not (nested.scratch / "a.txt").exists()


def test_a_cli_restore_in_the_inner_directory_waits_for_the_outer_sessions_turn(
    nested: Nested,
) -> None:
    work = nested.sub / "work.txt"
    _begin_turn(nested.outer)
    refused = nested.restore_inner("--yes", wait="1")
    err = refused.stderr.decode()
    assert refused.returncode == 1, (refused.stdout.decode(), err)
    who = f"a turn of session {nested.outer.label()} (pid {nested.outer.pi_pid}"
    assert f"error: {who}" in err, err
    assert work.read_text() == "v2 by B\n"
    _end_turn(nested.outer)
    done = nested.restore_inner("--yes", wait="0")
    assert done.returncode == 0, done.stderr.decode()
    assert not work.exists()


def test_rewind_and_tree_in_the_outer_session_are_refused_during_the_inner_turn(
    nested: Nested,
) -> None:
    work = nested.sub / "work.txt"
    outer, inner = nested.outer, nested.inner
    _begin_turn(inner)
    who = f"a turn of session {inner.label()} (pid {inner.pi_pid}"
    preview = outer.event("rewind_preview", {"entryId": nested.outer_point}).result["preview"]
    offered = {a["id"]: (a["available"], a["why"]) for a in preview["actions"]}
    assert offered["files"][0] is False and who in str(offered["files"][1]), offered
    assert offered["conversation"] == (True, None)
    applied = outer.event("rewind_apply", {"action": "files", "entryId": nested.outer_point})
    assert applied.error is not None and who in str(applied.error), applied
    reply = outer.navigate(nested.outer_point, "Restore files to that point")
    assert any(who in n["text"] for n in reply.notices), reply.notices
    assert reply.result.get("cancel") is True
    assert work.read_text() == "v2 by B\n" and (nested.scratch / "a.txt").exists()

    _end_turn(inner)
    done = outer.event("rewind_apply", {"action": "files", "entryId": nested.outer_point})
    assert done.error is None, done.error
    assert work.read_text() == "v1 by B\n"


def test_a_turn_in_the_inner_directory_waits_for_a_restore_in_the_outer_one(
    nested: Nested,
) -> None:
    """The gate's other side, across shadows: B's turn starting while a restore of A's shadow
    writes waits for it (through the turn gate of a third process, paused mid-restore)."""
    paused = PausedRestore(nested, "after-delete")
    try:
        started = time.monotonic()
        turn = threading.Thread(target=_begin_turn, args=(nested.inner,))
        turn.start()
        time.sleep(1.0)
        assert turn.is_alive(), "B's turn started under a restore of A's shadow"
        assert paused.finish() == 0, paused.err_text()
        turn.join(timeout=WAIT_S)
        assert not turn.is_alive() and time.monotonic() - started >= 1.0
    finally:
        paused.stop()
    _end_turn(nested.inner)


# --- one list of live sessions -------------------------------------------------------------------


def test_the_outer_plan_names_the_inner_sessions_file_and_status_lists_both(
    nested: Nested,
) -> None:
    plan = nested.restore_outer("--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr.decode()
    data = orjson.loads(plan.stdout.splitlines()[0])
    assert data["writtenByOtherSessions"] == [
        {
            "sessionId": nested.inner.header["id"],
            "sessionFile": str(nested.inner.session_file),
            "running": True,
            "busy": False,
            "paths": ["sub/work.txt"],
        }
    ]
    assert [c["path"] for c in data["changedOutsideAgent"]] == []
    text = nested.restore_outer("--dry-run").stdout.decode()
    assert (
        f"1 file written by session {nested.inner.label()} (still running) will be "
        "overwritten: sub/work.txt" in text
    ), text

    # The inner session's plan names A's file? A's agent wrote nothing under sub/: nobody.
    inner_plan = orjson.loads(nested.restore_inner("--dry-run", "--json").stdout.splitlines()[0])
    assert inner_plan["writtenByOtherSessions"] == []

    for pi, cwd in ((nested.outer, nested.scratch), (nested.inner, nested.sub)):
        status = _rewind(nested.agent_dir, cwd, "status", str(pi.session_file), "--json")
        assert status.returncode == 0, status.stderr.decode()
        live = orjson.loads(status.stdout.splitlines()[0])["liveSessions"]
        assert sorted(e["pid"] for e in live) == sorted([_pid(nested.outer), _pid(nested.inner)])
        reply = pi.event("turn_end", {"turnIndex": 0, "role": "assistant"})
        assert reply.status is not None and reply.status.endswith(" · 2 sessions here"), reply


def test_the_inner_plan_names_a_file_the_outer_sessions_agent_wrote_inside_it(
    nested: Nested,
) -> None:
    nested.outer.prompt("into sub", act=lambda: _write(nested.sub / "by-a.txt", "A's\n"))
    nested.outer.write_file()
    _write(nested.sub / "mine.txt", "by hand\n")
    plan = nested.restore_inner("--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr.decode()
    data = orjson.loads(plan.stdout.splitlines()[0])
    assert [(g["sessionId"], g["paths"]) for g in data["writtenByOtherSessions"]] == [
        (nested.outer.header["id"], ["by-a.txt"])
    ]
    assert [c["path"] for c in data["changedOutsideAgent"]] == ["mine.txt"]


def test_the_outer_attribution_also_names_an_inner_sessions_file_in_the_tree_menu(
    nested: Nested,
) -> None:
    nested.outer.choices = [None]
    nested.outer.event("session_before_tree", {"targetId": nested.outer_point})
    title = nested.outer.menus[-1][0]
    assert (
        f"1 file written by session {nested.inner.label()} (still running) will be overwritten"
        in title
    ), title


# --- a restore holds the gate: say so (item 10) ----------------------------------------------------

# A `rewind` process whose restore stops at STEP until the file GO exists (bounded), after writing
# its pid to PAUSED (the hook tests/integration/test_running_restore.py uses).
_HOOKED = """
import os, sys, time
from pathlib import Path
from ledger.cli import main
from ledger.git.restore.apply import Steps
step, paused, go = sys.argv[1:4]
original = Steps.reach
def reach(self, name):
    if name == step:
        Path(paused).write_text(str(os.getpid()))
        deadline = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.01)
    return original(self, name)
Steps.reach = reach
sys.exit(main(sys.argv[4:]))
"""


class PausedRestore:
    """A real ``rewind restore`` of A's first point, held at ``step`` while it writes."""

    def __init__(self, nested: Nested, step: str) -> None:
        root = nested.scratch.parent
        self.paused = root / f"paused-{time.monotonic_ns()}"
        self.go = self.paused.with_name(self.paused.name + ".go")
        self.err = self.paused.with_name(self.paused.name + ".err")
        args = [
            "--agent-dir",
            str(nested.agent_dir),
            "restore",
            str(nested.outer.session_file),
            nested.outer_point,
            "--mode",
            "files",
            "--yes",
        ]
        with self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _HOOKED, step, str(self.paused), str(self.go), *args],
                cwd=nested.scratch,
                env={**os.environ, "REWIND_TURN_WAIT": "0"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = time.monotonic() + WAIT_S
        while not self.paused.exists():
            assert self.proc.poll() is None, self.err_text()
            assert time.monotonic() < deadline, "the restore never reached its pause"
            time.sleep(0.01)
        self.pid = self.proc.pid

    def err_text(self) -> str:
        return self.err.read_text()

    def finish(self) -> int:
        self.go.touch()
        return self.proc.wait(timeout=WAIT_S)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT_S)


def test_a_cli_restore_waiting_for_another_restore_says_a_restore_is_running(
    nested: Nested,
) -> None:
    paused = PausedRestore(nested, "after-delete")
    try:
        refused = nested.restore_inner("--yes", wait="1")
        err = refused.stderr.decode()
        assert refused.returncode == 1, err
        assert "turn" not in err.split("error: ", 1)[-1].split("\n")[0], err
        assert f"another restore is running (pid {paused.pid}" in err, err
        assert f"session {_short(nested.outer)}" in err, "the restoring session is named"
        assert "waiting for it to end before writing files" in err
        assert "hint: nothing was changed" in err
        assert (nested.sub / "work.txt").read_text() != "", "untouched by the refused restore"

        # Inside Pi the same refusal, at once.
        applied = nested.inner.event(
            "rewind_apply", {"action": "files", "entryId": nested.inner_point}
        )
        assert f"another restore is running (pid {paused.pid}" in str(applied.error), applied
        assert paused.finish() == 0, paused.err_text()
    finally:
        paused.stop()
    done = nested.restore_inner("--yes", wait="0")
    assert done.returncode == 0, done.stderr.decode()
    assert not (nested.sub / "work.txt").exists()


def test_a_waiting_restore_holds_no_gate_of_the_scope_and_a_killed_one_leaves_no_holder(
    nested: Nested,
) -> None:
    """All or nothing: a restore of ``scratch`` waiting for B's turn (which holds ``sub``'s gate)
    shuts out no new turn in ``scratch`` meanwhile. And a restore killed while it holds the gates
    frees them at once; the record it leaves names a dead process and is not believed."""
    _begin_turn(nested.inner)
    waiting = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ledger",
            "--agent-dir",
            str(nested.agent_dir),
            "restore",
            str(nested.outer.session_file),
            nested.outer_point,
            "--mode",
            "files",
            "--yes",
        ],
        cwd=nested.scratch,
        env={**os.environ, "REWIND_TURN_WAIT": "30"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert waiting.stderr is not None
        assert b"waiting for it to end" in waiting.stderr.readline()
        for _ in range(20):  # while it polls, a turn in scratch starts at once, every time
            turn = TurnGate(nested.git_dir(nested.scratch))
            assert turn.begin_turn(timeout_s=0), "the waiting restore held a gate of the scope"
            turn.close()
            time.sleep(0.02)
        assert waiting.poll() is None, "it still waits for B's turn"
    finally:
        waiting.kill()
        waiting.wait()
    _end_turn(nested.inner)

    paused = PausedRestore(nested, "after-delete")
    try:
        for directory in (nested.scratch, nested.sub):
            git_dir = nested.git_dir(directory)
            assert held_exclusive(git_dir)
            holder = read_holder(git_dir)
            assert holder is not None and holder.pid == paused.pid
            assert holder.session_id == nested.outer.header["id"]
    finally:
        paused.stop()  # SIGKILL mid-restore
    for directory in (nested.scratch, nested.sub):
        git_dir = nested.git_dir(directory)
        assert not held_exclusive(git_dir), "the kernel let go of the killed restore's gates"
        assert read_holder(git_dir) is None, "a dead restore's record is not believed"
        gate = TurnGate(git_dir)
        assert gate.begin_turn(timeout_s=0)
        gate.close()
