"""A capture writes nothing of the user's: index, HEAD, refs, config and work tree stay
byte-identical, whatever the environment says and wherever it is started."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ledger.git.capture.scan import capture_tree
from ledger.git.repo import GitRepo
from ledger.git.store.snapshot import take_snapshot
from tests.gitkit import fresh_tree, git, run_python, user_state
from tests.snapshotkit import capture


def _dirty_repo(repo: Path) -> None:
    (repo / "README.md").write_text("work tree edit\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "staged.txt").write_text("staged, then edited\n")
    (repo / "untracked.txt").write_text("untracked\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "deep.txt").write_text("deep\n")


def test_capture_leaves_index_head_refs_and_work_tree_byte_identical(repo: Path) -> None:
    _dirty_repo(repo)
    time.sleep(1.05)  # let the user's index be non-racy, so that git would like to refresh it
    for step, start in enumerate((repo, repo / "sub", repo, repo / "sub")):
        if step == 2:
            (repo / "untracked.txt").write_text("changed between captures\n")
        before = user_state(repo)
        take_snapshot(GitRepo.discover(start))
        assert user_state(repo) == before, f"capture {step} changed the user's state"


def test_capture_ignores_an_inherited_git_index_file(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dirty_repo(repo)
    decoy = tmp_path / "decoy-index"
    decoy.write_bytes(b"not an index, must stay untouched")
    monkeypatch.setenv("GIT_INDEX_FILE", str(decoy))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("GIT_WORK_TREE", str(tmp_path))
    monkeypatch.setenv("GIT_LITERAL_PATHSPECS", "0")
    repo_obj = GitRepo(__import__("pygit2").Repository(str(repo)))
    before = user_state(repo)
    tree = capture_tree(repo_obj).tree
    assert decoy.read_bytes() == b"not an index, must stay untouched"
    assert user_state(repo) == before
    for name in ("GIT_INDEX_FILE", "GIT_DIR", "GIT_WORK_TREE", "GIT_LITERAL_PATHSPECS"):
        monkeypatch.delenv(name)
    assert tree == fresh_tree(repo, exclude=())


def test_capture_writes_only_its_private_files_inside_git_dir(repo: Path) -> None:
    _dirty_repo(repo)
    git_dir = repo / ".git"

    def listing() -> set[str]:
        out = set()
        for dirpath, dirnames, filenames in os.walk(git_dir):
            rel = Path(dirpath).relative_to(git_dir)
            if rel.parts[:1] == ("objects",):
                continue
            out.update(str(rel / n) for n in filenames)
        return out

    before = listing()
    take_snapshot(GitRepo.discover(repo))
    take_snapshot(GitRepo.discover(repo))
    new = listing() - before
    assert all(p.startswith("pi-rewind/") or p == "refs/pi-rewind/store" for p in new), new
    assert not (git_dir / "logs" / "refs" / "pi-rewind").exists()


def test_capture_never_runs_user_hooks(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "reference-transaction"
    marker = repo.parent / "hook-ran"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    take_snapshot(GitRepo.discover(repo))
    assert not marker.exists()


def test_two_processes_capturing_at_once_do_not_corrupt_the_private_index(repo: Path) -> None:
    for i in range(30):
        (repo / f"f{i}.txt").write_text(f"{i}\n")
    code = (
        "import sys\n"
        "from ledger.git.repo import GitRepo\n"
        "from ledger.git.capture.scan import capture_tree\n"
        "repo = GitRepo.discover('.')\n"
        "trees = {capture_tree(repo).tree for _ in range(8)}\n"
        "print(' '.join(sorted(trees)))\n"
    )
    procs = [run_python(code, cwd=repo) for _ in range(3)]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        outputs.append(out.decode().split())
    expected = fresh_tree(repo)
    assert all(trees == [expected] for trees in outputs)
    assert capture(repo, None) == expected
