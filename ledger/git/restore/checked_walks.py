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
from ledger.git.tree_records import Record, plainly_safe, records, unique_names
from ledger.git.trees import Change, TreeReader

TREE = FileMode.TREE
_NAME = itemgetter(1)
_MODE = itemgetter(0)
_LEAF_MODES = frozenset({b"100644", b"100755", b"120000", b"160000"})
"""The modes git writes for what is not a directory (any other spelling is looked at)."""
_NONE: frozenset[bytes] = frozenset()

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
    repo: pygit2.Repository, old: str, new: str, changes: Sequence[Change], ignore_case: bool
) -> bool:
    """Whether the checked walk from the tree ``old`` to the tree ``new`` would find no problem
    and return exactly ``changes`` (computed elsewhere: the ``/rewind`` list's neighbouring
    diffs, :mod:`ledger.engine.preview_walk`). Only for two different trees.

    The walk judges each target-side level it reads: the levels of ``new`` at the directories
    whose entries differ between the two trees. Here both trees are read down the directories
    above a changed path only, and every other subdirectory of ``new`` must have the very same
    record in ``old`` (else the walk would go down there too, e.g. into a subtree that differs
    with no leaf change — an empty one, or one holding a name twice: ``False``). Each target
    level read is judged as the walk judges it: plainly safe
    (:func:`ledger.git.tree_records.plainly_safe`), or else entry by entry by the walk's own
    reader and rules (:class:`ledger.git.trees.TreeReader`); with no problem the walk's
    entries are the canonical ones the neighbouring diffs hold. Anything else (a missing or
    corrupt level, a name twice on the old side, a problem) is ``False``: the caller walks the
    trees and reports exactly what the walk finds. For previews only (see the module)."""
    below: dict[bytes, set[bytes]] = {}  # directory → the names of directories wanted in it
    for change in changes:
        parts = os.fsencode(change.path).split(b"/")
        for i in range(1, len(parts)):
            below.setdefault(b"/".join(parts[: i - 1]), set()).add(parts[i - 1])
    reader = TreeReader(repo, ignore_case=ignore_case)
    stack: list[tuple[bytes, str, str | None]] = [(b"", new, old)]
    while stack:
        where, new_id, old_id = stack.pop()
        level = _records(repo, new_id)
        if level is None:
            return False
        if not plainly_safe(level, ignore_case=ignore_case):
            problems: list[Problem] = []
            reader.entries(new_id, where + b"/" if where else b"", problems)
            if problems:
                return False
        wanted = below.get(where, _NONE)
        if _LEAF_MODES.issuperset(map(_MODE, level)):
            continue  # only files, links and gitlinks: nothing below to read, whatever the old side
        subtrees = [r for r in level if int(r[0], 8) == TREE]
        before = _records(repo, old_id) if old_id is not None else []
        if before is None or not unique_names(before):
            return False
        shared = set(before)
        named_before: dict[bytes, Record] | None = None
        for found in subtrees:
            name = found[1]
            if found in shared:
                if name in wanted:
                    return False  # changes under a subtree both trees share: not these changes
                continue  # the very same record: the walk does not go down there either
            if name not in wanted:
                return False  # a subdirectory the walk would read that no change lies under
            if named_before is None:
                named_before = dict(zip(map(_NAME, before), before, strict=True))
            was = named_before.get(name)
            was_tree = was[2].hex() if was is not None and int(was[0], 8) == TREE else None
            stack.append((where + b"/" + name if where else name, found[2].hex(), was_tree))
    return True


def _records(repo: pygit2.Repository, oid: str) -> list[Record] | None:
    """A tree level's records, or ``None`` when it is missing, not a tree or corrupt."""
    try:
        kind, data = repo.odb.read(oid)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return records(data) if kind == ObjectType.TREE else None


def forget() -> None:
    """Drop every kept walk (tests)."""
    global _held
    with _lock:
        _kept.clear()
        _held = 0


__all__ = ["CHANGES", "PAIRS", "forget", "keep", "shown", "verified"]
