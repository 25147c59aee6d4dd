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

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from operator import itemgetter

import pygit2
from pygit2.enums import FileMode, ObjectType

from ledger.git.tree_names import Problem
from ledger.git.tree_records import plainly_safe, records
from ledger.git.trees import Change, TreeReader

TREE = FileMode.TREE
_NAME = itemgetter(1)

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


def verified(
    repo: pygit2.Repository, new: str, changes: Sequence[Change], ignore_case: bool
) -> bool:
    """Whether the checked walk to the tree ``new`` would find no problem, given the leaf
    ``changes`` it would return (computed elsewhere: the ``/rewind`` list's neighbouring
    diffs, :mod:`ledger.engine.preview_walk`).

    The checked walk judges each target-side level it reads: the levels of ``new`` at the
    directories above a changed path. Each of those levels is read here and judged the same
    way: plainly safe (:func:`ledger.git.tree_records.plainly_safe`), or else entry by entry by
    the walk's own reader and rules (:class:`ledger.git.trees.TreeReader`). With no problem the
    walk's entries are the canonical ones the neighbouring diffs hold. Anything else (a missing
    or corrupt level, a problem) is ``False``: the caller walks the trees and reports exactly
    what the walk finds. For previews only (see the module)."""
    below: dict[bytes, set[bytes]] = {}  # directory → the names of directories wanted in it
    for change in changes:
        parts = os.fsencode(change.path).split(b"/")
        for i in range(1, len(parts)):
            below.setdefault(b"/".join(parts[: i - 1]), set()).add(parts[i - 1])
    reader = TreeReader(repo, ignore_case=ignore_case)
    stack: list[tuple[bytes, str]] = [(b"", new)]
    while stack:
        where, oid = stack.pop()
        try:
            kind, data = repo.odb.read(oid)
        except (KeyError, ValueError, pygit2.GitError):
            return False
        level = records(data) if kind == ObjectType.TREE else None
        if level is None:
            return False
        if plainly_safe(level, ignore_case=ignore_case):
            named = dict(zip(map(_NAME, level), level, strict=True))
            found = [named.get(name) for name in below.get(where, ())]
            trees = [(r[1], r[2].hex()) for r in found if r is not None and int(r[0], 8) == TREE]
        else:
            problems: list[Problem] = []
            entries = reader.entries(oid, where + b"/" if where else b"", problems)
            if problems:
                return False
            wanted = below.get(where, set())
            trees = [(n, e.oid) for n, e in entries.items() if n in wanted and e.mode == TREE]
        for name, tree in trees:
            stack.append((where + b"/" + name if where else name, tree))
    return True


def forget() -> None:
    """Drop every kept walk (tests)."""
    global _held
    with _lock:
        _kept.clear()
        _held = 0


__all__ = ["CHANGES", "PAIRS", "forget", "keep", "shown", "verified"]
