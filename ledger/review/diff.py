"""Diffs between two snapshot trees, by git's own rules, computed with pygit2.

Why it exists: ``rewind show``, ``rewind log --patch`` and ``rewind report`` all describe what
changed between two rewind points. They must say exactly what ``git diff <tree-a> <tree-b>``
says, so a user can trust (and grep, and apply) the text. libgit2's patch printer follows git's
format closely; this module closes the two gaps that remain:

- the ``index <a>..<b>`` line: git abbreviates object ids with ``core.abbrev`` (``auto`` by
  default: seven hex digits, more for large packed object stores, more again when a prefix is
  ambiguous); libgit2 always prints seven. :class:`Abbrev` reproduces git's rule.
- an added or deleted *empty* file: git prints no ``---``/``+++`` lines; libgit2 does.

Invariants:
- Read-only: nothing here writes an object, a ref or a file.
- No rename or copy detection unless ``find_renames`` is asked for (git's ``--no-renames``).
- Binary files are reported as ``Binary files a/x and b/x differ``; mode changes, symlinks and
  ``\\ No newline at end of file`` appear as git prints them.
- Only regular output is produced here (no colour); colouring is a separate pass.
"""

from __future__ import annotations

import math
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from ledger.errors import MissingCommitError
from ledger.git.repo import peel_tree

ZERO_HEX = "0" * 40
_INDEX_LINE = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)(.*)$")
_STATUS = {
    pygit2.enums.DeltaStatus.ADDED: "added",
    pygit2.enums.DeltaStatus.DELETED: "deleted",
    pygit2.enums.DeltaStatus.MODIFIED: "modified",
    pygit2.enums.DeltaStatus.RENAMED: "renamed",
    pygit2.enums.DeltaStatus.COPIED: "copied",
    pygit2.enums.DeltaStatus.TYPECHANGE: "typechange",
}


class Abbrev:
    """Git's abbreviation of object ids for one repository (``core.abbrev``, default ``auto``).

    ``auto``: ``max(7, ceil((msb(packed objects) + 2) / 2))`` as git's
    ``repo_find_unique_abbrev_r`` computes it, then lengthened until the prefix is unique.
    """

    def __init__(self, repo: pygit2.Repository) -> None:
        self._repo = repo
        self._cache: dict[str, str] = {}
        self.base = self._base_length()

    def _base_length(self) -> int:
        try:
            value = str(self._repo.config["core.abbrev"]).strip().lower()
        except (KeyError, pygit2.GitError, ValueError):
            value = "auto"
        if value in ("no", "false", "off"):
            return 40
        if value.isdigit():
            return max(4, min(40, int(value)))
        count = _packed_object_count(Path(self._repo.path) / "objects")
        bits = count.bit_length()  # msb(count) + 1
        return max(7, (bits + 1) // 2)

    def __call__(self, hex_id: str) -> str:
        cached = self._cache.get(hex_id)
        if cached is not None:
            return cached
        length = self.base
        while length < 40 and self._ambiguous(hex_id[:length]):
            length += 1
        short = hex_id[:length]
        self._cache[hex_id] = short
        return short

    def _ambiguous(self, prefix: str) -> bool:
        try:
            self._repo.odb.read_header(prefix)
        except ValueError as exc:
            return "ambiguous" in str(exc).lower()
        except (KeyError, pygit2.GitError, TypeError):
            return self._ambiguous_lookup(prefix)
        return False

    def _ambiguous_lookup(self, prefix: str) -> bool:
        try:
            self._repo.revparse_single(prefix)
        except (KeyError, pygit2.GitError, ValueError) as exc:
            return "ambiguous" in str(exc).lower()
        return False


def _packed_object_count(objects: Path) -> int:
    """Objects in the packs (git's ``repo_approximate_object_count``; loose ones are not counted)."""
    total = 0
    try:
        names = os.listdir(objects / "pack")
    except OSError:
        return 0
    for name in names:
        if not name.endswith(".idx"):
            continue
        try:
            with open(objects / "pack" / name, "rb") as handle:
                head = handle.read(8 + 256 * 4)
        except OSError:
            continue
        if head[:4] == b"\xfftOc":  # v2 index: magic, version, then the fanout table
            total += struct.unpack(">I", head[8 + 255 * 4 : 8 + 256 * 4])[0]
        elif len(head) >= 256 * 4:  # v1 index: the fanout table first
            total += struct.unpack(">I", head[255 * 4 : 256 * 4])[0]
    return total


@dataclass(frozen=True)
class FileDiff:
    """One changed path between two trees."""

    status: str
    old_path: str
    new_path: str
    old_mode: int
    new_mode: int
    old_id: str
    new_id: str
    binary: bool
    additions: int
    deletions: int
    patch: str
    """git's patch text for this file (header included), no colour."""
    old_size: int = 0
    new_size: int = 0

    @property
    def path(self) -> str:
        return self.new_path if self.status != "deleted" else self.old_path

    @property
    def display_path(self) -> str:
        if self.old_path != self.new_path:
            return f"{self.old_path} => {self.new_path}"
        return self.path

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "path": self.path,
            "oldPath": self.old_path,
            "oldMode": f"{self.old_mode:06o}",
            "newMode": f"{self.new_mode:06o}",
            "oldId": self.old_id,
            "newId": self.new_id,
            "binary": self.binary,
            "additions": self.additions,
            "deletions": self.deletions,
        }


@dataclass(frozen=True)
class TreeDiff:
    """Every changed path between two trees, in git's path order."""

    old_tree: str
    new_tree: str
    files: list[FileDiff] = field(default_factory=list)

    @property
    def additions(self) -> int:
        return sum(f.additions for f in self.files)

    @property
    def deletions(self) -> int:
        return sum(f.deletions for f in self.files)

    @property
    def patch(self) -> str:
        """The whole patch, byte for byte what ``git diff <old> <new>`` prints."""
        return "".join(f.patch for f in self.files)

    def summary(self) -> str:
        """git's shortstat: `` 3 files changed, 10 insertions(+), 2 deletions(-)``."""
        return shortstat(len(self.files), self.additions, self.deletions)

    def stat(self, width: int = 80) -> str:
        """git's ``--stat`` block (names, counts, +/- graph, summary line)."""
        return format_stat(self.files, width)

    def to_json(self) -> dict[str, object]:
        return {
            "oldTree": self.old_tree,
            "newTree": self.new_tree,
            "files": [f.to_json() for f in self.files],
            "additions": self.additions,
            "deletions": self.deletions,
        }


def shortstat(files: int, additions: int, deletions: int) -> str:
    if not files:
        return " 0 files changed"
    parts = [f" {files} file{'s' if files != 1 else ''} changed"]
    if additions or not deletions:
        parts.append(f" {additions} insertion{'s' if additions != 1 else ''}(+)")
    if deletions or not additions:
        parts.append(f" {deletions} deletion{'s' if deletions != 1 else ''}(-)")
    return ",".join(parts)


def format_stat(files: list[FileDiff], width: int = 80) -> str:
    """A ``git diff --stat``-style block: names padded, counts right-aligned, a scaled graph."""
    if not files:
        return shortstat(0, 0, 0) + "\n"
    names = [f.display_path for f in files]
    counts = ["Bin" if f.binary else str(f.additions + f.deletions) for f in files]
    name_width = max(len(n) for n in names)
    count_width = max(len(c) for c in counts)
    max_change = max((f.additions + f.deletions for f in files if not f.binary), default=0)
    graph_width = max(6, width - name_width - count_width - 6)
    if name_width > width // 2 + 10 and graph_width < 10:
        graph_width = 10
    lines = []
    for f, name, count in zip(files, names, counts):
        if f.binary:
            lines.append(f" {name.ljust(name_width)} | Bin {f.old_size} -> {f.new_size} bytes")
            continue
        add, rem = f.additions, f.deletions
        if max_change > graph_width:
            add = _scale(add, max_change, graph_width)
            rem = _scale(rem, max_change, graph_width)
        graph = "+" * add + "-" * rem
        lines.append(f" {name.ljust(name_width)} | {count.rjust(count_width)} {graph}".rstrip())
    total_add = sum(f.additions for f in files)
    total_del = sum(f.deletions for f in files)
    lines.append(shortstat(len(files), total_add, total_del))
    return "\n".join(lines) + "\n"


def _scale(value: int, max_change: int, width: int) -> int:
    if not value:
        return 0
    return 1 + math.floor((value * (width - 1)) / max_change) if max_change > 1 else 1


def _peel_tree(repo: pygit2.Repository, sha: str | None) -> pygit2.Tree | None:
    if sha is None or sha == ZERO_HEX:
        return None
    tree = peel_tree(repo, sha)
    if tree is None:
        raise MissingCommitError(sha)
    return tree


def diff_trees(
    repo: pygit2.Repository,
    old: str | None,
    new: str | None,
    *,
    find_renames: bool = False,
    abbrev: Abbrev | None = None,
    with_patch: bool = True,
) -> TreeDiff:
    """What changed from ``old`` to ``new`` (commits or trees; ``None`` is the empty tree)."""
    old_tree = _peel_tree(repo, old)
    new_tree = _peel_tree(repo, new)
    empty = repo.get(repo.TreeBuilder().write()) if old_tree is None or new_tree is None else None
    a = old_tree if old_tree is not None else empty
    b = new_tree if new_tree is not None else empty
    assert isinstance(a, pygit2.Tree) and isinstance(b, pygit2.Tree)
    result = TreeDiff(str(a.id), str(b.id))
    if a.id == b.id:
        return result
    flags = pygit2.enums.DiffOption.NORMAL
    diff = repo.diff(a, b, flags=flags)  # type: ignore[call-overload]  # pygit2's stubs omit trees
    if find_renames:
        diff.find_similar(flags=pygit2.enums.DiffFind.FIND_RENAMES)
    abbrev = abbrev or Abbrev(repo)
    for patch in diff:
        if patch is None:
            continue
        result.files.append(_file_diff(patch, abbrev, with_patch))
    return result


def _file_diff(patch: pygit2.Patch, abbrev: Abbrev, with_patch: bool) -> FileDiff:
    delta = patch.delta
    binary = bool(delta.is_binary)
    _context, additions, deletions = patch.line_stats
    text = _git_text(patch, delta, abbrev, binary) if with_patch else ""
    if binary:
        additions = deletions = 0
    return FileDiff(
        status=_STATUS.get(delta.status, "modified"),
        old_path=delta.old_file.path,
        new_path=delta.new_file.path,
        old_mode=int(delta.old_file.mode),
        new_mode=int(delta.new_file.mode),
        old_id=str(delta.old_file.id),
        new_id=str(delta.new_file.id),
        binary=binary,
        additions=additions,
        deletions=deletions,
        patch=text,
        old_size=int(delta.old_file.size),
        new_size=int(delta.new_file.size),
    )


def _git_text(patch: pygit2.Patch, delta: pygit2.DiffDelta, abbrev: Abbrev, binary: bool) -> str:
    raw = patch.data.decode("utf-8", "surrogateescape")
    lines = raw.split("\n")
    out: list[str] = []
    in_header = True
    no_hunks = not patch.hunks and not binary
    for line in lines:
        if in_header:
            if line.startswith(("@@", "Binary files ")):
                in_header = False
            else:
                match = _INDEX_LINE.match(line)
                if match:
                    line = (
                        f"index {abbrev(str(delta.old_file.id))}..{abbrev(str(delta.new_file.id))}"
                        f"{match.group(3)}"
                    )
                elif no_hunks and (line.startswith(("--- ", "+++ "))):
                    continue
        out.append(line)
    return "\n".join(out)


__all__ = ["Abbrev", "FileDiff", "TreeDiff", "diff_trees", "format_stat", "shortstat"]
