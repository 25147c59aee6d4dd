"""Two undos that both chose the same interrupted restore recover it once: the second one, which
reaches the capture lock after the first recovered it (while the first's recovery journal is
still held until its op record is appended), is refused with nothing changed, closes no journal
whose owner is alive, and records nothing; the first recovery stays the one that is undone next
(docs/design.md#crash-safe-restore; the review of cbc8863, finding 2).

Real processes throughout: the interruption is a ``rewind restore`` that SIGKILLs itself after
its deletions (as in ``test_crash_safe_restore``); each undo is its own Python process driving an
:class:`~ledger.engine.engine.Engine` on the session file, as ``rewind undo`` and the bridge do.
The first pauses between its restore and its op record, which is exactly the window in which
the second one used to "recover" the stale journal a second time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ledger.engine.engine import Engine
from ledger.engine.host import FileHost
from ledger.engine.undo_target import find_undo
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import open_journals
from ledger.ledgerview import LedgerView
from ledger.records import OP
from ledger.session.store import read_session
from tests.campaignkit import fault_campaign

World = Any  # fault_campaign.World, loaded from a file path

KILLED_AT = """
import os, signal, sys
from ledger.cli import main
from ledger.git.restore.apply import Steps
original = Steps.reach
def reach(self, step):
    if step == "after-delete":
        os.kill(os.getpid(), signal.SIGKILL)
    return original(self, step)
Steps.reach = reach
sys.exit(main(sys.argv[1:]))
"""

UNDO = """
import json, sys, time
from pathlib import Path
from ledger.engine.engine import Engine
from ledger.engine.host import FileHost
from ledger.engine.undo_target import require_undo, undo_files
from ledger.errors import LedgerError
from ledger.git.repo import GitRepo

session, agent, marks, role = sys.argv[1:5]
marks = Path(marks)

def wait_for(name):
    deadline = time.monotonic() + 120
    while not (marks / name).exists():
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.01)

engine = Engine(FileHost(Path(session), Path(agent) / "sessions"), GitRepo.discover(Path.cwd()))
target = require_undo(engine)
(marks / (role + "-chose")).write_text(target.interrupted.id if target.interrupted else "")
if role == "first":
    # Paused after its restore (capture lock and gate released), before its op record: its
    # recovery journal is still held, as in any undo between those two steps.
    original = Engine.append_op
    def paused(self, **kw):
        (marks / "first-restored").write_text("")
        wait_for("first-go")
        return original(self, **kw)
    Engine.append_op = paused
else:
    wait_for("second-go")
try:
    done = undo_files(engine, target)
except LedgerError as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
    sys.exit(1)
print(json.dumps({"record": done.record, "undo": done.undo, "changed": done.changed}))
"""


def _interrupted_world(tmp_path: Path) -> World:
    """A restore killed after its deletions, before its writes: the work tree is mixed and its
    journal is open with its owner gone."""
    world = fault_campaign.build_world(tmp_path, 200, 64)
    args = ["restore", str(world.session), world.entry, "--mode", "files", "--yes"]
    result = subprocess.run(
        [sys.executable, "-c", KILLED_AT, *args],
        cwd=world.repo,
        capture_output=True,
        text=True,
        env={**fault_campaign._env(), "PI_CODING_AGENT_DIR": str(world.agent_dir)},
    )
    assert result.returncode == -9, result.stderr
    return world


def _start(world: World, marks: Path, role: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", UNDO, str(world.session), str(world.agent_dir), str(marks), role],
        cwd=world.repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**fault_campaign._env(), "PI_CODING_AGENT_DIR": str(world.agent_dir)},
    )


def _wait_for(path: Path, *processes: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        for process in processes:
            assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path.name} never came"
        time.sleep(0.01)


def _ops_recording(world: World, snapshot: str) -> list[tuple[str | None, str | None]]:
    view = LedgerView.of(read_session(world.session))
    return [
        (r.current, r.undo) for r in view.records if r.custom_type == OP and r.current == snapshot
    ]


def test_a_second_undo_of_an_already_recovered_restore_is_refused_and_records_nothing(
    tmp_path: Path,
) -> None:
    world = _interrupted_world(tmp_path)
    repo = GitRepo.discover(world.repo)
    [interrupted] = open_journals(repo)[0]
    marks = tmp_path / "marks"
    marks.mkdir()

    second = _start(world, marks, "second")  # chooses the interrupted restore, then waits
    first = None
    try:
        _wait_for(marks / "second-chose", second)
        assert (marks / "second-chose").read_text() == interrupted.id
        first = _start(world, marks, "first")
        _wait_for(marks / "first-restored", first, second)
        assert (marks / "first-chose").read_text() == interrupted.id
        [recovery] = open_journals(repo)[0]  # the interrupted one is closed, its recovery held
        assert recovery.recovering == interrupted.id and recovery.owner_alive()
        assert fault_campaign.snapshot_files(world.repo) == world.before

        (marks / "second-go").write_text("")
        out, err = second.communicate(timeout=300)
        assert second.returncode == 1, (out, err)
        refused = json.loads(out)
        assert refused["error"] == "AlreadyRecoveredError", refused
        assert f"already recovered by process {first.pid}" in refused["message"], refused
        # Nothing was changed, and the first recovery's journal, whose owner is alive, is
        # still open and held.
        assert open_journals(repo)[0] == [recovery] and recovery.owner_alive()
        assert fault_campaign.snapshot_files(world.repo) == world.before
        assert _ops_recording(world, interrupted.undo) == []

        (marks / "first-go").write_text("")
        out, err = first.communicate(timeout=300)
        assert first.returncode == 0, (out, err)
        done = json.loads(out)
    finally:
        for process in (second, first):
            if process is not None and process.poll() is None:
                process.kill()
                process.communicate()

    # One recovery, recorded once, and undoable: the next undo brings back the mixed files the
    # first recovery replaced.
    assert done["changed"] and done["undo"]
    assert _ops_recording(world, interrupted.undo) == [(interrupted.undo, done["undo"])]
    assert open_journals(repo) == ([], [])
    assert fault_campaign.snapshot_files(world.repo) == world.before
    engine = Engine(FileHost(world.session, world.agent_dir / "sessions"), repo)
    offered = find_undo(engine)
    assert offered is not None and offered.interrupted is None
    assert offered.snapshot == done["undo"]


def test_an_undo_that_chose_a_restore_recovered_since_by_rewind_undo_is_refused(
    tmp_path: Path,
) -> None:
    world = _interrupted_world(tmp_path)
    repo = GitRepo.discover(world.repo)
    [interrupted] = open_journals(repo)[0]
    marks = tmp_path / "marks"
    marks.mkdir()

    late = _start(world, marks, "second")
    try:
        _wait_for(marks / "second-chose", late)
        undo = fault_campaign.rewind(world, "undo", str(world.session), "--yes")
        assert undo.returncode == 0, undo.stderr
        (marks / "second-go").write_text("")
        out, err = late.communicate(timeout=300)
    finally:
        if late.poll() is None:
            late.kill()
            late.communicate()

    assert late.returncode == 1, (out, err)
    refused = json.loads(out)
    assert refused["error"] == "AlreadyRecoveredError", refused
    assert "was already recovered" in refused["message"], refused
    [(_, recovery_undo)] = _ops_recording(world, interrupted.undo)
    assert recovery_undo is not None
    assert open_journals(repo) == ([], [])
    assert fault_campaign.snapshot_files(world.repo) == world.before
    offered = find_undo(Engine(FileHost(world.session, world.agent_dir / "sessions"), repo))
    assert offered is not None and offered.snapshot == recovery_undo
