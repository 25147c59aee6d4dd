"""Small read-only object look-ups the engine needs (commit → tree).

Why it exists: the engine must compare a snapshot's tree with a fresh capture without importing
pygit2 itself (the git layer is the only code that does).

Invariants: read-only; a missing or malformed id gives ``None``, never an exception.
"""

from __future__ import annotations

import pygit2

from ledger.git.repo import GitRepo


def tree_of(repo: GitRepo, commit: str) -> str | None:
    """The tree id of ``commit``, or ``None`` when it is not an existing commit."""
    try:
        obj = repo.pygit2.get(commit)
    except (ValueError, TypeError, pygit2.GitError):
        return None
    if not isinstance(obj, pygit2.Commit):
        return None
    return str(obj.tree_id)
