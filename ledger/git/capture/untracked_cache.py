"""Which directories git's untracked cache read again during one ``git status``, from the
private index's untracked cache (the ``UNTR`` extension) as it was before and after that status.

Why it exists: when status reports that its untracked cache read some directory again (a file
created, removed or renamed anywhere: an editor's save by rename, our own restore's writes), the
capture must look again at the rule files and ``.git`` entries of every directory that changed,
because status cannot list an ignored ``.gitignore`` or a new embedded repository. git's trace2
counters (:class:`TraceCounters`) only say how many directories it read again, not which, so
the capture's late pass used to check the stamp of every known directory (~44 ms at 10k
directories). This module names them (docs/capture.md#the-late-pass-narrowed-to-what-git-read-again).

How: git records, for every directory its untracked cache holds, the directory's stat data, and
records it anew exactly when it reads the directory again. So a directory whose recorded stat
data changed, or that was not valid before and is now, was read again; one git trusted keeps
what it had. git also reads again, with the same stat data, a directory recorded with an mtime
not older than the index file (racy: read-cache.c ``is_racy_stat``); those are named from the
"before" side with git's rule at whole seconds (a superset of its nanosecond rule).

Invariants (exactness):
- A directory not named has the stat data git recorded for it and is not racy: git saw no entry
  created, removed or renamed in it since, the guarantee a quiet status gives for every
  directory.
- Anything not proven returns ``None`` and the capture looks at every known directory, as
  before: an extension missing or not read (no ``EOIE`` extension to find it by, larger than
  :data:`MAX_EXTENSION_BYTES`, malformed), a header that changed (git then drops or rebuilds its
  whole cache), more changed directories than git reports it opened, ``REWIND_NARROW_LATE_PASS=0``.
- Reads are bounded (the extension's size is checked before it is read) and each byte is scanned
  once; nothing here writes.
Standard library only: :mod:`ledger.git.capture.prefetch` reads the "before" side before a cold
command has loaded anything else.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

NARROW_ENV = "REWIND_NARROW_LATE_PASS"
"""Set to ``0``: never name the directories, every late pass looks at every known one (as before
this module existed; a way back should a git version lay its cache out otherwise)."""
MAX_EXTENSION_BYTES = 64 * 1024 * 1024
"""An untracked cache larger than this (~1.5M directories) is not read: the full check runs."""
_HASH = 20  # SHA-1 repositories; another hash size fails the layout checks below (``None``)
_STAT = 36  # ctime s/ns, mtime s/ns, dev, ino, uid, gid, size: 32-bit big-endian each
_EOIE_TAIL = 8 + 4 + _HASH  # "EOIE", size 24, offset of the first extension, hash of extensions
_HEADER_FIXED = 2 * _STAT + 4 + 2 * _HASH  # exclude files' stat data, dir_flags, their hashes


class Malformed(Exception):
    """The extension does not have the layout git writes."""


_QUIET_KEYS = ("node-creation", "gitignore-invalidation", "directory-invalidation", "opendir")


class TraceCounters:
    """What git's untracked cache reported during one status (trace2 ``read_directory`` data
    events on stderr, :data:`ledger.git.capture.status_command.TRACE_ENV`; dir.c,
    ``emit_traversal_statistics``)."""

    __slots__ = ("values",)

    def __init__(self, stderr: bytes) -> None:
        values: dict[str, list[object]] = {}
        for line in stderr.splitlines():
            if not line.startswith(b"{") or b'"read_directory"' not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(event, dict)
                and event.get("event") == "data"
                and event.get("category") == "read_directory"
                and event.get("key") in _QUIET_KEYS
            ):
                values.setdefault(str(event["key"]), []).append(event.get("value"))
        self.values = values

    @property
    def quiet(self) -> bool:
        """Whether the cache created, invalidated and opened no directory: every directory
        status visited had the stat data and ``.gitignore`` content git recorded for it (git's
        own racy-timestamp rules apply). Anything else (a counter not zero, missing because the
        cache was not used, an unknown output) is ``False``: not quiet."""
        return all(key in self.values for key in _QUIET_KEYS) and all(
            value in ("0", 0) for found in self.values.values() for value in found
        )

    @property
    def opened(self) -> int | None:
        """How many directories the cache read again (``opendir``, summed), ``None`` when not
        reported or not a count."""
        found = self.values.get("opendir")
        if not found:
            return None
        total = 0
        for value in found:
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                return None
            try:
                total += int(value)
            except ValueError:
                return None
        return total


class CacheSnapshot:
    """The ``UNTR`` extension of an index as read at one moment, with the index file's
    modification time then: git's racy-timestamp rule for the cache's directories compares
    their recorded mtime with it. :meth:`prepare` parses it (~5.5 ms at 10k directories): the
    capture has it done while status runs, off the capture's path."""

    __slots__ = ("_layout", "_racy", "data", "index_mtime_s")

    def __init__(self, data: bytes, index_mtime_s: int) -> None:
        self.data = data
        self.index_mtime_s = index_mtime_s
        self._layout: _Parsed | None = None
        self._racy: list[str] | None = None

    def prepare(self) -> None:
        """Parse now (idempotent; a malformed extension leaves nothing parsed)."""
        if self._layout is not None:
            return
        try:
            layout = _parse(self.data)
            # Racy directories (git's rule, read-cache.c ``is_racy_stat``, at whole seconds:
            # a superset of the nanosecond rule): recorded with an mtime not older than the
            # index, so git reads them again even with the same stat data, as a change within
            # that timestamp could hide behind them.
            limit = self.index_mtime_s
            racy = [
                layout.paths[layout.valid[k]]
                for k, record in enumerate(struct.iter_unpack(">9I", layout.stat_block(self.data)))
                if record[2] >= limit
            ]
        except (Malformed, IndexError, ValueError, struct.error):
            return
        self._racy = racy
        self._layout = layout

    def layout(self) -> tuple[_Parsed, list[str]]:
        """The parsed extension and its racy directories; :class:`Malformed` if it is not."""
        self.prepare()
        if self._layout is None or self._racy is None:
            raise Malformed("not an untracked cache extension")
        return self._layout, self._racy


def prepare_in_background(before: CacheSnapshot | None) -> threading.Thread | None:
    """Parse ``before`` in a thread (the caller joins it): while a status runs, the parse
    costs the capture nothing."""
    if before is None:
        return None
    worker = threading.Thread(target=before.prepare, name="rewind-untracked-cache", daemon=True)
    worker.start()
    return worker


def read_extension(index_path: Path | str) -> CacheSnapshot | None:
    """The ``UNTR`` extension of the index at ``index_path``, or ``None`` (no such file or
    extension, no ``EOIE`` extension to find it by, larger than :data:`MAX_EXTENSION_BYTES`).

    Found through the "end of index entries" extension git writes with ``index.threads``
    (:data:`~ledger.git.capture.status_command.PRIVATE_CONFIG`): its offset leads to the
    extensions, whose 8-byte headers are walked to ``UNTR``; nothing of the entries is read."""
    try:
        fd = os.open(index_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        tail_at = st.st_size - _HASH - _EOIE_TAIL
        if tail_at < 12:
            return None
        tail = os.pread(fd, _EOIE_TAIL, tail_at)
        if len(tail) != _EOIE_TAIL or tail[:8] != b"EOIE\x00\x00\x00\x18":
            return None
        (offset,) = struct.unpack_from(">I", tail, 8)
        while 12 <= offset <= tail_at - 8:
            head = os.pread(fd, 8, offset)
            if len(head) != 8:
                return None
            length = int.from_bytes(head[4:], "big")
            if head[:4] == b"UNTR":
                if length > MAX_EXTENSION_BYTES or offset + 8 + length > tail_at:
                    return None
                data = os.pread(fd, length, offset + 8)
                return CacheSnapshot(data, int(st.st_mtime)) if len(data) == length else None
            offset += 8 + length
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def reread_dirs(
    before: CacheSnapshot | None, after: CacheSnapshot | None, opened: int | None
) -> list[str] | None:
    """The directories (``""`` the root, else ``a/b``) whose entries may have changed while
    git's untracked cache did not see it change, judged across one status: ``before`` is the
    cache as that status found it, ``after`` as it left it, ``opened`` the status's
    ``read_directory/opendir`` count. ``None``: they cannot be named (see the module
    docstring); check everything."""
    if before is None or after is None or opened is None or os.environ.get(NARROW_ENV) == "0":
        return None
    try:
        return _reread(before, after.data, opened)
    except (Malformed, IndexError, ValueError, struct.error):
        return None


def _reread(before: CacheSnapshot, after: bytes, opened: int) -> list[str] | None:
    old_data = before.data
    old, racy = before.layout()
    if len(old_data) == len(after) and old_data[: old.stats_at] == after[: old.stats_at]:
        # The same header, directories and valid ones: compare their stat data in place (the
        # common case: an entry renamed, created or removed in known directories, no untracked
        # file listed anew).
        changed = {old.valid[k] for k in _differing_records(old_data, after, old)}
        names = _names(old, changed)
    else:
        new = _parse(after)
        if old_data[: new.header_end] != after[: new.header_end]:
            return None  # the environment, flags or exclude files changed: git rebuilt its cache
        recorded = {old.paths[node]: old.stat(old_data, k) for k, node in enumerate(old.valid)}
        changed = set()
        valid_after: set[str] = set()
        for k, node in enumerate(new.valid):
            path = new.paths[node]
            valid_after.add(path)
            if recorded.get(path) != new.stat(after, k):
                changed.add(node)
        # Valid before and not after (not readable, or gone, which changed its parent):
        # looked at as well.
        names = _names(new, changed) + [p for p in recorded if p not in valid_after]
    if len(changed) > opened:
        return None  # a recorded stat changed that git did not read again: not git's layout
    return names + racy


def _names(parsed: _Parsed, nodes: set[int]) -> list[str]:
    return [parsed.paths[node] for node in sorted(nodes)]


def _differing_records(before: bytes, after: bytes, parsed: _Parsed) -> list[int]:
    """The positions of the stat records that differ, compared a block at a time."""
    start, count = parsed.stats_at, len(parsed.valid)
    block = 256
    found: list[int] = []
    for first in range(0, count, block):
        lo = start + first * _STAT
        hi = start + min(count, first + block) * _STAT
        if before[lo:hi] == after[lo:hi]:
            continue
        for k in range(first, min(count, first + block)):
            at = start + k * _STAT
            if before[at : at + _STAT] != after[at : at + _STAT]:
                found.append(k)
    return found


class _Parsed:
    """One extension's layout: where its parts start, its directories' paths in git's order
    (depth first, the root ``""`` first) and which of them are valid (hold stat data)."""

    __slots__ = ("header_end", "paths", "stats_at", "valid")

    def __init__(self, header_end: int, paths: list[str], valid: list[int], stats_at: int) -> None:
        self.header_end = header_end
        self.paths = paths
        self.valid = valid
        self.stats_at = stats_at

    def stat(self, data: bytes, k: int) -> bytes:
        """The stat data of the ``k``-th valid directory."""
        at = self.stats_at + k * _STAT
        return data[at : at + _STAT]

    def stat_block(self, data: bytes) -> bytes:
        """The stat data of every valid directory, in order."""
        return data[self.stats_at : self.stats_at + _STAT * len(self.valid)]


def _varint(data: bytes, i: int) -> tuple[int, int]:
    """git's offset varint (varint.c): the value and the position after it."""
    byte = data[i]
    i += 1
    value = byte & 127
    while byte & 128:
        byte = data[i]
        i += 1
        value = ((value + 1) << 7) + (byte & 127)
        if value > 1 << 62:
            raise Malformed("varint too large")
    return value, i


def _parse(data: bytes) -> _Parsed:
    """The layout of one extension (git's dir.c, ``write_untracked_extension``), checked: every
    count fits what follows, and the parts end exactly one NUL before the end."""
    if len(data) < 2 or data[-1] != 0:
        raise Malformed("no final NUL")
    ident_len, i = _varint(data, 0)
    i += ident_len + _HEADER_FIXED
    i = data.index(b"\0", i) + 1  # the per-directory exclude file's name (.gitignore)
    header_end = i
    count, i = _varint(data, i)
    if count == 0:
        if i != len(data):
            raise Malformed("data after an empty cache")
        return _Parsed(header_end, [], [], i)
    if count > len(data):
        raise Malformed("more directories than bytes")
    paths: list[str] = []
    append = paths.append
    find = data.index
    stack: list[tuple[str | None, int]] = []
    prefix: str | None = None
    remaining = 1
    for _ in range(count):
        while remaining == 0:
            if not stack:
                raise Malformed("more directories than the tree holds")
            prefix, remaining = stack.pop()
        remaining -= 1
        # Both counts are one byte (below 128) nearly always: read inline, else as varints.
        untracked = data[i]
        if untracked < 128:
            i += 1
        else:
            untracked, i = _varint(data, i)
        subdirs = data[i]
        if subdirs < 128:
            i += 1
        else:
            subdirs, i = _varint(data, i)
        end = find(b"\0", i)
        name = data[i:end].decode("utf-8", "surrogateescape")
        i = end + 1
        while untracked:
            i = find(b"\0", i) + 1
            untracked -= 1
        path = name if prefix is None else (prefix + "/" + name if prefix else name)
        append(path)
        if subdirs:
            if subdirs > count:
                raise Malformed("more subdirectories than directories")
            stack.append((prefix, remaining))
            prefix, remaining = path, subdirs
    if remaining or any(left for _, left in stack):
        raise Malformed("fewer directories than the tree holds")
    valid, i = _ewah_bits(data, i, count)
    _check_only, i = _ewah_bits(data, i, count)
    hashed, i = _ewah_bits(data, i, count)
    if i + _STAT * len(valid) + _HASH * len(hashed) + 1 != len(data):
        raise Malformed("stat data and hashes do not end the extension")
    return _Parsed(header_end, paths, valid, i)


def _ewah_bits(data: bytes, i: int, limit: int) -> tuple[list[int], int]:
    """The set bits of one serialized EWAH bitmap (git's ewah/ewah_io.c: bit count, word count,
    64-bit words, position of the last run word; all big-endian), in order, and the position
    after it. Bits at or beyond ``limit`` are a malformed bitmap."""
    bits, words = struct.unpack_from(">II", data, i)
    i += 8
    if words > (len(data) - i) // 8:
        raise Malformed("bitmap longer than the extension")
    values = struct.unpack_from(f">{words}Q", data, i)
    i += 8 * words + 4
    found: list[int] = []
    position = 0
    w = 0
    while w < words:
        marker = values[w]
        w += 1
        run = (marker >> 1) & 0xFFFFFFFF
        literals = marker >> 33
        if position + 64 * run > bits + 63:
            # Bounded before anything is held: a run past the bitmap's own size (a damaged
            # file) would otherwise list up to 2^38 bits.
            raise Malformed("a run beyond the bitmap")
        if marker & 1:
            found.extend(range(position, position + 64 * run))
        position += 64 * run
        if w + literals > words:
            raise Malformed("literal words beyond the bitmap")
        for literal in values[w : w + literals]:
            while literal:
                low = literal & -literal
                found.append(position + low.bit_length() - 1)
                literal ^= low
            position += 64
        w += literals
    found = [bit for bit in found if bit < bits]
    if found and found[-1] >= limit:
        raise Malformed("a bit beyond the directories")
    return found, i


def late_dirs(known: Mapping[str, object], reread: Iterable[str] | None, root: str) -> list[str]:
    """The known directories the capture's late pass looks at (``Capturer._capture``): every one
    when the directories to look at cannot be named (``reread`` ``None``); else those of them that
    are known, and, below them, every known directory that is no longer one (removed or replaced
    by a file: its parent alone changed) with the known directories under it. A directory that
    is still one below them either has the stat data git recorded for it, or is among them."""
    if reread is None:
        return list(known)
    parents = set(reread)
    if not parents:
        return []
    chosen = {d for d in parents if d in known}
    gone: list[str] = []
    for rel in known:
        if rel and rel.rpartition("/")[0] in parents and not _is_dir(f"{root}/{rel}"):
            gone.append(rel + "/")
            chosen.add(rel)
    if gone:
        prefixes = tuple(gone)
        chosen.update(rel for rel in known if rel.startswith(prefixes))
    return sorted(chosen)


def _is_dir(path: str) -> bool:
    try:
        return os.stat(path, follow_symlinks=False).st_mode & 0o170000 == 0o040000
    except OSError:
        return False
