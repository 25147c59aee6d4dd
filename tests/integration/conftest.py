"""Helpers for integration tests of the git layer: real repositories, real git, no mocks.

``fresh_tree`` is the oracle: the reference capture (a fresh ``GIT_INDEX_FILE``, ``git -c
core.autocrlf=false add -A``, ``git write-tree`` at the repository root). ``user_state`` records
everything of the user's that a capture must leave byte-identical.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ledger.git.capture import capture_tree
from ledger.git.repo import GitRepo
from ledger.settings import SnapshotSettings
from tests.conftest import ROOT, git

NO_PROTECTION = SnapshotSettings(max_untracked_file_bytes=0, protected_dirs=())


def fresh_tree(repo: Path, *, exclude: tuple[str, ...] = ()) -> str:
    """The reference capture: fresh index + ``git -c core.autocrlf=false add -A`` + write-tree."""
    with tempfile.TemporaryDirectory(prefix="pi-rewind-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        pathspec = ["--", ".", *[f":(exclude,literal){p}" for p in exclude]] if exclude else []
        git(repo, "-c", "core.autocrlf=false", "add", "-A", *pathspec, env=env)
        return git(repo, "write-tree", env=env).strip()


def capture(path: Path, settings: SnapshotSettings | None = NO_PROTECTION) -> str:
    """Our capture's tree, started from ``path`` (may be a subdirectory)."""
    return capture_tree(GitRepo.discover(path), settings).tree


def assert_parity(repo: Path, *, start: Path | None = None, exclude: tuple[str, ...] = ()) -> str:
    ours = capture(start or repo)
    expected = fresh_tree(repo, exclude=exclude)
    if ours != expected:
        raise AssertionError(
            f"capture {ours} != fresh-index tree {expected}\n"
            f"ours:\n{ls_tree(repo, ours)}\nexpected:\n{ls_tree(repo, expected)}"
        )
    return ours


def ls_tree(repo: Path, tree: str) -> str:
    return git(repo, "ls-tree", "-r", "--full-tree", tree)


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (IsADirectoryError, FileNotFoundError):
        return "-"


def user_state(repo: Path) -> dict[str, object]:
    """The user's index and HEAD bytes, refs other than ours, every file under ``.git`` outside
    objects and ``pi-rewind`` (path + content), and the work tree (path, mode, content, mtime)."""
    git_dir = repo / ".git"
    meta = {}
    for dirpath, dirnames, filenames in os.walk(git_dir):
        rel_dir = Path(dirpath).relative_to(git_dir)
        if rel_dir.parts[:1] in {("objects",), ("pi-rewind",)} or rel_dir.parts[:2] == (
            "refs",
            "pi-rewind",
        ):
            dirnames[:] = []
            continue
        for name in filenames:
            meta[str(rel_dir / name)] = _digest(Path(dirpath) / name)
    tree = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        if Path(dirpath) == repo and ".git" in dirnames:
            dirnames.remove(".git")
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            content = os.readlink(p) if p.is_symlink() else (_digest(p) if p.is_file() else "dir")
            tree[str(p.relative_to(repo))] = (st.st_mode, content, st.st_mtime_ns)
    return {"git": meta, "worktree": tree}


def set_mtime(path: Path, seconds_ago: float) -> None:
    import time

    t = time.time() - seconds_ago
    os.utime(path, (t, t), follow_symlinks=False)


def run_python(code: str, *, cwd: Path, timeout: float = 120) -> subprocess.Popen[bytes]:
    """Start a real Python process that can import ledger (for concurrency tests)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
