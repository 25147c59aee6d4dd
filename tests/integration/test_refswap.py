"""The in-process compare-and-swap of the store ref speaks git's lock-file protocol: it reads
packed refs, loses to a held lock or a moved ref, leaves odd layouts to git, and never loses an
append when real ``git update-ref`` processes race with it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ledger.git.repo import GitRepo
from ledger.git.store.chain import STORE_REF, Identity, Store
from ledger.git.store.refswap import SwapOutcome, swap_loose_ref
from tests.gitkit import git, run_python

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def _commit(repo: Path, message: str) -> str:
    return git(repo, "commit-tree", EMPTY_TREE, "-m", message).strip()


def _ref(repo: Path) -> str:
    return git(repo, "rev-parse", "--verify", "-q", STORE_REF, check=False).strip()


def test_swap_creates_the_ref_only_when_it_must_not_exist(repo: Path) -> None:
    common = repo / ".git"
    a, b = _commit(repo, "a"), _commit(repo, "b")
    assert swap_loose_ref(common, STORE_REF, a, b) is SwapOutcome.LOST
    assert _ref(repo) == ""
    assert swap_loose_ref(common, STORE_REF, a, None) is SwapOutcome.SWAPPED
    assert _ref(repo) == a
    assert swap_loose_ref(common, STORE_REF, b, None) is SwapOutcome.LOST
    assert swap_loose_ref(common, STORE_REF, b, a) is SwapOutcome.SWAPPED
    assert _ref(repo) == b
    assert not (common / (STORE_REF + ".lock")).exists()


def test_swap_reads_a_packed_ref_and_a_loose_file_overrides_it(repo: Path) -> None:
    common = repo / ".git"
    a, b, c = _commit(repo, "a"), _commit(repo, "b"), _commit(repo, "c")
    git(repo, "update-ref", STORE_REF, a)
    git(repo, "pack-refs", "--all", "--prune")
    assert not (common / STORE_REF).exists()
    assert swap_loose_ref(common, STORE_REF, b, None) is SwapOutcome.LOST
    assert swap_loose_ref(common, STORE_REF, b, c) is SwapOutcome.LOST
    assert swap_loose_ref(common, STORE_REF, b, a) is SwapOutcome.SWAPPED
    assert _ref(repo) == b
    git(repo, "pack-refs", "--all", "--prune")
    assert _ref(repo) == b


def test_swap_loses_to_a_held_lock_and_leaves_it_in_place(repo: Path) -> None:
    common = repo / ".git"
    a = _commit(repo, "a")
    lock = common / (STORE_REF + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("someone else's\n")
    assert swap_loose_ref(common, STORE_REF, a, None) is SwapOutcome.LOST
    assert lock.read_text() == "someone else's\n" and _ref(repo) == ""


def test_swap_leaves_a_symbolic_ref_and_a_directory_in_the_way_to_git(repo: Path) -> None:
    common = repo / ".git"
    a = _commit(repo, "a")
    git(repo, "symbolic-ref", STORE_REF, "refs/heads/main")
    head = git(repo, "rev-parse", "HEAD").strip()
    assert swap_loose_ref(common, STORE_REF, a, head) is SwapOutcome.UNSUPPORTED
    git(repo, "update-ref", "-d", "--no-deref", STORE_REF)
    (common / STORE_REF / "x").mkdir(parents=True)
    assert swap_loose_ref(common, STORE_REF, a, None) is SwapOutcome.UNSUPPORTED
    assert not (common / (STORE_REF + ".lock")).exists()


def test_store_appends_through_git_when_the_ref_is_symbolic(repo: Path) -> None:
    """An unsupported layout falls back to ``git update-ref``; git's verdict stands."""
    git(repo, "symbolic-ref", STORE_REF, "refs/heads/main")
    snap = _commit(repo, "pi rewind snapshot")
    head = Store(GitRepo.discover(repo)).append(snap, Identity("T", "t@e"), 1_700_000_000, 0)
    assert _ref(repo) == head
    assert git(repo, "rev-parse", f"{head}^2").strip() == snap


_GIT_APPENDER = r"""
set -u
for i in $(seq 1 40); do
  snap=$(git commit-tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904 -m "git $i")
  echo "$snap"
  while :; do
    old=$(git rev-parse --verify -q refs/pi-rewind/store || echo 0000000000000000000000000000000000000000)
    if [ "$old" = 0000000000000000000000000000000000000000 ]; then
      new=$(git commit-tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904 -p "$snap" -m "pi rewind store")
    else
      new=$(git commit-tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904 -p "$old" -p "$snap" -m "pi rewind store")
    fi
    git update-ref refs/pi-rewind/store "$new" "$old" 2>/dev/null && break
  done
done
"""

_PY_APPENDER = """
import random
from ledger.git.repo import GitRepo
from ledger.git.store.chain import Identity, Store
repo = GitRepo.discover('.')
store = Store(repo, rng=random.Random(TAG))
empty = repo.pygit2.TreeBuilder().write()
for i in range(40):
    sig = Identity('T', 't@e').signature(1_700_000_000 + i, 0)
    snap = str(repo.pygit2.create_commit(None, sig, sig, f'py TAG {i}', empty, []))
    print(snap, flush=True)
    store.append(snap, Identity('T', 't@e'), 1_700_000_000 + i, 0)
"""


def test_appends_racing_with_real_git_update_ref_processes_are_never_lost(repo: Path) -> None:
    shells = [
        subprocess.Popen(
            ["bash", "-c", _GIT_APPENDER], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    pythons = [run_python(_PY_APPENDER.replace("TAG", str(t)), cwd=repo) for t in range(2)]
    made: list[str] = []
    for proc in [*shells, *pythons]:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()
        made += out.decode().split()
    assert len(made) == 160
    kept = Store(GitRepo.discover(repo)).snapshots()
    assert set(made) <= set(kept)
    assert not (repo / ".git" / (STORE_REF + ".lock")).exists()


def test_swap_never_reads_a_fifo_in_place_of_the_ref_or_packed_refs(repo: Path) -> None:
    """A FIFO would block a read: anything but a regular file is left to git."""
    import os

    common = repo / ".git"
    a = _commit(repo, "a")
    (common / "refs" / "pi-rewind").mkdir(parents=True)
    os.mkfifo(common / STORE_REF)
    assert swap_loose_ref(common, STORE_REF, a, None) is SwapOutcome.UNSUPPORTED
    (common / STORE_REF).unlink()
    os.mkfifo(common / "packed-refs")
    try:
        assert swap_loose_ref(common, STORE_REF, a, None) is SwapOutcome.UNSUPPORTED
    finally:
        (common / "packed-refs").unlink()
    assert swap_loose_ref(common, STORE_REF, a, None) is SwapOutcome.SWAPPED
    assert not (common / (STORE_REF + ".lock")).exists()
