"""The authorship index's bytes: a versioned header and self-checking frames (docs/authorship.md#format).

Why it exists: several processes append to one file at once and any of them may die mid-write;
a reader must take every whole record, skip a torn one and never mistake half a record for a
whole. Each record is one frame::

    frame   = MAGIC (4 bytes: 00 'R' 'W' 'A') | length (u32 LE) | crc32 (u32 LE) | payload
    payload = header '\n' modes '\n' blobs '\n' paths
    header  = {"s": snapshot, "k": "agent"|"user"|"rewind", "i": session, "e": entry|null,
               "o": op|null}                      (compact JSON, one line)
    modes   = decimal modes, space-separated      (0: the path is absent)
    blobs   = hex blob ids, space-separated       (empty for an absent path)
    paths   = raw path bytes, NUL-separated       (a git path never holds a NUL)

Columns, not rows: a load parses every entry of the file, and three splits and a ``zip`` do it
in C (about 0.3 µs an entry; rows cost 2 µs). The paths come last, so a newline in a path is
only ever part of it. The file starts with one line, ``pi-rewind-authorship 1 complete\n`` (or
``partial``: created by an append while no index existed, so its history is missing).

Invariants: pure (bytes in, values out); decoding never raises: a frame whose magic, length,
checksum or payload is wrong is skipped up to the next frame that checks (``skipped`` counts the
bytes), and an incomplete frame at the end is left for a later read (``end`` stops before it)
unless a whole frame follows it (then it was torn); a frame never exceeds
:data:`MAX_FRAME_BYTES`, so an oversized record is written as several frames of the same
snapshot and author (:func:`coalesce` joins them back).
"""

from __future__ import annotations

import bisect
import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import Literal, cast

import orjson

from ledger.authorship.model import Author, AuthorKind, Key, Record
from ledger.plain import FrozenPlain, Plain

VERSION = 1
HEADER_WORD = b"pi-rewind-authorship"
MAX_HEADER_BYTES = 64
MAGIC = b"\x00RWA"
_PREFIX = struct.Struct("<4sII")
PREFIX_BYTES = _PREFIX.size
MAX_FRAME_BYTES = 64 * 1024
"""The most one frame (one ``write()``) holds, prefix included: small enough that appends of
several processes never interleave and a reader's resync never scans far."""
_KINDS: frozenset[str] = frozenset({"agent", "user", "rewind"})

State = Literal["complete", "partial"]


class Header(FrozenPlain):
    __slots__ = ("length", "state", "version")
    version: int
    state: State
    length: int
    """Bytes of the header line; the first frame starts there."""

    def __init__(self, version: int, state: State, length: int) -> None:
        self._init(version=version, state=state, length=length)


def encode_header(state: State = "complete", version: int = VERSION) -> bytes:
    return b"%s %d %s\n" % (HEADER_WORD, version, state.encode())


def decode_header(data: bytes) -> Header | None:
    """The header at the start of ``data``, or ``None`` when it is not one (damaged)."""
    end = data.find(b"\n", 0, MAX_HEADER_BYTES)
    if end < 0:
        return None
    parts = data[:end].split(b" ")
    if len(parts) != 3 or parts[0] != HEADER_WORD or not parts[1].isdigit():
        return None
    state = parts[2].decode("ascii", "replace")
    if state not in ("complete", "partial"):
        return None
    return Header(int(parts[1]), cast(State, state), end + 1)


def _columns(keys: Sequence[Key]) -> tuple[bytes, bytes, bytes]:
    for path, _, _ in keys:
        if not path or b"\x00" in path:
            raise ValueError(f"not a git path: {path!r}")
    return (
        b" ".join(b"%d" % mode for _, mode, _ in keys),
        " ".join(blob for _, _, blob in keys).encode("ascii"),
        b"\x00".join(path for path, _, _ in keys),
    )


def _payload(record: Record, keys: Sequence[Key]) -> bytes:
    author = record.author
    head = orjson.dumps(
        {
            "s": record.snapshot,
            "k": author.kind,
            "i": author.session,
            "e": author.entry,
            "o": author.op,
        }
    )
    return b"\n".join((head, *_columns(keys)))


def _entry_bytes(key: Key) -> int:
    """What one entry adds to a payload (its three fields and their separators)."""
    return len(key[0]) + len(b"%d" % key[1]) + len(key[2]) + 3


def _frame(payload: bytes) -> bytes:
    return _PREFIX.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


def encode_record(record: Record, *, max_frame: int = MAX_FRAME_BYTES) -> list[bytes]:
    """The frames of ``record``: one, or several of the same snapshot and author when its
    entries do not fit in ``max_frame`` bytes (one entry longer than that is refused: a git
    path is at most 4 KiB)."""
    base = len(_payload(record, ())) + PREFIX_BYTES
    frames: list[bytes] = []
    batch: list[Key] = []
    size = base
    for key in record.entries:
        cost = _entry_bytes(key)
        if base + cost > max_frame:
            raise ValueError(f"an entry of {cost} bytes does not fit in a frame")
        if batch and size + cost > max_frame:
            frames.append(_frame(_payload(record, batch)))
            batch, size = [], base
        batch.append(key)
        size += cost
    if batch or not frames:
        frames.append(_frame(_payload(record, batch)))
    return frames


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def decode_payload(payload: bytes) -> Record | None:
    """The record of one checked payload, or ``None`` when it does not parse."""
    parts = payload.split(b"\n", 3)
    if len(parts) != 4:
        return None
    try:
        head = orjson.loads(parts[0])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(head, dict):
        return None
    snapshot, kind, session = head.get("s"), head.get("k"), head.get("i")
    if not isinstance(snapshot, str) or not isinstance(session, str) or kind not in _KINDS:
        return None
    author = Author(
        cast(AuthorKind, kind), session, _str_or_none(head.get("e")), _str_or_none(head.get("o"))
    )
    _, modes, blobs, paths = parts
    if not modes:
        return Record(snapshot, author, ()) if not blobs and not paths else None
    try:
        # A load parses every entry of the file: whole columns at once, in C.
        mode_list = list(map(int, modes.split(b" ")))
        blob_list = blobs.decode("ascii").split(" ")
    except (ValueError, UnicodeDecodeError):
        return None
    path_list = paths.split(b"\x00")
    if not len(mode_list) == len(blob_list) == len(path_list) or b"" in path_list:
        return None
    return Record(snapshot, author, tuple(zip(path_list, mode_list, blob_list, strict=True)))


class Decoded(Plain):
    """What one read of a stretch of the file gave."""

    __slots__ = ("end", "last_at", "last_snapshot", "pending", "records", "skipped")
    records: list[Record]
    end: int
    """Where the next read starts: after the last whole frame, or before an incomplete one."""
    skipped: int
    """Bytes of frames that did not check (torn or damaged) before ``end``."""
    pending: bool
    """An incomplete frame is at ``end`` (being written now, or torn by a writer that died)."""
    last_snapshot: str | None
    """The snapshot of the last whole frame read (parsed even when a sparse read left the
    frame out): the work tree as last captured by anyone, the base of the next capture."""
    last_at: int | None
    """Where that frame starts (``None``: no whole frame was read)."""

    def __init__(
        self,
        records: list[Record] | None = None,
        end: int = 0,
        skipped: int = 0,
        pending: bool = False,
        last_snapshot: str | None = None,
    ) -> None:
        self.records = [] if records is None else records
        self.end = end
        self.skipped = skipped
        self.pending = pending
        self.last_snapshot = last_snapshot
        self.last_at = None


_FILTERED = Record("", Author("user", ""))
"""A whole frame left unparsed: it names none of the paths asked about."""


class _Paths:
    """The paths a sparse read asks about, and where each occurs in the data (found in C)."""

    def __init__(self, data: bytes, paths: frozenset[bytes]) -> None:
        self.paths = paths
        hits: list[int] = []
        for path in paths:
            found = data.find(path)
            while found >= 0:
                hits.append(found)
                found = data.find(path, found + 1)
        hits.sort()
        self.hits = hits

    def within(self, start: int, end: int) -> bool:
        at = bisect.bisect_left(self.hits, start)
        return at < len(self.hits) and self.hits[at] < end


_NOTHING = _Paths(b"", frozenset())
"""Ask about no path: a frame is checked, never parsed."""


def _whole_frame(data: bytes, pos: int, only: _Paths | None = None) -> tuple[Record, int] | None:
    """The record of a whole, checking frame at ``pos`` and where it ends, else ``None``.
    ``only``: parse the payload only if one of its paths occurs in it (else :data:`_FILTERED`),
    and keep only their entries."""
    if len(data) - pos < PREFIX_BYTES:
        return None
    magic, length, crc = _PREFIX.unpack_from(data, pos)
    if magic != MAGIC or length > MAX_FRAME_BYTES - PREFIX_BYTES:
        return None
    end = pos + PREFIX_BYTES + length
    if end > len(data):
        return None
    payload = data[pos + PREFIX_BYTES : end]
    if zlib.crc32(payload) != crc:
        return None
    if only is not None and not only.within(pos + PREFIX_BYTES, end):
        return _FILTERED, end  # names none of the paths: never parsed
    record = decode_payload(payload)
    if record is None:
        return None
    if only is not None:
        entries = tuple(key for key in record.entries if key[0] in only.paths)
        record = Record(record.snapshot, record.author, entries) if entries else _FILTERED
    return record, end


def frame_checksum(data: bytes, pos: int) -> int | None:
    """The checksum of the whole, checking frame at ``pos``, else ``None``."""
    if _whole_frame(data, pos, _NOTHING) is None:
        return None
    return int(_PREFIX.unpack_from(data, pos)[2])


def _could_be_incomplete(data: bytes, pos: int) -> bool:
    """Whether the bytes from ``pos`` to the end could be the start of a frame still being
    written (a right magic and length whose end lies beyond the data)."""
    rest = data[pos : pos + PREFIX_BYTES]
    if not MAGIC.startswith(rest[:4]):
        return False
    if len(rest) < PREFIX_BYTES:
        return True
    _, length, _ = _PREFIX.unpack(rest)
    return length <= MAX_FRAME_BYTES - PREFIX_BYTES and pos + PREFIX_BYTES + length > len(data)


def _next_whole(data: bytes, pos: int) -> int | None:
    """The first position after ``pos`` where a whole, checking frame starts."""
    found = data.find(MAGIC, pos + 1)
    while found >= 0:
        if _whole_frame(data, found) is not None:
            return found
        found = data.find(MAGIC, found + 1)
    return None


def decode_frames(data: bytes, start: int = 0, *, only: Iterable[bytes] | None = None) -> Decoded:
    """Every whole frame of ``data[start:]`` (see the module for what is skipped). ``only``:
    just the records naming these paths, with just their entries: every answer about them,
    read without parsing the rest (a small plan in a fresh process)."""
    wanted = None if only is None else _Paths(data, frozenset(only))
    out = Decoded(end=start)
    pos = start
    size = len(data)
    last_filtered: int | None = None
    while pos < size:
        whole = _whole_frame(data, pos, wanted)
        if whole is not None:
            out.last_at = pos
            if whole[0] is not _FILTERED:
                out.records.append(whole[0])
                out.last_snapshot = whole[0].snapshot
                last_filtered = None
            else:
                last_filtered = pos
            pos = whole[1]
            out.end = pos
            continue
        following = _next_whole(data, pos)
        if following is None:
            # Nothing whole follows: either a frame being written (leave it for the next read)
            # or garbage up to the end (skip it; nothing can follow it but new appends, which
            # then resync past it).
            if _could_be_incomplete(data, pos):
                out.pending = True
                out.end = pos
                return _with_last(out, data, last_filtered)
            out.skipped += size - pos
            out.end = size
            return _with_last(out, data, last_filtered)
        out.skipped += following - pos
        pos = following
        out.end = pos
    return _with_last(out, data, last_filtered)


def _with_last(out: Decoded, data: bytes, last_filtered: int | None) -> Decoded:
    """Fill in ``last_snapshot`` when the last whole frame was one a sparse read left out:
    only that frame's payload is parsed."""
    if last_filtered is not None:
        whole = _whole_frame(data, last_filtered)
        if whole is not None:
            out.last_snapshot = whole[0].snapshot
    return out


def coalesce(records: Iterable[Record]) -> list[Record]:
    """Consecutive records of one snapshot and author joined (an oversized record's frames)."""
    joined: list[Record] = []
    for record in records:
        if joined and joined[-1].snapshot == record.snapshot and joined[-1].author == record.author:
            last = joined[-1]
            joined[-1] = Record(last.snapshot, last.author, last.entries + record.entries)
        else:
            joined.append(record)
    return joined


__all__ = [
    "MAGIC",
    "MAX_FRAME_BYTES",
    "PREFIX_BYTES",
    "VERSION",
    "Decoded",
    "Header",
    "State",
    "coalesce",
    "decode_frames",
    "decode_header",
    "decode_payload",
    "encode_header",
    "encode_record",
    "frame_checksum",
]
