"""``refs/pi-rewind/store``: shape, reading helpers, survival under gc, concurrent appends."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ledger.errors import StoreUpdateError
from ledger.git.repo import GitRepo
from ledger.git.store.chain import STORE_REF, Identity, Store
from ledger.git.store.snapshot import take_snapshot
from tests.gitkit import git, run_python

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def _snapshot(repo: Path, content: str) -> str:
    (repo / "notes.txt").write_text(content)
    return take_snapshot(GitRepo.discover(repo), last_exact=None).commit


def _show(repo: Path, rev: str) -> list[str]:
    return git(repo, "show", "-s", "--format=%T %P%n%s", rev).split()


def test_store_is_a_first_parent_chain_of_empty_tree_keepalives(repo: Path) -> None:
    a = _snapshot(repo, "a\n")
    b = _snapshot(repo, "b\n")
    head = git(repo, "rev-parse", STORE_REF).strip()
    tree, first, second, *subject = _show(repo, head)
    assert tree == EMPTY_TREE and second == b and " ".join(subject) == "pi rewind store"
    tree, only, *subject = _show(repo, first)
    assert tree == EMPTY_TREE and only == a and " ".join(subject) == "pi rewind store"
    assert git(repo, "cat-file", "commit", head).endswith("\n\npi rewind store\n")
    subjects = git(repo, "log", "--format=%s", STORE_REF).splitlines()
    assert sorted(subjects) == ["pi rewind snapshot"] * 2 + ["pi rewind store"] * 2


def test_snapshot_commit_is_parentless_with_the_user_identity_and_a_head_line(repo: Path) -> None:
    commit = _snapshot(repo, "x\n")
    raw = git(repo, "cat-file", "commit", commit)
    head = git(repo, "rev-parse", "HEAD").strip()
    assert "\nparent " not in raw
    assert "author Rewind Test <rewind@example.com> " in raw
    assert "committer Rewind Test <rewind@example.com> " in raw
    assert raw.split("\n\n", 1)[1] == f"pi rewind snapshot\n\nHead: {head}\nBranch: main\n"
    assert git(repo, "log", "-1", "--format=%s", commit).strip() == "pi rewind snapshot"


def test_snapshots_survive_gc_while_the_store_reaches_them(repo: Path) -> None:
    commits = [_snapshot(repo, f"{i}\n") for i in range(3)]
    (repo / "untracked-only.txt").write_text("only in a snapshot\n")
    commits.append(take_snapshot(GitRepo.discover(repo), last_exact=None).commit)
    (repo / "untracked-only.txt").unlink()
    git(repo, "gc", "-q", "--prune=now")
    for commit in commits:
        git(repo, "cat-file", "-e", f"{commit}^{{commit}}")
        git(repo, "cat-file", "-e", f"{commit}:untracked-only.txt") if commit == commits[
            -1
        ] else None
    store = Store(GitRepo.discover(repo))
    assert store.snapshots() == commits
    assert all(store.reaches(c) for c in commits)


def test_store_helpers_on_a_missing_ref_and_a_ref_set_to_a_snapshot(repo: Path) -> None:
    gitrepo = GitRepo.discover(repo)
    store = Store(gitrepo)
    assert store.head() is None and store.snapshots() == []
    tree = git(repo, "write-tree").strip()
    plain = git(repo, "commit-tree", tree, "-m", "rewind snapshot test").strip()
    assert not store.reaches(plain)
    git(repo, "update-ref", STORE_REF, plain)
    assert store.snapshots() == [plain] and store.reaches(plain)
    assert gitrepo.commit_exists(plain)
    appended = _snapshot(repo, "after\n")
    assert store.snapshots() == [plain, appended]
    assert not store.reaches("0" * 40)


def test_store_append_retries_a_lost_race_without_losing_either_snapshot(repo: Path) -> None:
    gitrepo = GitRepo.discover(repo)
    first = _snapshot(repo, "first\n")
    racer = _snapshot(repo, "racer\n")
    git(repo, "update-ref", STORE_REF, git(repo, "rev-parse", f"{STORE_REF}^1").strip())
    ident = Identity("T", "t@example.com")
    moved = []

    def sleep(_: float) -> None:
        moved.append(True)

    store = Store(gitrepo, sleep=sleep, rng=random.Random(1))
    # Make the first attempt lose: move the ref between read and swap.
    original_head = store.head

    def racing_head() -> str | None:
        value = original_head()
        if not moved:
            Store(gitrepo).append(racer, ident, 1_700_000_000, 0)
        return value

    store.head = racing_head  # type: ignore[method-assign]
    third = _snapshot(repo, "third\n")
    store.append(third, ident, 1_700_000_001, 0)
    assert moved, "the first swap should have failed"
    snaps = Store(gitrepo).snapshots()
    assert first in snaps and racer in snaps and third in snaps


def test_store_append_gives_up_after_bounded_attempts(repo: Path) -> None:
    gitrepo = GitRepo.discover(repo)
    commit = _snapshot(repo, "x\n")
    lock = repo / ".git" / "refs" / "pi-rewind" / "store.lock"
    lock.write_text("held by someone else\n")
    try:
        with pytest.raises(StoreUpdateError, match="failed to update rewind store ref"):
            Store(gitrepo, attempts=3, patience_s=0.0, sleep=lambda _: None).append(
                commit, Identity("T", "t@e"), 1_700_000_000, 0
            )
    finally:
        lock.unlink()


def _store_moved_by_another_writer(repo: Path, store: Store, times: int) -> list[str]:
    """Every read of ``store``'s head is followed, ``times`` times, by another writer's append
    (a process that keeps the head moving, as a sweep or many captures on a loaded machine);
    returns the other writer's snapshots."""
    gitrepo = GitRepo.discover(repo)
    others: list[str] = []
    original_head = store.head

    def racing_head() -> str | None:
        value = original_head()
        if len(others) < times:
            (repo / "other.txt").write_text(f"other {len(others)}\n")
            other = take_snapshot(gitrepo, last_exact=None).commit  # appends to the store
            others.append(other)
        return value

    store.head = racing_head  # type: ignore[method-assign]
    return others


def test_an_append_outlasts_a_writer_that_moves_the_head_past_its_attempt_count(
    repo: Path,
) -> None:
    """25 attempts last about a second; losing them to one busy writer cost a prompt its point.
    The swap keeps trying for its patience (a fake clock: 40 losses, 10 ms each)."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += 0.01

    mine = _snapshot(repo, "mine\n")
    store = Store(GitRepo.discover(repo), sleep=sleep, clock=lambda: now[0], rng=random.Random(2))
    others = _store_moved_by_another_writer(repo, store, 40)
    store.append(mine, Identity("T", "t@example.com"), 1_700_000_000, 0)
    assert len(others) == 40 and store.attempts == 25
    kept = Store(GitRepo.discover(repo)).snapshots()
    assert mine in kept and all(other in kept for other in others)


def test_an_append_gives_up_once_both_its_attempts_and_its_patience_are_spent(
    repo: Path,
) -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += 1.0  # each lost attempt costs a second: a 10 s patience ends after 10 attempts

    mine = _snapshot(repo, "mine\n")
    store = Store(
        GitRepo.discover(repo), attempts=5, patience_s=10.0, sleep=sleep, clock=lambda: now[0]
    )
    others = _store_moved_by_another_writer(repo, store, 1_000)
    with pytest.raises(StoreUpdateError, match="after 10 attempts"):
        store.append(mine, Identity("T", "t@example.com"), 1_700_000_000, 0)
    assert len(others) == 10
    assert all(other in Store(GitRepo.discover(repo)).snapshots() for other in others)


def test_concurrent_processes_appending_never_lose_a_snapshot(repo: Path) -> None:
    code = (
        "import sys\n"
        "from ledger.git.repo import GitRepo\n"
        "from ledger.git.store.snapshot import take_snapshot\n"
        "from pathlib import Path\n"
        "tag = sys.argv[1] if len(sys.argv) > 1 else ''\n"
        "repo = GitRepo.discover('.')\n"
        "out = []\n"
        "for i in range(6):\n"
        "    Path(f'w-{WORKER}.txt').write_text(f'{WORKER} {i}\\n')\n"
        "    out.append(take_snapshot(repo, last_exact=None).commit)\n"
        "print(' '.join(out))\n"
    )
    procs = [run_python(code.replace("WORKER", str(w)), cwd=repo) for w in range(4)]
    made = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        made += out.decode().split()
    assert len(made) == 24
    kept = Store(GitRepo.discover(repo)).snapshots()
    assert set(made) <= set(kept)
    git(repo, "gc", "-q", "--prune=now")
    for commit in made:
        git(repo, "cat-file", "-e", f"{commit}^{{commit}}")
