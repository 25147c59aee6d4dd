"""A restore target composed of two trees: a point's files, with some paths kept as they are now
(the agent's ``rewind`` tool, docs/pi.md#the-agents-rewind-tool).

Why it exists: the tool's restore takes back only the files that hold this conversation's
agent's work and leaves every other file as it is. Rather than teach the restore layer a second,
partial mode, the tool restores an ordinary target: the point's tree, edited so that each
left-alone path holds its current entry (or stays absent). The restore then writes, verifies and
journals exactly as every other restore does, and its ``rewind-op`` names a real snapshot whose
files equal the work tree after it (the reference's undo works unchanged).

Invariants: writes only git objects (trees); the blobs named are already in the repository (the
current side comes from the capture the plan was made from). A file that replaces a directory, or
the reverse, is handled as ``git write-tree`` would (:func:`ledger.git.capture.treeedit.edit_tree`).
Anything the tree editor cannot express is a :class:`~ledger.errors.GitError`, never a partial
tree.
"""

from __future__ import annotations

from collections.abc import Sequence

import pygit2

from ledger.errors import GitError
from ledger.git.capture.treeedit import LazyUnsupported, edit_tree
from ledger.git.repo import GitRepo
from ledger.git.trees import Entry


def keep_as_now(repo: GitRepo, target_tree: str, kept: Sequence[tuple[str, Entry | None]]) -> str:
    """``target_tree`` with each ``(path, entry)`` of ``kept`` set to ``entry`` (``None``: the
    path is absent now, so it stays absent); returns the new tree's id."""
    changes: dict[str, tuple[int, pygit2.Oid] | None] = {}
    for path, entry in kept:
        changes[path] = None if entry is None else (entry.mode, pygit2.Oid(hex=entry.oid))
    try:
        return edit_tree(repo.pygit2, target_tree, changes)
    except LazyUnsupported as exc:
        raise GitError("compose", f"could not compose the restore's target tree: {exc}") from exc


__all__ = ["keep_as_now"]
