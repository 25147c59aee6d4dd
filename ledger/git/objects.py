"""Small read-only object look-ups the engine needs (commit → tree, tree → tree changes).

Why it exists: the engine must compare a snapshot's tree with a fresh capture without importing
pygit2 itself (the git layer is the only code that does).

Invariants: read-only; a missing or malformed id gives ``None``, never an exception.
"""

from __future__ import annotations

import pygit2

from ledger.git.repo import GitRepo
from ledger.git.restore_safety import Change, tree_changes


def tree_of(repo: GitRepo, commit: str) -> str | None:
    """The tree id of ``commit``, or ``None`` when it is not an existing commit."""
    try:
        obj = repo.pygit2.get(commit)
    except (ValueError, TypeError, pygit2.GitError):
        return None
    if not isinstance(obj, pygit2.Commit):
        return None
    return str(obj.tree_id)


def leaf_changes(repo: GitRepo, old_tree: str, new_tree: str) -> list[Change] | None:
    """Leaf changes from ``old_tree`` to ``new_tree`` (no rename detection, sorted by path),
    with both sides' modes and object ids, or ``None`` when a tree is missing or corrupt.
    Identical subtrees are skipped, so the cost grows with the changes, not the repository."""
    try:
        return tree_changes(repo.pygit2, old_tree, new_tree)
    except (KeyError, ValueError, pygit2.GitError):
        return None
