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
- Tree levels read by :func:`verified` are kept too (issue 34, the first preview of a fresh
  bridge): a level's records, and the verdict "every entry passes the walk's rules" once it was
  reached, under the repository's object path, the level's id (and ``core.ignorecase`` for the
  verdict). A tree id names the same bytes for ever and the rules look at a level's bytes only
  (never at where it lies), so a kept level reads as the object would, unless pruned since —
  the same exception, and the same answer (previews only), as for the walks. Only the verdict
  "safe" is kept; a level with a problem is judged again each time. :func:`prefill` reads and
  judges ahead the levels the previews of a branch's points will read (the bridge's warm-up,
  :mod:`ledger.bridge.warm_up`). Bounded by :data:`BYTES` bytes in all (least recently used
  dropped first, with their verdicts).
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter

import pygit2
from pygit2.enums import FileMode, ObjectType

from ledger.git.tree_names import VALID_MODES, name_problem
from ledger.git.tree_records import Record, plainly_safe, records, unique_names
from ledger.git.trees import Change

TREE = FileMode.TREE
_NAME = itemgetter(1)
_MODE = itemgetter(0)
_LEAF_MODES = frozenset({b"100644", b"100755", b"120000", b"160000"})
"""The modes git writes for what is not a directory (any other spelling is looked at)."""
_NONE: frozenset[bytes] = frozenset()

PAIRS = 16
CHANGES = 200_000
"""Changes kept in all (~40 MB at most)."""

BYTES = 16 << 20
"""Bytes of tree levels kept in all (~400k entries at most)."""

Key = tuple[str, str, str, bool]
LevelKey = tuple[str, str]

_kept: OrderedDict[Key, tuple[Change, ...]] = OrderedDict()
_held = 0
_levels: OrderedDict[LevelKey, bytes] = OrderedDict()
_safe: dict[tuple[str, str, bool], bool] = {}
"""Levels judged safe (repository, id, ``core.ignorecase``) → whether it holds only leaves."""
_bytes_held = 0
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
    rules (:func:`_entries_safe`, as :class:`ledger.git.trees.TreeReader` applies them); with
    no problem the walk's entries are the canonical ones the neighbouring diffs hold. A level
    judged safe before that holds only leaves is not read again (see the module). Anything
    else (a missing or corrupt level, a name twice on the old side, a problem) is ``False``:
    the caller walks the trees and reports exactly what the walk finds. For previews only."""
    below = _directories(changes)  # directory → the names of directories wanted in it
    path = repo.path
    stack: list[tuple[bytes, str, str | None]] = [(b"", new, old)]
    while stack:
        where, new_id, old_id = stack.pop()
        with _lock:
            leaves = _safe.get((path, new_id, ignore_case))
        if leaves:
            continue  # judged safe before, and only leaves: as below, without parsing it again
        level = _level(repo, new_id)
        if level is None or not _judged_safe(repo, new_id, level, ignore_case):
            return False
        wanted = below.get(where, _NONE)
        if _LEAF_MODES.issuperset(map(_MODE, level)):
            continue  # only files, links and gitlinks: nothing below to read, whatever the old side
        subtrees = [r for r in level if int(r[0], 8) == TREE]
        before = _level(repo, old_id) if old_id is not None else []
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


def prefill(
    repo: pygit2.Repository,
    pairs: Iterable[tuple[str, str, Sequence[Change]]],
    ignore_case: bool,
    *,
    limit: int = 20_000,
    before_read: Callable[[], None] | None = None,
) -> int:
    """Read and judge ahead, for each ``(older tree, newer tree, their leaf changes)``, both
    trees' levels at the directories above the changed paths: the levels a preview's
    :func:`verified` reads. For any point of a branch and the work tree now, each level it
    reads on either side is one of these (a level that differs between the point and the next
    newer one lies above a change of that pair), or lies above a change made since the newest
    point. The levels are kept (see the module); a level with a problem is only read. Stops
    once ``limit`` levels were read from the object database; returns how many were.
    ``before_read`` is called before each level is read (the bridge waits there while an
    event is handled)."""
    read = 0
    for old, new, changes in pairs:
        below = _directories(changes)
        for tree in (old, new):
            stack: list[tuple[bytes, str]] = [(b"", tree)]
            while stack:
                where, oid = stack.pop()
                with _lock:
                    known = (repo.path, oid) in _levels
                if not known:
                    if read >= limit:
                        return read
                    if before_read is not None:
                        before_read()
                level = _level(repo, oid)
                read += not known
                if level is None or not _judged_safe(repo, oid, level, ignore_case):
                    continue
                wanted = below.get(where, _NONE)
                for mode, name, child in level:
                    if name in wanted and int(mode, 8) == TREE:
                        stack.append((where + b"/" + name if where else name, child.hex()))
    return read


def _directories(changes: Sequence[Change]) -> dict[bytes, set[bytes]]:
    """Directory → the names of the directories in it that lie above a changed path."""
    below: dict[bytes, set[bytes]] = {}
    seen: set[bytes] = set()
    for change in changes:
        path = os.fsencode(change.path)
        slash = path.rfind(b"/")
        while slash >= 0:  # each directory, innermost first: its parent and its name there
            directory = path[:slash]
            if directory in seen:
                break  # and so is every directory above it
            seen.add(directory)
            slash = directory.rfind(b"/")
            parent = directory[:slash] if slash >= 0 else b""
            below.setdefault(parent, set()).add(directory[slash + 1 :])
    return below


def _level(repo: pygit2.Repository, oid: str) -> list[Record] | None:
    """A tree level's records, from its kept bytes or read (``None``: missing, not a tree or
    corrupt). The bytes are kept, not the records: five times smaller, parsed again in µs."""
    global _bytes_held
    key = (repo.path, oid)
    with _lock:
        data = _levels.get(key)
        if data is not None:
            _levels.move_to_end(key)
    if data is None:
        data = _tree_data(repo, oid)
        if data is None:
            return None
        if len(data) <= BYTES:
            with _lock:
                if key not in _levels:
                    _levels[key] = data
                    _bytes_held += len(data)
                    while _bytes_held > BYTES:
                        (path, dropped), gone = _levels.popitem(last=False)
                        _bytes_held -= len(gone)
                        _safe.pop((path, dropped, False), None)
                        _safe.pop((path, dropped, True), None)
    return records(data)


def _judged_safe(repo: pygit2.Repository, oid: str, level: list[Record], ignore_case: bool) -> bool:
    """Whether every entry of the level passes the walk's rules: plainly safe, or else no
    problem entry by entry (:func:`_entries_safe`). Only "safe" is kept."""
    key = (repo.path, oid, ignore_case)
    with _lock:
        if key in _safe:
            return True
    if not plainly_safe(level, ignore_case=ignore_case) and not _entries_safe(level, ignore_case):
        return False
    leaves = _LEAF_MODES.issuperset(map(_MODE, level))
    with _lock:
        if (repo.path, oid) in _levels:
            _safe[key] = leaves
    return True


def _entries_safe(level: list[Record], ignore_case: bool) -> bool:
    """Whether :class:`ledger.git.tree_names.EntryCheck` finds no problem in the level (parsed
    exactly, :func:`ledger.git.tree_records.records`): its four rules, entry by entry — the
    name's (:func:`ledger.git.tree_names.name_problem`, asked once per name and mode: the
    same names recur in every point's version of a level, e.g. the root's ``.gitignore``), a
    valid mode, no name twice, and with ``core.ignorecase`` no two names equal but for case.
    The property tests hold :func:`verified` equal to the walk on hostile trees."""
    names = list(map(_NAME, level))
    if len(set(names)) != len(names):
        return False
    for mode, name, _ in level:
        number = int(mode, 8)
        if number not in VALID_MODES or _name_problem(name, number) is not None:
            return False
    return not (ignore_case and len({name.lower() for name in names}) != len(names))


@functools.lru_cache(maxsize=4096)
def _name_problem(name: bytes, mode: int) -> str | None:
    return name_problem(name, mode)


def _tree_data(repo: pygit2.Repository, oid: str) -> bytes | None:
    """A tree object's bytes, or ``None`` when it is missing or not a tree."""
    try:
        kind, data = repo.odb.read(oid)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return bytes(data) if kind == ObjectType.TREE else None


def forget() -> None:
    """Drop every kept walk and level (tests)."""
    global _held, _bytes_held
    with _lock:
        _kept.clear()
        _held = 0
        _levels.clear()
        _safe.clear()
        _bytes_held = 0


__all__ = ["BYTES", "CHANGES", "PAIRS", "forget", "keep", "prefill", "shown", "verified"]
