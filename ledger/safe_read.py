"""Reading files that a user, a cloned repository or another program put in our way.

Why it exists: session files, their ``parentSession`` ancestors and settings files are named by
data we do not control. A FIFO there made ``open()`` block forever, ``/dev/zero`` made a read
run until memory ran out, and ``/dev/stdin`` hung the bridge before it could answer Pi. Every
such read goes through :func:`open_regular` (fault campaign item 4; docs/design.md#hostile-files).

Invariants: the open never blocks (``O_NONBLOCK``; a FIFO without a writer opens at once and is
then refused); only regular files are read (the check is on the opened descriptor, so a symlink
to a device is refused too, and a swap between check and read is impossible); reads are bounded,
and every byte is read and scanned once: :func:`read_head` searches only each new chunk for
newlines, never the whole buffer again (issue 23: re-counting a growing buffer after every
64 KiB made a 1.5 GiB file without newlines take hours).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_SESSION_BYTES = 1 << 31
"""2 GiB: far beyond any real session (100,000 entries are ~37 MB), short of exhausting memory."""


HEAD_CHUNK = 1 << 16
"""The read size of :func:`read_head`: one read holds the first lines of any real session."""


class NotRegularFileError(OSError):
    """The path is a directory, FIFO, device or socket, or larger than the limit."""


def open_regular(path: Path | str) -> tuple[int, os.stat_result]:
    """A read-only descriptor of ``path`` and its stat, if it is a regular file; the caller
    closes it. Raises FileNotFoundError, NotRegularFileError or another OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise NotRegularFileError(errno.EISDIR, "is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(errno.EINVAL, "not a regular file (a FIFO, device or socket)")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular_file(path: Path | str, limit: int, *, head: int | None = None) -> bytes | None:
    """The bytes of ``path`` (at most ``head`` of them when given) if it is a regular file of
    at most ``limit`` bytes; None if it does not exist. Raises OSError with a reason otherwise."""
    try:
        fd, st = open_regular(path)
    except FileNotFoundError:
        return None
    try:
        if st.st_size > limit and head is None:
            raise NotRegularFileError(errno.EFBIG, f"larger than {limit:,} bytes")
        want = limit if head is None else min(head, limit)
        chunks: list[bytes] = []
        total = 0
        while total <= want:
            chunk = os.read(fd, min(1 << 20, want + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        data = b"".join(chunks)
        if len(data) > want:
            if head is not None:
                return data[:want]
            raise NotRegularFileError(errno.EFBIG, f"larger than {limit:,} bytes")
        return data
    finally:
        os.close(fd)


def read_head(fd: int, lines: int, limit: int) -> tuple[bytes, bool]:
    """The start of the open file ``fd`` through its ``lines``-th newline (or through its end),
    and whether ``limit`` bytes went by first. When they did (``True``), only the complete
    lines within the first ``limit`` bytes are returned, possibly none.

    At most ``limit + 1`` bytes are read (the extra byte tells "exactly ``limit``" from "more"),
    each once, and newlines are counted in each new chunk only, so the cost is linear in the
    bytes read and bounded by ``limit`` whatever the file's size."""
    chunks: list[bytes] = []
    total = 0
    found = 0
    while True:
        chunk = os.read(fd, min(HEAD_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks), False
        here = chunk.count(b"\n")
        if found + here >= lines:
            end = -1
            for _ in range(lines - found):
                end = chunk.index(b"\n", end + 1)
            chunks.append(chunk[: end + 1])
            return b"".join(chunks), False
        found += here
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            head = b"".join(chunks)[:limit]
            return head[: head.rfind(b"\n") + 1], True


__all__ = [
    "HEAD_CHUNK",
    "MAX_SESSION_BYTES",
    "NotRegularFileError",
    "open_regular",
    "read_head",
    "read_regular_file",
]
