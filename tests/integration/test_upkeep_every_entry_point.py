"""Our loose objects stay at or below ``gc.auto`` whoever takes the snapshots (issue 32, item 6).

The upkeep used to run only from the engine's sweep scheduler: with ``rewind snapshot``,
``rewind checkpoint`` or the library (no bridge, or retention off), 60 captures of 20 new files
left 1,508 loose objects in a repository whose ``gc.auto`` was 400. Now the store starts it, in
the background, after an append that finds the loose objects over the threshold
(docs/design.md#disk-upkeep).

The invariant asserted, once the last capture's background upkeep has ended: the loose objects
only the store reaches (ours) number at most ``gc.auto``; all loose objects at most ``gc.auto``
plus the user's own (which are git gc's). Nothing of the user's changes (packs, reflogs,
``packed-refs``, loose objects, refs, config, index: byte-compared), ``git fsck`` is clean and
every snapshot is complete and reads back what was written. Real git, real processes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.git.repo import GitRepo
from ledger.git.store.chain import STORE_REF, Store
from ledger.git.store.snapshot import take_snapshot
from ledger.git.store.upkeep import our_loose_objects, upkeep_running
from tests.gitkit import ROOT, git, one_commit_repo

GC_AUTO = 100
CAPTURES = 60
FILES_PER_CAPTURE = 20


def user_repository(tmp_path: Path) -> tuple[Path, list[str]]:
    """A user's repository with a pack, ``packed-refs``, reflogs and three loose objects of its
    own; ``gc.auto`` = 100; retention off."""
    repo = one_commit_repo(tmp_path / "user", {"README.md": "hello\n"})
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    git(repo, "branch", "topic")
    git(repo, "repack", "-adq")
    git(repo, "pack-refs", "--all")
    user_loose = [_hash_object(repo, f"user object {n}\n") for n in range(3)]
    git(repo, "config", "gc.auto", str(GC_AUTO))
    agent_dir = Path(os.environ["PI_CODING_AGENT_DIR"])
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "settings.json").write_text('{"rewind": {"retention": false}}')
    return repo, user_loose


def _hash_object(repo: Path, text: str) -> str:
    return (
        subprocess.run(
            ["git", "hash-object", "-w", "--stdin"],
            cwd=repo,
            input=text.encode(),
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )


def users_files(git_dir: Path, loose: list[str]) -> dict[str, str]:
    """Hashes of everything of the user's: loose objects, packs, refs, reflogs, packed-refs."""
    paths = [git_dir / "objects" / oid[:2] / oid[2:] for oid in loose]
    for sub in ("objects/pack", "refs", "logs"):
        for directory, _dirs, files in os.walk(git_dir / sub):
            paths += [Path(directory) / name for name in files]
    paths += [git_dir / name for name in ("packed-refs", "config", "index", "HEAD")]
    return {
        str(p.relative_to(git_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in paths
        if p.is_file() and "pi-rewind" not in p.parts
    }


def write_batch(repo: Path, number: int) -> dict[str, str]:
    files = {}
    for n in range(FILES_PER_CAPTURE):
        name = f"batch{number:02d}/file{n:02d}.txt"
        text = f"capture {number}, file {n}\n"
        (repo / name).parent.mkdir(exist_ok=True)
        (repo / name).write_text(text)
        files[name] = text
    return files


def wait_for_upkeep(repo: GitRepo, timeout_s: float = 120.0) -> None:
    """Until no upkeep holds the lock (bounded). The append that starts one takes the lock
    before it returns, so a free lock after the last append means no upkeep is left to run."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not upkeep_running(repo):
            return
        time.sleep(0.05)
    raise AssertionError("the background upkeep did not end within its bound")


def loose_count(repo: Path) -> int:
    out = git(repo, "count-objects", "-v")
    return int(next(line for line in out.splitlines() if line.startswith("count:")).split()[1])


def check_everything(
    repo: Path, user_loose: list[str], before: dict[str, str], taken: list[tuple[str, dict]]
) -> None:
    gitrepo = GitRepo.discover(repo)
    wait_for_upkeep(gitrepo)
    ours = our_loose_objects(gitrepo)
    assert len(ours) <= GC_AUTO, f"{len(ours)} loose objects of ours over gc.auto = {GC_AUTO}"
    assert loose_count(repo) <= GC_AUTO + len(user_loose)
    packs = sorted(n for n in os.listdir(repo / ".git/objects/pack") if n.endswith(".pack"))
    assert len(packs) > 1, "the upkeep ran: at least one pack of ours beside the user's"

    after = users_files(repo / ".git", user_loose)
    assert {k: after.get(k) for k in before} == before, "the user's files are byte-identical"
    assert all(k.startswith("objects/pack/pack-") for k in set(after) - set(before))
    fsck = subprocess.run(
        ["git", "fsck", "--no-dangling", "--no-progress"], cwd=repo, capture_output=True, text=True
    )
    assert fsck.returncode == 0 and not fsck.stdout.strip(), fsck.stdout + fsck.stderr

    kept = set(Store(gitrepo).snapshots())
    for commit, files in taken:
        assert commit in kept
        git(repo, "rev-list", "--objects", "--missing=error", commit)
        for name in (min(files), max(files)):
            assert git(repo, "show", f"{commit}:{name}") == files[name]
    git(repo, "rev-list", "--objects", "--missing=error", STORE_REF)


@pytest.mark.slow
def test_cli_snapshots_with_retention_off_keep_our_loose_objects_under_gc_auto(
    tmp_path: Path,
) -> None:
    repo, user_loose = user_repository(tmp_path)
    before = users_files(repo / ".git", user_loose)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REWIND_SERVED": "0"}
    taken: list[tuple[str, dict]] = []
    for number in range(CAPTURES):
        files = write_batch(repo, number)
        proc = subprocess.run(
            [sys.executable, "-m", "ledger", "snapshot", "--json"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        taken.append((json.loads(proc.stdout)["commit"], files))
    check_everything(repo, user_loose, before, taken)


def test_library_snapshots_keep_our_loose_objects_under_gc_auto(tmp_path: Path) -> None:
    repo, user_loose = user_repository(tmp_path)
    before = users_files(repo / ".git", user_loose)
    taken: list[tuple[str, dict]] = []
    for number in range(CAPTURES):
        files = write_batch(repo, number)
        report = take_snapshot(GitRepo.discover(repo), last_exact=None)
        taken.append((report.commit, files))
    check_everything(repo, user_loose, before, taken)


def test_gc_auto_zero_still_bounds_ours_at_gits_default(tmp_path: Path) -> None:
    """``gc.auto=0`` turns git's automatic gc off, not ours: our loose objects are bounded at
    git's default (6700); below it nothing is packed."""
    repo, user_loose = user_repository(tmp_path)
    git(repo, "config", "gc.auto", "0")
    for number in range(3):
        write_batch(repo, number)
        take_snapshot(GitRepo.discover(repo), last_exact=None)
    gitrepo = GitRepo.discover(repo)
    wait_for_upkeep(gitrepo)
    assert len(our_loose_objects(gitrepo)) > 60, "under 6700: nothing packed"
    from ledger.git.store.upkeep import gc_auto_threshold, upkeep_due

    assert gc_auto_threshold(gitrepo) == 6700 and not upkeep_due(gitrepo)
