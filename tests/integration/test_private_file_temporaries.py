"""A private file rewritten whole (the dedup candidate, the capture state, the usage cache, the
watcher's status, the kept tree diffs) goes through a temporary that is its own lock
(``ledger.git.owned.replace_private_file``): a ``kill -9`` between its creation and its rename
leaves one that ``rewind doctor`` names and ``rewind sweep`` removes, and a stopped writer's is
never touched.

Found by the kill-anytime test in CI: a capture killed in its last millisecond left
``last-snapshot.json.<pid>.tmp``, which carried only a pid, and nothing named it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.git.private import make_private_dir
from tests.gitkit import dead_pid, lock_holder, run_python

# A real writer stopped between writing its temporary and renaming it: ``os.replace`` says
# where the temporary is, then waits to be killed or stopped. ``WHICH``: the dedup candidate
# (``save_last_exact``) or a restore journal (``journal._write``, the journal's lock not held:
# as after its owner was killed).
WRITER = """
import os, sys, time
from pathlib import Path
from ledger.git.repo import GitRepo
from ledger.git.store.snapshot import LastExact, save_last_exact
from ledger.git.restore import journal as J

def parked(src, dst, *args, **kwargs):
    print(src, flush=True)
    time.sleep(120)

os.replace = parked
repo = GitRepo.discover(Path.cwd())
if sys.argv[1] == "last-snapshot":
    save_last_exact(repo, LastExact("a" * 40, "b" * 40))
else:
    directory = J.journal_dir(repo)
    directory.mkdir(parents=True, exist_ok=True)
    journal = J.Journal("d7445323", "a" * 40, "b" * 40, "c" * 40, "d" * 40, 1795900543307)
    J._write(directory / "1795900543307-d7445323.json", journal)
"""


def _parked_writer(
    repo: Path, children: list[subprocess.Popen[bytes]], which: str = "last-snapshot"
) -> tuple[subprocess.Popen[bytes], Path]:
    child = run_python(WRITER.replace("sys.argv[1]", repr(which)), cwd=repo)
    children.append(child)
    assert child.stdout is not None
    line = child.stdout.readline().decode().strip()
    assert line, child.stderr.read().decode() if child.stderr else "the writer said nothing"
    return child, Path(line)


def _doctor(repo: Path) -> dict[str, dict[str, object]]:
    result = subprocess.run(
        [sys.executable, "-m", "ledger", "doctor", "--json"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    return {item["path"]: item for item in json.loads(result.stdout)["leftovers"]}


def _sweep(repo: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "ledger", "sweep"], cwd=repo, check=True, capture_output=True
    )


@pytest.mark.parametrize("which", ["last-snapshot", "journal"])
def test_a_killed_writers_temporary_is_named_and_swept(
    repo: Path, children: list[subprocess.Popen[bytes]], which: str
) -> None:
    dead, temporary = _parked_writer(repo, children, which)
    assert temporary.exists()
    dead.kill()  # SIGKILL while it holds the temporary, before the rename
    dead.wait()
    named = _doctor(repo)
    assert str(temporary) in named, f"not named: {sorted(named)}"
    assert named[str(temporary)]["removable"] is True
    _sweep(repo)
    assert not temporary.exists()


@pytest.mark.parametrize("which", ["last-snapshot", "journal"])
def test_a_stopped_writers_temporary_is_neither_named_nor_removed(
    repo: Path, children: list[subprocess.Popen[bytes]], which: str
) -> None:
    live, temporary = _parked_writer(repo, children, which)
    os.kill(live.pid, signal.SIGSTOP)  # stopped, however long: still its owner's
    try:
        assert str(temporary) not in _doctor(repo)
        _sweep(repo)
        assert temporary.exists()
    finally:
        os.kill(live.pid, signal.SIGCONT)


def test_an_older_versions_unlocked_temporary_is_named_and_swept(repo: Path) -> None:
    """Older versions wrote ``last-snapshot.json.<pid>.tmp`` without a lock: one left by a kill
    is removable once no process has that pid; one whose writer runs (an old bridge open across
    an upgrade) is kept, though it holds no lock."""
    home = make_private_dir(repo / ".git")
    old = home / f"last-snapshot.json.{dead_pid()}.tmp"
    old.write_text("{}")
    running = home / f"capture-state.json.{os.getpid()}.tmp"
    running.write_text("{}")
    named = _doctor(repo)
    assert str(old) in named and str(running) not in named
    _sweep(repo)
    assert not old.exists() and running.exists()


def test_replacing_a_private_file_leaves_no_temporary(repo: Path) -> None:
    from ledger.git.owned import replace_private_file

    home = make_private_dir(repo / ".git")
    target = home / "status.json"
    for round_ in range(3):
        assert replace_private_file(target, f'{{"round": {round_}}}'.encode())
    assert json.loads(target.read_text()) == {"round": 2}
    assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []


# A restore opening its journal, preempted between the O_EXCL creation of the journal's
# temporary and its flock (review of stop 42); it resumes once <go> exists.
PARKED_JOURNAL = """
import fcntl, os, time
from pathlib import Path
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import open_journal
real, parked = fcntl.flock, []
def flock(fd, op):
    name = os.readlink(f"/proc/self/fd/{fd}")
    if not parked and name.endswith(".tmp") and op & fcntl.LOCK_EX:
        parked.append(name)
        print(name, flush=True)
        while not os.path.exists("go"):
            time.sleep(0.01)
    return real(fd, op)
fcntl.flock = flock
try:
    open_journal(GitRepo.discover(Path.cwd()), undo="a" * 40, undo_tree="b" * 40,
                 target="c" * 40, target_tree="d" * 40, staging=None, now_ms=1)
    print("opened", flush=True)
except Exception as exc:
    print("raised", type(exc).__name__, flush=True)
"""


def test_a_sweep_between_a_journal_temporarys_creation_and_its_flock_fails_no_restore(
    repo: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    go = repo / ".git" / "go"
    child = run_python(PARKED_JOURNAL.replace('"go"', repr(str(go))), cwd=repo)
    children.append(child)
    assert child.stdout is not None
    temporary = Path(child.stdout.readline().decode().strip())
    assert temporary.name.endswith(".tmp")
    _sweep(repo)
    go.touch()
    assert child.stdout.readline().decode().strip() == "opened"


def test_a_journals_temporary_is_judged_by_its_journals_lock_too(
    repo: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    """Older versions wrote a journal's temporary without a lock of its own; its journal's lock,
    held by the restore's owner from before the first write, says whether it still runs."""
    from ledger.git.restore.journal import JOURNAL_DIR_NAME
    from ledger.git.store.leftovers import JOURNAL_DIR

    assert JOURNAL_DIR == JOURNAL_DIR_NAME
    directory = make_private_dir(repo / ".git", JOURNAL_DIR_NAME)
    dead = directory / ".1-aaaaaaaa.json.abcdef.tmp"
    dead.write_text("{}")  # its owner was killed: its journal's lock is free
    live = directory / ".2-bbbbbbbb.json.fedcba.tmp"
    live.write_text("{}")  # unlocked, as older versions wrote it; its owner runs
    children.append(lock_holder(directory / "2-bbbbbbbb.lock", cwd=repo))
    named = _doctor(repo)
    assert str(dead) in named and str(live) not in named
    _sweep(repo)
    assert not dead.exists() and live.exists()
