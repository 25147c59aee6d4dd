"""Tree entry names and modes a snapshot may hold: the hostile-tree rules, applied as trees are
read (docs/design.md#restore).

Why it exists: a snapshot commit is data that another tool, machine or attacker may have written.
Before a restore writes anything, every entry of every target-side tree level it reads is judged
here: names (empty, ``.``/``..``, ``/`` or NUL inside a name, ``.git`` in any spelling git itself
refuses, a symlinked ``.gitmodules`` and the like), modes, names used twice in one level, names
that differ only in case where the file system ignores case. :mod:`ledger.git.trees` calls it
while reading; :mod:`ledger.git.restore.safety` checks the work tree.

Invariants: pure (bytes and modes in, problems out); problems are collected in entry order, the
first names the refusal; nothing is acted on here.
"""

from __future__ import annotations

import os

from pygit2.enums import FileMode

from ledger.plain import FrozenPlain

VALID_MODES = frozenset(
    {FileMode.BLOB, FileMode.BLOB_EXECUTABLE, FileMode.LINK, FileMode.TREE, FileMode.COMMIT}
)
"""The modes git writes into trees; anything else in a snapshot is refused."""

# Code points HFS+ ignores in names (git's is_hfs_dotgit): ".g\u200cit" is ".git" there.
_HFS_IGNORABLE = frozenset(
    [0x200C, 0x200D, 0x200E, 0x200F, 0xFEFF, *range(0x202A, 0x202F), *range(0x206A, 0x2070)]
)
# Files git refuses to check out as symlinks (verify_path, git ≥ 2.32).
_NO_SYMLINK_NAMES = (".gitmodules", ".gitattributes", ".gitignore", ".mailmap")


class Problem(FrozenPlain):
    __slots__ = ("path", "reason")
    reason: str
    path: str

    def __init__(self, reason: str, path: str) -> None:
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "path", path)

    def _fields(self) -> tuple[object, ...]:
        return (self.reason, self.path)


# --- names --------------------------------------------------------------------------------


def _dotgit_core(raw: bytes) -> str:
    text = raw.decode("utf-8", "surrogateescape")
    text = "".join(c for c in text if ord(c) not in _HFS_IGNORABLE).lower()
    text = text.split(":", 1)[0]  # NTFS alternate data streams: ".git::$INDEX_ALLOCATION"
    return text.rstrip(" .")  # NTFS drops trailing spaces and dots


def name_problem(raw: bytes, mode: int) -> str | None:
    """Why a tree entry name is unsafe to check out, or ``None``."""
    if not raw:
        return "an empty name"
    if b"/" in raw:
        return "an absolute path" if raw.startswith(b"/") else "a '/' inside a name"
    if b"\0" in raw:
        return "a NUL inside a name"
    if raw in (b".", b".."):
        return "a '..' or '.' component"
    core = _dotgit_core(raw)
    if core in (".git", "git~1"):
        return "a .git component"
    if mode == FileMode.LINK and core in _NO_SYMLINK_NAMES:
        return f"a symlinked {core}"
    return None


class EntryCheck:
    """The rules for the entries of one target-side tree level, applied as they are read (the
    order of the problems is the order of the entries: the first one names the refusal)."""

    def __init__(self, prefix: bytes, problems: list[Problem], *, ignore_case: bool) -> None:
        self.prefix = prefix
        self.problems = problems
        self.ignore_case = ignore_case
        self._folded: dict[bytes, bytes] = {}

    def entry(self, raw: bytes, mode: int, *, duplicate: bool) -> None:
        """Check one entry; ``duplicate``: its name was already read in this level."""
        problems = self.problems
        path = os.fsdecode(self.prefix + raw)
        reason = name_problem(raw, mode)
        if reason:
            problems.append(Problem(f"unsafe path in the snapshot ({reason})", path))
        if mode not in VALID_MODES:
            problems.append(
                Problem(f"unsafe entry in the snapshot (unsupported mode {mode:o})", path)
            )
        if duplicate:
            problems.append(
                Problem("unsafe entry in the snapshot (a name used twice in one tree)", path)
            )
        if self.ignore_case:
            key = raw.lower()
            if key in self._folded and self._folded[key] != raw:
                problems.append(
                    Problem("unsafe entry in the snapshot (names that differ only in case)", path)
                )
            self._folded[key] = raw


__all__ = ["VALID_MODES", "EntryCheck", "Problem", "name_problem"]
