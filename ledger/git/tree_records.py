"""One tree level's raw entries, read in bulk: what differs between two levels, and whether a
level is plainly safe, without one Python step per entry.

Why it exists: :func:`ledger.git.trees.tree_changes` compares two trees level by level and skips
equal subtrees, so its cost is the number of levels on the paths that changed times their
width. Parsing every entry of those levels into Python objects (and checking each name by the
hostile-tree rules) made that width cost ~10 µs an entry: at 100k files a ``/rewind`` list or a
restore preview of a few thousand files spent 0.3–0.5 s there (issue 34). Here a level is split
into ``(mode, name, id)`` records by one regular expression, two levels are compared as sets of
records (only the few that differ are turned into values), and a level whose names and modes
are all plainly safe is proven so by a few whole-level tests.

Invariants:
- Exact or nothing: :func:`records` returns ``None`` unless the records cover the object byte for
  byte; :func:`plainly_safe` says ``True`` only when the per-entry rules of
  :class:`ledger.git.tree_names.EntryCheck` would report no problem for the level (any doubt —
  a non-ASCII name, a ``git`` inside a name, a symlink named like ``.mailmap``, a duplicate, a
  case fold — is ``False``, and the caller runs the per-entry rules). So callers get the same
  results as the per-entry reader, only faster.
- Pure: bytes in, values out; nothing is read or written here.
"""

from __future__ import annotations

import re
from operator import itemgetter

from pygit2.enums import FileMode

from ledger.git.tree_names import VALID_MODES

Record = tuple[bytes, bytes, bytes]
"""``(octal mode, raw name, 20-byte id)`` as a tree object holds them."""

_RECORD = re.compile(rb"([0-7]+) ([^\0]*)\0(.{20})", re.DOTALL)
# The whole object as records (a name holds no NUL and a mode no space: one parse only).
_RECORDS = re.compile(rb"(?:[0-7]+ [^\0]*\0.{20})*", re.DOTALL)
_NAME = itemgetter(1)
_LINK = b"%o" % FileMode.LINK


def records(data: bytes) -> list[Record] | None:
    """The entries of a tree object's ``data`` in order, or ``None`` when they do not cover it
    exactly (a corrupt object: the caller's per-entry reader reports it)."""
    if _RECORDS.fullmatch(data) is None:
        return None
    found: list[Record] = _RECORD.findall(data)
    return found


def unique_names(level: list[Record]) -> bool:
    """No name is used twice in the level."""
    return len(set(map(_NAME, level))) == len(level)


def plainly_safe(level: list[Record], *, ignore_case: bool) -> bool:
    """``True`` only when every entry passes the hostile-tree rules (see the module); ``False``
    means "check entry by entry", not "unsafe"."""
    names = list(map(_NAME, level))
    if not names:
        return True
    if len(set(names)) != len(names) or min(map(len, names)) == 0:
        return False  # a name used twice, or an empty name
    joined = b"\0".join(names)
    if not joined.isascii() or b"/" in joined:
        return False  # non-ASCII: HFS-ignorable code points; '/' inside a name
    lowered = joined.lower()
    # A name whose lower case holds no "git" cannot reduce to ".git", "git~1" or one of the
    # names git refuses as symlinks except ".mailmap" (the reduction only drops characters).
    if b"git" in lowered:
        return False
    if b"." in names or b".." in names:
        return False
    modes = {mode for mode, _, _ in level}
    if any(int(mode, 8) not in VALID_MODES for mode in modes):
        return False
    if _LINK in modes and b"mailmap" in lowered:
        return False
    return not (ignore_case and len(set(lowered.split(b"\0"))) != len(names))


def differing(
    a: frozenset[Record], b: frozenset[Record]
) -> tuple[dict[bytes, Record], dict[bytes, Record]]:
    """The records of names whose entry differs between two levels without duplicate names
    (their records as sets): ``(name → record in a, name → record in b)``; a name missing from
    one side is absent there. (Raw records: two that differ only in a mode's spelling are
    compared by the caller.)"""
    return {r[1]: r for r in a - b}, {r[1]: r for r in b - a}


__all__ = ["Record", "differing", "plainly_safe", "records", "unique_names"]
