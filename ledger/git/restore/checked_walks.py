"""Checked tree walks kept for ``/rewind``'s previews: the same two trees are walked once.

Why it exists: a preview is the restore plan shown before the user chooses (issue 34: any
preview ≤ 200 ms at 100k files). The plan's walk from the work tree's capture to the target
tree reads and checks every changed level of the target (:func:`ledger.git.trees.tree_changes`
with ``validate``), which is most of a preview's time at an old point (~1,400 levels for
1,483 files). A user previews the same point again and again while choosing, and the capture
does not change while nobody writes, so the pair ``(capture tree, target tree)`` repeats.

Invariants:
- Only a walk that found no problem is kept, under the repository's object directory, both
  tree ids and ``core.ignorecase``: a tree id names the same bytes for ever, so the walk's
  changes and its verdict (every target entry read was safe) are the same whenever it is
  read again — except that an object can since have been pruned.
- Hence only a preview reads it (``build_plan(..., for_preview=True)``): a restore's plan
  always walks the objects again, so a missing object still refuses the restore, and every
  other check of the plan (work tree ``lstat``, nested repositories, ignored files, git
  directories, missing blobs) runs for a preview too.
- Bounded: at most :data:`PAIRS` walks and :data:`CHANGES` changes in all (least recently
  used dropped first); a walk larger than the whole bound is not kept. Thread-safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import pygit2

from ledger.git.trees import Change

PAIRS = 16
CHANGES = 200_000
"""Changes kept in all (~40 MB at most)."""

Key = tuple[str, str, str, bool]

_kept: OrderedDict[Key, tuple[Change, ...]] = OrderedDict()
_held = 0
_lock = threading.Lock()


def _key(repo: pygit2.Repository, old: str, new: str, ignore_case: bool) -> Key:
    return (repo.path, old, new, ignore_case)


def shown(
    repo: pygit2.Repository, old: str, new: str, ignore_case: bool
) -> tuple[Change, ...] | None:
    """The changes of an earlier checked walk from ``old`` to ``new`` that found no problem,
    or ``None``. For previews only (see the module)."""
    key = _key(repo, old, new, ignore_case)
    with _lock:
        found = _kept.get(key)
        if found is not None:
            _kept.move_to_end(key)
        return found


def keep(
    repo: pygit2.Repository, old: str, new: str, ignore_case: bool, changes: Sequence[Change]
) -> None:
    """Remember a checked walk that found no problem (the caller's word: it raised otherwise)."""
    global _held
    if len(changes) > CHANGES:
        return
    key = _key(repo, old, new, ignore_case)
    with _lock:
        if key in _kept:
            return
        _kept[key] = tuple(changes)
        _held += len(changes)
        while len(_kept) > PAIRS or _held > CHANGES:
            _, dropped = _kept.popitem(last=False)
            _held -= len(dropped)


def forget() -> None:
    """Drop every kept walk (tests)."""
    global _held
    with _lock:
        _kept.clear()
        _held = 0


__all__ = ["CHANGES", "PAIRS", "forget", "keep", "shown"]
