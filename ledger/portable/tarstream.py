"""A strict, bounded reader of the ``.tar.gz`` stream that ``rewind export`` writes.

Why it exists: :mod:`tarfile` reads a GNU long-name record (typeflag ``L``/``K``) or a pax
header (``x``/``g``) whole, before its caller sees the member it describes: a 3 MB archive of
gzip-compressed zeros declaring a 1 GiB long name drives an import to gigabytes of memory before
any limit can look at it. This reader never reads a byte of a record's body before its caller
(or its own bound, for header records) has accepted the size the header declares.

What it accepts is what ``write_archive`` emits (docs in :mod:`ledger.portable.archive`): POSIX
ustar headers (magic ``ustar\\0`` ``00``) of regular files (typeflag ``0``), after them the
end-of-archive zero blocks and zero padding, in one gzip stream (concatenated gzip members are
read as one, as ``gzip`` does; nothing else may follow them). It also accepts a local pax header (``x``) of at most
:data:`MAX_PAX_BYTES` with the plain keys a tar writer may add (``path``, ``size``, times, owner),
which export does not write today but a future Python might.

Invariants:
- Every header block's checksum is verified; its size field is parsed (octal only, base-256 is
  refused) and checked against the bound before the body is read. Bodies come out in chunks of
  at most :data:`CHUNK` bytes, so nothing larger than one chunk is held unless the caller holds it.
- Refused before their body is read: GNU long names and long links (``L``/``K``), global pax
  headers (``g``), a pax header above :data:`MAX_PAX_BYTES`, links, directories, devices and any
  other typeflag (:class:`HostileArchiveError`); more than ``max_members`` regular members or a
  sum of declared sizes above ``max_total`` (:class:`HostileArchiveError`).
- A bad checksum, a truncated stream, gzip errors (CRC, length, format, bytes after the last
  member) and anything but zero bytes after the end-of-archive block are
  :class:`CorruptArchiveError`; more than :data:`MAX_TRAILING_BYTES` of zeros there is hostile.
  So the decompressed bytes read are bounded by ``max_total`` plus one header and one pax record
  per member plus the trailing bound: a gzip bomb cannot make the reader work (or wait) longer
  than reading that much. The compressed bytes read are bounded by the file's size.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from ledger.errors import CorruptArchiveError, HostileArchiveError

BLOCK = 512
CHUNK = 1 << 20
RAW_CHUNK = 64 << 10
MAX_PAX_BYTES = 64 << 10
MAX_TRAILING_BYTES = 1 << 20
_MAGIC = b"ustar\x0000"
_REGULAR = (b"0", b"\x00")
_NEVER_WRITTEN = {
    b"L": "a GNU long-name record",
    b"K": "a GNU long-link record",
    b"g": "a global pax header",
}
_PAX_KEYS = frozenset({"path", "size", "mtime", "atime", "ctime", "uid", "gid", "uname", "gname"})


@dataclass(frozen=True)
class Member:
    """A regular-file member: its name and the body size its header declares."""

    name: str
    size: int


class _Gunzip:
    """Decompresses a gzip file (one member or several concatenated) with bounded output per
    call. Unlike :class:`gzip.GzipFile` it takes nothing but gzip members: NUL padding after a
    member (which ``GzipFile`` skips one byte per Python call) or other trailing bytes are refused
    by zlib as a bad header. CRC and length of every member are checked by zlib (``wbits=31``)."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._zlib = zlib.decompressobj(wbits=31)
        self._input = b""
        self._started = False  # a member has begun (so the end of the file is an end, not junk)

    def read(self, size: int) -> bytes:
        """At most ``size`` bytes; fewer only at the end of the gzip stream."""
        out: list[bytes] = []
        got = 0
        while got < size:
            if self._zlib.eof:
                self._input = self._zlib.unused_data
                self._zlib = zlib.decompressobj(wbits=31)
                self._started = False
            if not self._input:
                self._input = self._raw.read(RAW_CHUNK)
                if not self._input:
                    if self._started:
                        raise EOFError("the gzip stream ends inside a member")
                    break
            self._started = True
            data = self._zlib.decompress(self._input, size - got)
            self._input = self._zlib.unconsumed_tail
            if data:
                out.append(data)
                got += len(data)
        return b"".join(out)


class TarStream:
    """Reads members one at a time: :meth:`next_member`, then :meth:`body` or :meth:`skip`.

    ``raw`` is the compressed archive file. The caller must consume (or skip) each body before
    asking for the next member; the reader refuses to go on otherwise.
    """

    def __init__(self, raw: BinaryIO, *, max_members: int, max_total: int) -> None:
        self._gz = _Gunzip(raw)
        self._max_members = max_members
        self._max_total = max_total
        self._members = 0
        self._total = 0
        self._pending: Member | None = None
        self._done = False

    # -- reading the decompressed stream ---------------------------------------------------------

    def _read_some(self, size: int) -> bytes:
        try:
            return self._gz.read(size)
        except (EOFError, zlib.error, OSError) as exc:  # OSError: an I/O error of the file
            raise CorruptArchiveError(
                f"not a readable archive ({type(exc).__name__}: {exc})"
            ) from exc

    def _read(self, size: int) -> bytes:
        """Exactly ``size`` bytes (``size`` is at most one chunk), or a refusal."""
        data = self._read_some(size)
        if len(data) != size:
            raise CorruptArchiveError("the archive is truncated")
        return data

    def _header_block(self) -> bytes | None:
        """The next header block, or ``None`` at the end-of-archive marker (checked to the end)."""
        block = self._read(BLOCK)
        if block == bytes(BLOCK):
            self._finish()
            return None
        stored = _octal(block[148:156], "header checksum")
        unsigned = sum(block[:148]) + 8 * 0x20 + sum(block[156:])
        if stored != unsigned:
            raise CorruptArchiveError("a tar header's checksum does not match (corrupt archive)")
        if block[257:265] != _MAGIC:
            raise CorruptArchiveError(
                "a tar header is not POSIX ustar (not an archive made by 'rewind export')"
            )
        return block

    def _finish(self) -> None:
        """After the first zero block: only zero padding may follow, then the gzip end."""
        self._done = True
        seen = 0
        while True:
            data = self._read_some(min(CHUNK, MAX_TRAILING_BYTES + 1 - seen))
            if not data:
                return
            seen += len(data)
            if data.count(0) != len(data):
                raise CorruptArchiveError("data after the end of the archive")
            if seen > MAX_TRAILING_BYTES:
                raise HostileArchiveError(
                    f"more than {MAX_TRAILING_BYTES} bytes of padding after the end of the archive"
                )

    # -- members ---------------------------------------------------------------------------------

    def next_member(self) -> Member | None:
        """The next regular member's header (its body not read), or ``None`` at the end."""
        if self._pending is not None:
            raise RuntimeError("the previous member's body was not read")
        if self._done:
            return None
        block = self._header_block()
        if block is None:
            return None
        pax: dict[str, str] = {}
        if block[156:157] == b"x":
            size = _size(block)
            if size > MAX_PAX_BYTES:
                raise HostileArchiveError(
                    f"a pax header of {size} bytes (limit {MAX_PAX_BYTES}); "
                    "'rewind export' never writes one"
                )
            pax = _pax_records(self._read(_padded(size))[:size])
            block = self._header_block()
            if block is None:
                raise CorruptArchiveError("a pax header without its member")
            if block[156:157] == b"x":
                raise HostileArchiveError("two pax headers in a row")
        name = _name(block)
        kind = block[156:157]
        if kind in _NEVER_WRITTEN:
            raise HostileArchiveError(
                f"{_NEVER_WRITTEN[kind]} in the archive, which 'rewind export' never writes"
            )
        if kind in (b"1", b"2"):
            target = block[157:257].split(b"\x00", 1)[0].decode("utf-8", "replace")
            raise HostileArchiveError(f"link in the archive: {name!r} -> {target!r}")
        if kind not in _REGULAR:
            raise HostileArchiveError(f"not a regular file in the archive: {name!r}")
        size = _size(block)
        if "path" in pax:
            name = pax["path"]
        if "size" in pax:
            if not pax["size"].isdigit():
                raise CorruptArchiveError(f"a pax size that is not a number: {pax['size'][:40]!r}")
            size = int(pax["size"])
        self._members += 1
        if self._members > self._max_members:
            raise HostileArchiveError(f"more than {self._max_members} members in the archive")
        self._total += size
        if self._total > self._max_total:
            raise HostileArchiveError(f"archive too large (more than {self._max_total} bytes)")
        self._pending = Member(name, size)
        return self._pending

    def body(self) -> Iterator[bytes]:
        """The pending member's body, in chunks of at most :data:`CHUNK` bytes."""
        member = self._pending
        if member is None:
            raise RuntimeError("no member is pending")
        left = member.size
        while left:
            step = min(CHUNK, left)
            yield self._read(step)
            left -= step
        self._read(_padded(member.size) - member.size)
        self._pending = None

    def skip(self) -> None:
        for _chunk in self.body():
            pass


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def _octal(field: bytes, what: str) -> int:
    if field[:1] and field[0] & 0x80:
        raise CorruptArchiveError(f"a tar {what} in base-256, which 'rewind export' never writes")
    text = field.split(b"\x00", 1)[0].strip(b" ")
    if not text:
        return 0
    if not all(0x30 <= c <= 0x37 for c in text):
        raise CorruptArchiveError(f"a tar {what} that is not a number")
    return int(text, 8)


def _size(block: bytes) -> int:
    return _octal(block[124:136], "size field")


def _name(block: bytes) -> str:
    name = block[:100].split(b"\x00", 1)[0]
    prefix = block[345:500].split(b"\x00", 1)[0]
    full = prefix + b"/" + name if prefix else name
    return full.decode("utf-8", "surrogateescape")


def _pax_records(data: bytes) -> dict[str, str]:
    """``"<len> <key>=<value>\\n"`` records; only plain file attributes are accepted."""
    records: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos, pos + 20)
        digits = data[pos:space] if space > pos else b""
        if not digits.isdigit():
            raise CorruptArchiveError("a malformed pax header")
        length = int(digits)
        end = pos + length
        if length <= space - pos + 1 or end > len(data) or data[end - 1 : end] != b"\n":
            raise CorruptArchiveError("a malformed pax header")
        key, equals, value = data[space + 1 : end - 1].partition(b"=")
        if not equals:
            raise CorruptArchiveError("a malformed pax header")
        text = key.decode("utf-8", "replace")
        if text not in _PAX_KEYS:
            raise HostileArchiveError(
                f"a pax header with {text[:40]!r}, which 'rewind export' never writes"
            )
        records[text] = value.decode("utf-8", "surrogateescape")
        pos = end
    return records


__all__ = ["BLOCK", "CHUNK", "MAX_PAX_BYTES", "Member", "TarStream"]
