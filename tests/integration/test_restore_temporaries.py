"""A killed restore's temporary index and the verifier's seed copies are named and swept.

Why: a restore that needs git's checkout (attributes, filters) writes a throw-away index,
``pi-rewind/restore-<pid>-<hex>.index``, and the verifier seeds its own index from copies,
``pi-rewind/verify/seed-index.<pid>.<tid>``. A kill between their creation and their removal
left them in the git directory, named by neither ``rewind doctor`` nor ``rewind sweep``. The
rules (ledger/git/store/leftovers.py): a restore's index is dead when the capture lock, which
every restore holds while its index exists, is free, and it is removed under that lock; a seed
copy is dead once its pid is gone (never by age).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gitkit import dead_pid, one_commit_repo
from tests.integration.test_kill_anytime import kill_when_present
from tests.integration.test_kill_anytime import rewind as _rewind

FILES = 400
FILE_BYTES = 48 << 10

RESTORE_CHILD = """
import sys
from ledger.git.repo import GitRepo
from ledger.git.restore.run import restore_commit
restore_commit(GitRepo.discover(sys.argv[1]), sys.argv[2])
"""


HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(120)
"""


def _leftovers(repo: Path) -> dict[str, dict[str, object]]:
    doctor = _rewind(repo, "doctor", "--json")
    assert doctor.returncode in (0, 1), doctor.stderr
    return {item["path"]: item for item in json.loads(doctor.stdout)["leftovers"]}


def _attributed_repo(tmp_path: Path) -> Path:
    """A repository whose restores take git's checkout path (a ``.gitattributes`` exists)."""
    return one_commit_repo(tmp_path / "repo", {".gitattributes": "*.dat -text\n", "a.txt": "a\n"})


def _snapshot(repo: Path) -> str:
    out = _rewind(repo, "snapshot", "--json")
    assert out.returncode == 0, out.stderr
    return str(json.loads(out.stdout)["commit"])


def test_a_killed_restores_temporary_index_is_named_and_swept(tmp_path: Path) -> None:
    repo = _attributed_repo(tmp_path)
    private = repo / ".git" / "pi-rewind"
    for attempt in range(6):
        for n in range(FILES):
            (repo / f"f{n:03}.dat").write_bytes(os.urandom(FILE_BYTES))
        point = _snapshot(repo)
        for n in range(FILES):
            (repo / f"f{n:03}.dat").write_bytes(os.urandom(FILE_BYTES))
        left = kill_when_present(
            [sys.executable, "-c", RESTORE_CHILD, str(repo), point],
            repo,
            "restore-*.index",
            private,
        )
        if left is not None:
            break
        print(f"attempt {attempt}: the restore finished before it could be killed")
    else:
        pytest.skip("every restore finished before its temporary index could be caught")
    named = _leftovers(repo)
    assert str(left) in named, f"{left} is not named by rewind doctor: {sorted(named)}"
    assert named[str(left)]["removable"] is True
    assert "restore" in str(named[str(left)]["what"])
    _rewind(repo, "sweep", "--json")
    assert not list(private.glob("restore-*.index*")), "rewind sweep leaves it"


def test_a_restores_index_is_kept_while_the_capture_lock_is_held(tmp_path: Path) -> None:
    """A live restore holds the capture lock for as long as its index exists: never removed
    from under it (a sweep racing a restore would make it fail half-way)."""
    repo = _attributed_repo(tmp_path)
    _snapshot(repo)
    private = repo / ".git" / "pi-rewind"
    index = private / f"restore-{os.getpid()}-0badcafe.index"
    index.write_bytes(b"DIRC")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(private / "lock")],
        cwd=repo,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
    try:
        named = _leftovers(repo)
        assert named[str(index)]["removable"] is False, named[str(index)]
        _rewind(repo, "sweep", "--json")
        assert index.exists(), "removed from under a live restore's lock"
    finally:
        holder.kill()
        holder.wait()
    _rewind(repo, "sweep", "--json")
    assert not index.exists(), "the lock is free: the sweep removes it"


def test_seed_copies_are_swept_once_their_process_is_gone_never_by_age(
    tmp_path: Path,
) -> None:
    repo = _attributed_repo(tmp_path)
    _snapshot(repo)
    verify = repo / ".git" / "pi-rewind" / "verify"
    verify.mkdir(parents=True, exist_ok=True)
    gone, alive = dead_pid(), os.getpid()
    dead_copies = [verify / f"seed-index.{gone}.7", verify / f"seed-state.{gone}.7"]
    live_copy = verify / f"seed-index.{alive}.9"
    old_copy = verify / f"seed-state.{alive}.11"
    for path in [*dead_copies, live_copy, old_copy]:
        path.write_bytes(b"seed")
    st = os.lstat(old_copy)
    os.utime(old_copy, (st.st_atime, st.st_mtime - 7 * 24 * 3600))  # a week: age proves nothing
    named = _leftovers(repo)
    for path in dead_copies:
        assert named[str(path)]["removable"] is True, named.get(str(path))
    for path in (live_copy, old_copy):  # a stopped verifier may still install either
        assert named[str(path)]["removable"] is False, named.get(str(path))
    _rewind(repo, "sweep", "--json")
    assert [p for p in dead_copies if p.exists()] == []
    assert live_copy.exists() and old_copy.exists(), "a live process's copies are kept"
