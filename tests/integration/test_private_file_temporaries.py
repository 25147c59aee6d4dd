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
from pathlib import Path

from ledger.git.private import make_private_dir
from tests.gitkit import lock_holder, run_python

# A real writer stopped between writing its temporary and renaming it: ``os.replace`` says
# where the temporary is, then waits to be killed or stopped.
WRITER = """
import os, time
from pathlib import Path
from ledger.git.repo import GitRepo
from ledger.git.store.snapshot import LastExact, save_last_exact

def parked(src, dst, *args, **kwargs):
    print(src, flush=True)
    time.sleep(120)

os.replace = parked
save_last_exact(GitRepo.discover(Path.cwd()), LastExact("a" * 40, "b" * 40))
"""


def _parked_writer(
    repo: Path, children: list[subprocess.Popen[bytes]]
) -> tuple[subprocess.Popen[bytes], Path]:
    child = run_python(WRITER, cwd=repo)
    children.append(child)
    assert child.stdout is not None
    line = child.stdout.readline().decode().strip()
    assert line, child.stderr.read().decode() if child.stderr else "the writer said nothing"
    return child, Path(line)


def _doctor(repo: Path) -> dict[str, dict[str, object]]:
    result = subprocess.run(
        ["rewind", "doctor", "--json"], cwd=repo, capture_output=True, text=True, check=False
    )
    assert result.returncode in (0, 1), result.stderr
    return {item["path"]: item for item in json.loads(result.stdout)["leftovers"]}


def test_a_killed_writers_temporary_of_the_dedup_candidate_is_named_and_swept(
    repo: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    dead, temporary = _parked_writer(repo, children)
    assert temporary.name.startswith("last-snapshot.json.") and temporary.exists()
    dead.kill()  # SIGKILL while it holds the temporary, before the rename
    dead.wait()
    named = _doctor(repo)
    assert str(temporary) in named, f"not named: {sorted(named)}"
    assert named[str(temporary)]["removable"] is True
    subprocess.run(["rewind", "sweep"], cwd=repo, check=True, capture_output=True)
    assert not temporary.exists()


def test_a_stopped_writers_temporary_is_neither_named_nor_removed(
    repo: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    live, temporary = _parked_writer(repo, children)
    os.kill(live.pid, signal.SIGSTOP)  # stopped, however long: still its owner's
    try:
        assert str(temporary) not in _doctor(repo)
        subprocess.run(["rewind", "sweep"], cwd=repo, check=True, capture_output=True)
        assert temporary.exists()
    finally:
        os.kill(live.pid, signal.SIGCONT)


def test_an_older_versions_unlocked_temporary_is_named_and_swept(repo: Path) -> None:
    """Older versions wrote ``last-snapshot.json.<pid>.tmp`` without a lock: one left by a kill
    is removable (its writer is long gone; none holds a lock on it)."""
    home = make_private_dir(repo / ".git")
    old = home / "last-snapshot.json.4242.tmp"
    old.write_text("{}")
    assert str(old) in _doctor(repo)
    subprocess.run(["rewind", "sweep"], cwd=repo, check=True, capture_output=True)
    assert not old.exists()


def test_replacing_a_private_file_leaves_no_temporary(repo: Path) -> None:
    from ledger.git.owned import replace_private_file

    home = make_private_dir(repo / ".git")
    target = home / "status.json"
    for round_ in range(3):
        assert replace_private_file(target, f'{{"round": {round_}}}'.encode())
    assert json.loads(target.read_text()) == {"round": 2}
    assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []


def test_a_killed_restore_journals_temporary_is_named_and_swept(
    repo: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    """A restore's journal is written through ``.<name>.<hex>.tmp`` (fsync'd, renamed); a kill
    between the two leaves it: named and swept once its writer is gone, never while it lives."""
    from ledger.git.restore.journal import JOURNAL_DIR_NAME
    from ledger.git.store.leftovers import JOURNAL_DIR

    assert JOURNAL_DIR == JOURNAL_DIR_NAME
    directory = make_private_dir(repo / ".git", JOURNAL_DIR_NAME)
    dead = directory / ".restore-1.json.abcdef.tmp"
    dead.write_text("{}")  # what a writer killed before its rename left (its lock died with it)
    live = directory / ".restore-2.json.fedcba.tmp"
    children.append(lock_holder(live, cwd=repo))  # a live writer holding its temporary
    named = _doctor(repo)
    assert str(dead) in named and str(live) not in named
    subprocess.run(["rewind", "sweep"], cwd=repo, check=True, capture_output=True)
    assert not dead.exists() and live.exists()
