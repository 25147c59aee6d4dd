"""Finding a repository and asking it about objects.

Why it exists: the rest of the package needs to know where a work tree's root is and whether a
snapshot commit still exists, without importing pygit2 itself.

Invariants: read-only. Opening a repository here never writes the index or any ref. A bare
repository, or a directory outside any work tree, is a :class:`NotARepositoryError`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pygit2

from ledger.errors import NotARepositoryError


class GitRepo:
    """A non-bare git repository, located by :meth:`discover`."""

    def __init__(self, repository: pygit2.Repository) -> None:
        if repository.is_bare or not repository.workdir:
            raise NotARepositoryError(repository.path)
        self._repo = repository
        self.root = Path(os.path.realpath(repository.workdir))
        self.git_dir = Path(os.path.realpath(repository.path))

    @classmethod
    def discover(cls, start: Path | str) -> GitRepo:
        """The repository whose work tree contains ``start`` (a file or directory)."""
        path = Path(start)
        probe = path if path.is_dir() else path.parent
        if not probe.exists():
            raise NotARepositoryError(path)
        try:
            git_path = pygit2.discover_repository(str(probe))
        except (pygit2.GitError, OSError, ValueError):
            git_path = None
        if not git_path:
            raise NotARepositoryError(path)
        try:
            return cls(pygit2.Repository(git_path))
        except (pygit2.GitError, OSError, ValueError) as exc:
            raise NotARepositoryError(path) from exc

    @property
    def pygit2(self) -> pygit2.Repository:
        """The underlying pygit2 repository, for the git layer's own modules."""
        return self._repo

    def contains(self, path: Path | str) -> bool:
        """Whether ``path`` (resolved) is the work tree root or lies inside it."""
        resolved = os.path.realpath(path)
        root = str(self.root)
        return resolved == root or resolved.startswith(root.rstrip(os.sep) + os.sep)

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
