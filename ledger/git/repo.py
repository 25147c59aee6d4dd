"""Finding a repository and asking it about objects.

Why it exists: the rest of the package needs to know where a work tree's root is and whether a
snapshot commit still exists, without importing pygit2 itself.

Invariants: read-only. Opening a repository here never writes the index or any ref. A bare
repository, or a directory outside any work tree, is a :class:`NotARepositoryError`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pygit2

from ledger.errors import NotARepositoryError, UnsafeLayoutError


class GitRepo:
    """A non-bare git repository, located by :meth:`discover`."""

    def __init__(self, repository: pygit2.Repository, *, common_dir: Path | None = None) -> None:
        if repository.is_bare or not repository.workdir:
            raise NotARepositoryError(repository.path)
        self._repo = repository
        self.root = Path(os.path.realpath(repository.workdir))
        self.git_dir = Path(os.path.realpath(repository.path))
        self.common_dir = Path(os.path.realpath(common_dir)) if common_dir else self.git_dir
        """Where objects and refs live: ``git_dir`` except in a linked worktree."""

    @classmethod
    def discover(cls, start: Path | str) -> GitRepo:
        """The repository whose work tree contains ``start`` (a file or directory).

        The work tree is the one git itself uses from ``start`` (``git rev-parse
        --show-toplevel``), for every layout: a ``.git`` directory or file, a separate git dir,
        ``core.worktree``, ``GIT_DIR``/``GIT_WORK_TREE`` in the environment. Opening the git dir
        alone is not enough: libgit2 then takes the git dir's parent as the work tree, which for
        ``git init --separate-git-dir ~/proj.git`` is the home directory (data loss found in the
        fault campaign, docs/defects.md#separate-git-dir).

        Raises :class:`NotARepositoryError`, or :class:`UnsafeLayoutError` when the work tree
        does not hold ``start`` or holds the git dir under another name than ``.git``."""
        path = Path(start)
        probe = path if path.is_dir() else path.parent
        if not probe.is_dir():
            raise NotARepositoryError(path)
        located = _locate(probe)
        if located is None:
            raise NotARepositoryError(path)
        root, git_dir, common = located
        try:
            repository = pygit2.Repository(str(git_dir), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
            # In memory only (libgit2 writes no .git file or config for this).
            repository.workdir = str(root)
        except (pygit2.GitError, OSError, ValueError) as exc:
            raise NotARepositoryError(path) from exc
        repo = cls(repository, common_dir=common)
        problem = layout_problem(
            Path(os.path.realpath(probe)), repo.root, repo.git_dir, repo.common_dir
        )
        if problem:
            raise UnsafeLayoutError(path, problem, root=repo.root, git_dir=repo.git_dir)
        return repo

    @property
    def pygit2(self) -> pygit2.Repository:
        """The underlying pygit2 repository, for the git layer's own modules."""
        return self._repo

    def contains(self, path: Path | str) -> bool:
        """Whether ``path`` (resolved) is the work tree root or lies inside it."""
        return is_inside(os.path.realpath(path), self.root)

    def commit_exists(self, sha: str) -> bool:
        """``git cat-file -e <sha>^{commit}``: the object exists and is a commit."""
        try:
            obj = self._repo.get(sha)
        except (ValueError, TypeError, pygit2.GitError):
            return False
        return obj is not None and obj.type == pygit2.enums.ObjectType.COMMIT

    def missing_commits(self, shas: Iterable[str]) -> set[str]:
        """The subset of ``shas`` that are not existing commits."""
        return {sha for sha in set(shas) if not self.commit_exists(sha)}


def _locate(probe: Path) -> tuple[Path, Path, Path] | None:
    """``(work tree, git dir, common dir)`` as git sees them from ``probe``, or None outside a
    work tree (including inside a ``.git`` directory and in a bare repository).

    git reads the caller's ``GIT_DIR``/``GIT_WORK_TREE`` here on purpose: they say which work
    tree the user means. Everything after discovery runs git with these paths set explicitly
    (:mod:`ledger.git.runner`)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE", "GIT_PREFIX")
    }
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"],
            cwd=probe,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = result.stdout.decode("utf-8", "surrogateescape").splitlines()
    if result.returncode != 0 or len(lines) != 3 or not lines[0]:
        return None
    common = Path(lines[2])
    if not common.is_absolute():
        common = probe / common
    return Path(lines[0]), Path(lines[1]), common


def layout_problem(start: Path, root: Path, git_dir: Path, common_dir: Path) -> str | None:
    """Why this layout is unsafe to capture and restore, or None (all paths resolved).

    Safe: ``start`` lies in ``root``, and each git directory lies outside ``root`` or inside a
    path component named ``.git`` (the standard layout; captures skip ``.git`` by name)."""
    if not is_inside(start, root):
        return f"the work tree does not contain {start}"
    for directory in (git_dir, common_dir):
        if is_inside(directory, root):
            rel = directory.relative_to(root).parts if directory != root else ()
            if ".git" not in rel:
                return f"the git directory {directory} lies inside the work tree"
    return None


def is_inside(path: Path | str, root: Path | str) -> bool:
    """Whether ``path`` is ``root`` or lies inside it (both already resolved)."""
    p, r = os.fspath(path), os.fspath(root).rstrip(os.sep) or os.sep
    return p == r or p.startswith(r + os.sep) or r == os.sep
