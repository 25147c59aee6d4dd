"""The turn gate (issue 27, docs/design.md#never-mid-turn): turns hold it shared, restores
exclusive, across real processes; the kernel frees a killed holder's hold."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.gate_errors import OtherTurnRunningError
from ledger.turngate import GATE_NAME, TurnGate


def _holder(git_dir: Path, mode: str, hold_s: float = 60.0) -> subprocess.Popen[bytes]:
    """Another process holding the gate (``turn`` or ``restore``) for ``hold_s``; it prints one
    line once it holds it."""
    return _holding(git_dir, mode, hold_s)[0]


def _holding(git_dir: Path, mode: str, hold_s: float) -> tuple[subprocess.Popen[bytes], float]:
    """:func:`_holder`, and when it took the gate (its ``time.monotonic()``: the clock is the
    system's, the same in every process), so that a wait is measured from then, not from when
    this process, perhaps slowed down by a loaded machine, read its line."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from ledger.turngate import TurnGate
        gate = TurnGate(Path({str(git_dir)!r}))
        if {mode!r} == "turn":
            assert gate.begin_turn(timeout_s=10)
            print("held", time.monotonic(), flush=True)
            time.sleep({hold_s})
        else:
            with gate.restoring(timeout_s=10):
                print("held", time.monotonic(), flush=True)
                time.sleep({hold_s})
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    said, at = proc.stdout.readline().split()
    assert said == b"held"
    return proc, float(at)


@pytest.fixture
def git_dir(repo: Path) -> Iterator[Path]:
    yield repo / ".git"


def test_a_restore_waits_for_another_turn_then_refuses_with_nothing_held(git_dir: Path) -> None:
    turn = _holder(git_dir, "turn")
    try:
        gate = TurnGate(git_dir)
        told: list[float] = []
        started = time.monotonic()
        with (
            pytest.raises(OtherTurnRunningError) as caught,
            gate.restoring(timeout_s=0.5, notify=told.append),
        ):
            pytest.fail("a restore ran under another session's turn")
        assert time.monotonic() - started >= 0.5
        assert told == [0.5], "told once that it waits"
        assert "another session's turn is running" in caught.value.message
        assert caught.value.hint is not None and "nothing was changed" in caught.value.hint
    finally:
        turn.kill()
        turn.wait()


def test_turns_run_side_by_side_and_a_killed_turn_frees_the_gate_at_once(git_dir: Path) -> None:
    turn = _holder(git_dir, "turn")
    mine = TurnGate(git_dir)
    assert mine.begin_turn(timeout_s=0), "two turns at once"
    mine.end_turn()
    os.kill(turn.pid, signal.SIGKILL)
    turn.wait()
    with TurnGateClosing(git_dir) as gate, gate.restoring(timeout_s=0):
        pass  # kill -9 left nothing held


def test_a_turn_waits_for_a_restore_in_progress(git_dir: Path) -> None:
    restore, held_at = _holding(git_dir, "restore", hold_s=1.0)
    try:
        gate = TurnGate(git_dir)
        assert gate.begin_turn(timeout_s=30)
        assert time.monotonic() >= held_at + 1.0, "it waited for the restore to end"
        assert restore.wait(timeout=30) == 0
        gate.close()
    finally:
        restore.kill()
        restore.wait()


def test_a_turn_gives_up_waiting_after_its_bound_and_runs(git_dir: Path) -> None:
    restore = _holder(git_dir, "restore")
    try:
        gate = TurnGate(git_dir)
        assert gate.begin_turn(timeout_s=0.2) is False
        assert not gate.in_turn
    finally:
        restore.kill()
        restore.wait()


def test_a_sessions_own_turn_does_not_block_its_own_restore_and_is_held_again_after(
    git_dir: Path,
) -> None:
    gate = TurnGate(git_dir)
    assert gate.begin_turn(timeout_s=0)
    with gate.restoring(timeout_s=0):
        pass
    assert gate.in_turn
    with (
        TurnGateClosing(git_dir) as other,
        pytest.raises(OtherTurnRunningError),
        other.restoring(timeout_s=0),
    ):
        pass
    gate.end_turn()
    with TurnGateClosing(git_dir) as other, other.restoring(timeout_s=0):
        pass


def test_the_gate_file_is_private_and_outlives_its_holders(git_dir: Path) -> None:
    gate = TurnGate(git_dir)
    gate.begin_turn(timeout_s=0)
    gate.close()
    path = git_dir / "pi-rewind" / GATE_NAME
    assert path.is_file() and (path.stat().st_mode & 0o777) == 0o600


def test_where_the_private_dir_cannot_be_made_the_gate_stays_open(tmp_path: Path) -> None:
    git_dir = tmp_path / "odd"
    git_dir.mkdir()
    (git_dir / "pi-rewind").write_text("a file where our directory would be\n")
    gate = TurnGate(git_dir)
    assert gate.begin_turn(timeout_s=0)
    with gate.restoring(timeout_s=0):
        pass
    assert (git_dir / "pi-rewind").read_text().startswith("a file"), "left as it was"


class TurnGateClosing(TurnGate):
    def __enter__(self) -> TurnGate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
