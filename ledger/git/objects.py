"""Deprecated: the commit → tree look-up is :meth:`ledger.git.repo.GitRepo.tree_of`.

Kept only while ``ledger/engine/engine.py`` and ``ledger/engine/operations.py`` still call
``tree_of(repo, sha)``; once they call ``repo.tree_of(sha)``, delete this module.
"""

from __future__ import annotations

from ledger.git.repo import GitRepo


def tree_of(repo: GitRepo, commit: str) -> str | None:
    """The tree id of ``commit``, or ``None`` when it is not an existing commit."""
    return repo.tree_of(commit)
