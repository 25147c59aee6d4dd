"""A session file deleted after a restore of it: the restore's journal no longer blocks the
repository, and commands naming the missing file say so instead of failing inside.

A finished restore's journal stays open until the next command finds the restore's record in
its session (ledger/recovery.py). If the session file is deleted first, nothing can record it
any more: the journal used to refuse every later restore of the repository, calling the tree
"between two states" (it was not: every file was written), with a hint, ``rewind undo
SESSION``, that failed with an internal error on the missing file (docs/defects.md).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from ledger.errors import InterruptedRestoreError
from ledger.git.liveness import boot_id, proc_start
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import open_journals
from tests.campaignkit import fault_campaign


def _restored_world(tmp_path: Path) -> object:
    """A world whose session was restored by the CLI: its journal is ``done``, and stays open
    until a later command finds the record."""
    world = fault_campaign.build_world(tmp_path, 20, 16)
    done = fault_campaign.rewind(
        world, "restore", str(world.session), world.entry, "--mode", "files", "--yes"
    )
    assert done.returncode == 0, done.stderr
    journals, running = open_journals(GitRepo.discover(world.repo))
    assert [j.state for j in journals] == ["done"] and running == []
    return world


def _rewrite(journal: Path, **fields: object) -> None:
    """The journal file with ``fields`` changed, as another process or state would write it."""
    data = json.loads(journal.read_text())
    data.update(fields)
    journal.write_text(json.dumps(data))


def test_a_finished_restore_of_a_deleted_session_does_not_block_the_repository(
    tmp_path: Path,
) -> None:
    world = _restored_world(tmp_path)
    world.session.unlink()

    doctor = fault_campaign.rewind(world, "doctor")
    assert doctor.returncode == 0, doctor.stderr
    assert "interrupted" not in doctor.stdout + doctor.stderr
    assert open_journals(GitRepo.discover(world.repo)) == ([], [])


def test_while_its_session_exists_the_finished_restore_is_settled_by_its_record(
    tmp_path: Path,
) -> None:
    world = _restored_world(tmp_path)
    assert fault_campaign.rewind(world, "doctor").returncode == 0
    assert open_journals(GitRepo.discover(world.repo)) == ([], [])


def test_a_finished_restore_whose_record_is_missing_still_refuses_while_its_session_exists(
    tmp_path: Path,
) -> None:
    world = _restored_world(tmp_path)
    # The record lost (a crash between the files and the record): only the journal knows.
    lines = world.session.read_text().splitlines(keepends=True)
    world.session.write_text("".join(line for line in lines if '"rewind-op"' not in line))

    refused = fault_campaign.rewind(
        world, "restore", str(world.session), world.entry, "--mode", "files", "--yes"
    )
    assert refused.returncode == 1
    assert "its files were written, but no record of it was found" in refused.stderr
    assert "between two states" not in refused.stderr  # every file was written and verified


def test_an_unfinished_restore_of_a_deleted_session_is_still_reported(tmp_path: Path) -> None:
    world = _restored_world(tmp_path)
    repo = GitRepo.discover(world.repo)
    journal = open_journals(repo)[0][0]
    _rewrite(journal.path, state="writing")  # as if killed mid-write: the tree may be mixed
    world.session.unlink()

    doctor = fault_campaign.rewind(world, "doctor")
    assert doctor.returncode == 1 and "interrupted" in doctor.stderr
    assert [j.state for j in open_journals(repo)[0]] == ["writing"]


@pytest.mark.skipif(proc_start(os.getpid()) is None, reason="no /proc: an owner cannot be named")
def test_a_finished_restore_of_a_missing_session_stays_open_while_its_owner_runs(
    tmp_path: Path,
) -> None:
    # Pi writes a new session's file lazily: a bridge that restored may hold the record in
    # memory while the file does not exist yet. This process plays that bridge.
    world = _restored_world(tmp_path)
    repo = GitRepo.discover(world.repo)
    journal = open_journals(repo)[0][0]
    _rewrite(
        journal.path,
        pid=os.getpid(),
        pid_start=proc_start(os.getpid()),
        boot_id=boot_id(),
        host=socket.gethostname(),
        lock=False,
    )
    world.session.unlink()

    doctor = fault_campaign.rewind(world, "doctor")
    assert f"a restore is running (pid {os.getpid()})" in doctor.stdout + doctor.stderr
    assert [j.id for j in open_journals(repo)[0]] == [journal.id]  # not closed


def test_where_an_owner_cannot_be_identified_a_live_pid_keeps_the_journal_open(
    tmp_path: Path,
) -> None:
    # Without a start time to compare (no /proc: macOS, REWIND_PORTABLE=1, or a journal of an
    # older version), a pid that some process has may be the owner: kept open. Once no process
    # has it, it is closed.
    world = _restored_world(tmp_path)
    repo = GitRepo.discover(world.repo)
    journal = open_journals(repo)[0][0]
    owner = subprocess.Popen(["sleep", "60"])
    try:
        _rewrite(journal.path, pid=owner.pid, pid_start=None, boot_id=None, lock=False)
        world.session.unlink()
        fault_campaign.rewind(world, "doctor")
        assert [j.id for j in open_journals(repo)[0]] == [journal.id]
    finally:
        owner.kill()
        owner.wait()
    doctor = fault_campaign.rewind(world, "doctor")
    assert doctor.returncode == 0, doctor.stderr
    assert open_journals(repo) == ([], [])


@pytest.mark.parametrize("command", ["restore", "status", "undo", "diff"])
def test_a_command_naming_a_deleted_session_file_says_so(tmp_path: Path, command: str) -> None:
    world = fault_campaign.build_world(tmp_path, 5, 16)
    missing = str(world.session.with_name("deleted.jsonl"))
    args = {"restore": [missing, world.entry, "--yes"], "diff": [missing, world.entry]}.get(
        command, [missing]
    )
    result = fault_campaign.rewind(world, command, *args)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert f"error: {missing}: no such file" in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_the_refusal_of_an_unfinished_restore_still_says_the_tree_may_be_mixed() -> None:
    error = InterruptedRestoreError(
        "a" * 40, "b" * 40, session="s.jsonl", entry="e1", started="today", state="writing"
    )
    assert "between two states" in str(error) and "rewind undo s.jsonl" in (error.hint or "")
