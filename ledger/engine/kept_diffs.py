"""Leaf changes between two recorded trees, kept on disk across processes (docs/pi.md#rewind).

Why it exists: the ``/rewind`` list walks from the work tree now back through up to 200
points, one neighbouring tree diff at a time (:func:`ledger.engine.ownership.recorded_changes`).
Memoised in memory only, a fresh bridge diffed all 200 again at its first list (~450 ms at
100k files). A diff of two trees never changes (a tree id names the same bytes forever), so
it is kept here, in the private dir, and a later process reads it back instead of walking the
trees again.

The file, ``<git-dir>/pi-rewind/tree-diffs``: one line ``pi-rewind-tree-diffs 1\\n``, then
frames ``MAGIC | length (u32 LE) | crc32 (u32 LE) | payload``::

    payload = old-tree ' ' new-tree ' ' count '\\n' old-modes '\\n' old-ids '\\n'
              new-modes '\\n' new-ids '\\n' paths
    modes   = octal modes, space-separated (0: no leaf on that side)
    ids     = hex object ids, space-separated ('-' where there is no leaf)
    paths   = raw path bytes, NUL-separated, strictly increasing (last: may hold newlines)

Invariants:
- Exact or nothing: a frame is used only when its checksum matches and it parses into
  changes that could be :func:`~ledger.git.trees.leaf_changes`' (canonical modes, ids of the
  repository's length, non-empty paths without NUL in strictly increasing byte order, the two
  sides different, as many as the count says); anything else is skipped (resynchronising on
  the next frame that checks), never trusted. A diff that failed (a missing or corrupt tree)
  is never kept.
- Bounded: a frame is at most :data:`MAX_FRAME_BYTES` (a larger diff is not kept: it is rare
  and computed again), the file at most :data:`MAX_FILE_BYTES` (beyond, it is replaced by what
  this process holds), the memory at most :data:`MEMORY_PAIRS` diffs.
- Versioned: a file whose first line is not this version's is not read; the next append
  replaces it.
- Shared safely without locks: appends are one ``write()`` of a whole frame with ``O_APPEND``
  (the kernel does not interleave them); a replacement is a rename of a complete file; a
  reader tails the file (only the bytes appended since it last read) and starts again when the
  file was replaced. Losing an append to a replacement only costs a recomputation.
- Advice only: an I/O error never fails a list; it just computes the diff.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import zlib
from collections import OrderedDict
from pathlib import Path

from ledger.git.owned import replace_private_file
from ledger.git.trees import Change, Entry

FILE_NAME = "tree-diffs"
HEADER = b"pi-rewind-tree-diffs 1\n"
MAGIC = b"\x00RWT"
_PREFIX = struct.Struct("<4sII")
MAX_FRAME_BYTES = 64 * 1024
"""One ``write()`` at most: appends of several processes never interleave."""
MAX_FILE_BYTES = 4 << 20
"""About 20 sessions' lists of 200 points; beyond it the file is replaced."""
MEMORY_PAIRS = 4096
"""Diffs one process keeps in memory (least recently used dropped first)."""
_MODES = frozenset({0o100644, 0o100755, 0o120000, 0o160000})
"""The canonical leaf modes :func:`~ledger.git.trees.tree_changes` reports."""
_HEX = frozenset(b"0123456789abcdef")

Pair = tuple[str, str]


def _side(entry: Entry | None) -> tuple[bytes, bytes]:
    return (b"0", b"-") if entry is None else (b"%o" % entry.mode, entry.oid.encode("ascii"))


def encode(old_tree: str, new_tree: str, changes: list[Change]) -> bytes:
    """The frame of one diff (see the module)."""
    olds = [_side(c.old) for c in changes]
    news = [_side(c.new) for c in changes]
    payload = b"\n".join(
        (
            b"%s %s %d" % (old_tree.encode("ascii"), new_tree.encode("ascii"), len(changes)),
            b" ".join(m for m, _ in olds),
            b" ".join(i for _, i in olds),
            b" ".join(m for m, _ in news),
            b" ".join(i for _, i in news),
            b"\x00".join(os.fsencode(c.path) for c in changes),
        )
    )
    return _PREFIX.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


def _entries(modes: bytes, ids: bytes, count: int, width: int) -> list[Entry | None] | None:
    mode_list = modes.split(b" ") if count else []
    id_list = ids.split(b" ") if count else []
    if len(mode_list) != count or len(id_list) != count:
        return None
    found: list[Entry | None] = []
    for mode_text, oid in zip(mode_list, id_list, strict=True):
        if mode_text == b"0" and oid == b"-":
            found.append(None)
            continue
        try:
            mode = int(mode_text, 8)
        except ValueError:
            return None
        if mode not in _MODES or len(oid) != width or not _HEX.issuperset(oid):
            return None
        found.append(Entry(mode, oid.decode("ascii")))
    return found


def decode(payload: bytes) -> tuple[Pair, list[Change]] | None:
    """The diff of one checked payload, or ``None`` when it is not one that
    :func:`~ledger.git.trees.leaf_changes` could have returned."""
    parts = payload.split(b"\n", 5)
    if len(parts) != 6:
        return None
    head = parts[0].split(b" ")
    if len(head) != 3 or not head[2].isdigit():
        return None
    old_tree, new_tree, count = head[0], head[1], int(head[2])
    width = len(old_tree)
    if width not in (40, 64) or len(new_tree) != width or old_tree == new_tree:
        return None
    if not (_HEX.issuperset(old_tree) and _HEX.issuperset(new_tree)):
        return None
    olds = _entries(parts[1], parts[2], count, width)
    news = _entries(parts[3], parts[4], count, width)
    paths = parts[5].split(b"\x00") if count else []
    if olds is None or news is None or len(paths) != count or (not count and parts[5]):
        return None
    changes: list[Change] = []
    previous = b""
    for path, old, new in zip(paths, olds, news, strict=True):
        if not path or path <= previous or old == new:
            return None
        previous = path
        changes.append(Change(os.fsdecode(path), old, new))
    return (old_tree.decode("ascii"), new_tree.decode("ascii")), changes


def decode_frames(data: bytes, pos: int) -> tuple[list[tuple[Pair, list[Change]]], int]:
    """Every frame of ``data[pos:]`` that checks, and where the next read starts (before an
    incomplete frame at the end: it may be being written)."""
    found: list[tuple[Pair, list[Change]]] = []
    size = len(data)
    while pos < size:
        if size - pos < _PREFIX.size:
            break  # maybe a frame being written
        magic, length, crc = _PREFIX.unpack_from(data, pos)
        end = pos + _PREFIX.size + length
        if magic == MAGIC and length <= MAX_FRAME_BYTES and end > size:
            # Incomplete: being written, or torn by a writer that died. A later frame that
            # checks after it means torn: skip on to it.
            later = _next_frame(data, pos)
            if later is None:
                break
            pos = later
            continue
        if magic == MAGIC and length <= MAX_FRAME_BYTES:
            payload = data[pos + _PREFIX.size : end]
            diff = decode(payload) if zlib.crc32(payload) == crc else None
            if diff is not None:
                found.append(diff)
                pos = end
                continue
        later = _next_frame(data, pos)
        if later is None:
            return found, size  # garbage to the end: never read again
        pos = later
    return found, pos


def _next_frame(data: bytes, pos: int) -> int | None:
    """The next position after ``pos`` where a whole frame that checks starts."""
    at = data.find(MAGIC, pos + 1)
    while at >= 0:
        if len(data) - at >= _PREFIX.size:
            _, length, crc = _PREFIX.unpack_from(data, at)
            end = at + _PREFIX.size + length
            whole = length <= MAX_FRAME_BYTES and end <= len(data)
            if whole and zlib.crc32(data[at + _PREFIX.size : end]) == crc:
                return at
        at = data.find(MAGIC, at + 1)
    return None


class KeptDiffs:
    """The kept diffs of one repository (see the module); safe to use from several threads."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILE_NAME
        self._lock = threading.Lock()
        self._memory: OrderedDict[Pair, list[Change]] = OrderedDict()
        self._file: tuple[int, int] | None = None
        """``(device, inode)`` of the file read so far."""
        self._offset = 0
        self._usable = False
        """The file read so far is of this version (appends may go to it)."""

    def get(self, old_tree: str, new_tree: str) -> list[Change] | None:
        """The kept diff, or ``None`` (then compute it and :meth:`put` it)."""
        key = (old_tree, new_tree)
        with self._lock:
            found = self._memory.get(key)
            if found is None:
                self._read()  # what other processes appended since
                found = self._memory.get(key)
            if found is not None:
                self._memory.move_to_end(key)
            return found

    def put(self, old_tree: str, new_tree: str, changes: list[Change]) -> None:
        """Keep a diff :func:`~ledger.git.trees.leaf_changes` returned (never a failed one)."""
        frame = encode(old_tree, new_tree, changes)
        with self._lock:
            self._remember((old_tree, new_tree), changes)
            if len(frame) > MAX_FRAME_BYTES:
                return
            with contextlib.suppress(OSError):
                self._append(frame)

    def _remember(self, key: Pair, changes: list[Change]) -> None:
        self._memory[key] = changes
        self._memory.move_to_end(key)
        while len(self._memory) > MEMORY_PAIRS:
            self._memory.popitem(last=False)

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                info = os.fstat(handle.fileno())
                identity = (info.st_dev, info.st_ino)
                if identity != self._file or info.st_size < self._offset:
                    self._file, self._offset, self._usable = identity, 0, False
                if info.st_size == self._offset or info.st_size > MAX_FILE_BYTES:
                    return
                handle.seek(self._offset)
                data = handle.read()
        except OSError:
            return
        base = self._offset
        if base == 0:
            if not data.startswith(HEADER):
                self._offset = len(data)  # another version: not read (the next append replaces)
                return
            self._usable, base = True, len(HEADER)
            data = data[len(HEADER) :]
        diffs, used = decode_frames(data, 0)
        self._offset = base + used
        for key, changes in diffs:
            self._remember(key, changes)

    def _append(self, frame: bytes) -> None:
        if self._file is None:
            self._read()  # never replace a file of this version unread
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            size = -1
        if size < 0 or not self._usable or size + len(frame) > MAX_FILE_BYTES:
            self._replace()
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, frame)  # one write: never interleaved with another process's
        finally:
            os.close(fd)

    def _replace(self) -> None:
        """A new file holding what this process keeps, newest last, within half the bound
        (room for appends), renamed over the old one."""
        frames: list[bytes] = []
        size = len(HEADER)
        for key, changes in reversed(self._memory.items()):
            frame = encode(key[0], key[1], changes)
            if len(frame) > MAX_FRAME_BYTES:
                continue
            if size + len(frame) > MAX_FILE_BYTES // 2:
                break
            frames.append(frame)
            size += len(frame)
        data = HEADER + b"".join(reversed(frames))
        self.path.parent.mkdir(mode=0o700, exist_ok=True)
        # Through a temporary that is its own lock: one a kill leaves is swept (ledger/git/owned.py).
        if not replace_private_file(self.path, data):
            return
        info = os.stat(self.path)
        self._file, self._offset, self._usable = (info.st_dev, info.st_ino), len(data), True


_stores: dict[str, KeptDiffs] = {}
_stores_lock = threading.Lock()


def kept_for(private: Path) -> KeptDiffs:
    """The process's one :class:`KeptDiffs` of the private dir ``private``."""
    key = str(private)
    with _stores_lock:
        found = _stores.get(key)
        if found is None:
            found = _stores[key] = KeptDiffs(private)
        return found


__all__ = [
    "FILE_NAME",
    "MAX_FILE_BYTES",
    "MAX_FRAME_BYTES",
    "KeptDiffs",
    "decode",
    "decode_frames",
    "encode",
    "kept_for",
]
