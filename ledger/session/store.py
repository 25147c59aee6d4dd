"""Session files on disk: reading them, appending to them, creating new ones.

Why it exists: this is the only code that touches session files. Reading turns bytes into a
:class:`~ledger.session.model.Session` and every failure into a
:class:`~ledger.errors.SessionFileError`. Appending follows Pi's own rules so that real Pi can
resume the file afterwards (docs/formats.md#appending-rules).

Invariants:
- Reading never modifies a file; legacy v1/v2 files are migrated in memory only.
- An append writes exactly one line per entry, with ``parentId`` = the leaf (the last entry in
  file order) unless the caller names another parent, a fresh 8-hex id unique in the file, and
  a millisecond ``Z`` timestamp. If the file does not end with ``\\n`` (a torn last line after a
  crash), a newline is written first so our line is never glued onto the torn one.
- Appends hold an exclusive advisory lock (``flock``) on the file from reading the leaf to the
  ``fsync``, so processes appending at once neither interleave nor fork the chain. Pi itself
  does not lock: never append while a Pi process has the file open
  (docs/formats.md#who-may-write-a-session-file, docs/design.md#concurrency).
- Appends to a file whose header version is below 3 are refused: Pi would migrate it with new
  random ids on its next open and orphan what we wrote.
- Reads are bounded and linear: a header is looked for in the first :data:`HEADER_LINES`
  lines within :data:`MAX_HEADER_BYTES`, read once (:func:`ledger.safe_read.read_head`); a
  whole file only up to :data:`~ledger.safe_read.MAX_SESSION_BYTES`, and only once its start
  holds a header or may still lead to one (:func:`probe_header`).
- New files are created complete (header and entries) under a temporary name and linked into
  place, so a reader never sees half a file and an existing file is never replaced.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
from collections.abc import Callable, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, Final

from ledger.clock import Clock, IdSource, RandomIds, SystemClock, iso_from_ms
from ledger.errors import SessionAppendError, SessionFileError
from ledger.record_envelope import custom_entry, serialize_entry
from ledger.safe_read import (
    MAX_SESSION_BYTES,
    NotRegularFileError,
    open_regular,
    read_regular_file,
)
from ledger.safe_read import read_head as read_regular_head
from ledger.session.model import Session
from ledger.session.parse import NoHeaderError, parse_header_only, parse_session_bytes

_HEADER_HINT = 'a Pi session file starts with a {"type":"session","id":…} header line'

HEADER_LINES: Final = 5
"""The header is looked for in this many first non-empty lines (the reference's fast path)."""
MAX_HEADER_BYTES: Final = 1 << 20
"""1 MiB: how far into a file its header is looked for. A Pi header line is a few hundred bytes
(id, timestamp, cwd, parentSession path), so real sessions fit many times over; a file that runs
this far without a header and without five complete lines (a sparse multi-GiB file, one huge
line) is refused without reading the rest (issue 23)."""
_MIB_TEXT = f"{MAX_HEADER_BYTES >> 20} MiB"


def read_bytes(path: Path) -> bytes:
    """The file's bytes, or a :class:`SessionFileError` that says what is wrong with the path.
    Only regular files are read, with a bounded read that never blocks (:mod:`ledger.safe_read`)."""
    try:
        data = read_regular_file(path, MAX_SESSION_BYTES)
    except OSError as exc:
        raise unreadable_session_error(path, exc) from exc
    if data is None:
        raise unreadable_session_error(path, FileNotFoundError(errno.ENOENT, "no such file"))
    return data


def read_session(path: Path | str) -> Session:
    """Parse a whole session file. Bad lines are skipped and listed in ``session.skipped``.

    The start is checked first (:func:`probe_header`), so a file whose first megabyte holds no
    header is refused without reading the rest."""
    path = Path(path)
    probe_header(path)
    data = read_bytes(path)
    try:
        parsed = parse_session_bytes(data)
    except NoHeaderError as exc:
        raise SessionFileError(path, f"not a Pi session file ({exc})", hint=_HEADER_HINT) from exc
    return Session(parsed, path)


def read_header(path: Path | str, data: bytes | None = None) -> dict[str, Any]:
    """Only the header, from the first :data:`HEADER_LINES` non-empty lines, which must lie
    within the first :data:`MAX_HEADER_BYTES` of the file (``data``, when given, is the file's
    start, already read: its first lines are parsed, however long it is)."""
    path = Path(path)
    if data is None:
        head, cut = read_head(path)
    else:
        head, cut = data, False
    found = _header_of(head)
    if isinstance(found, NoHeaderError):
        raise _no_header(path, found, head, cut)
    return found


def probe_header(path: Path | str) -> dict[str, Any] | None:
    """The header if the file's first lines hold one, else ``None``: a full parse may still find
    it behind unparseable lines (Pi skips those), so the caller reads on. Raises
    :class:`SessionFileError` when the file cannot be read, or when its first
    :data:`MAX_HEADER_BYTES` end without a header and without :data:`HEADER_LINES` complete lines.
    Safety: that refusal comes before the rest is read; without it a multi-GiB file with few
    newlines (a sparse file, one huge line) was read whole wherever a session may be named."""
    path = Path(path)
    head, cut = read_head(path)
    found = _header_of(head)
    if not isinstance(found, NoHeaderError):
        return found
    if cut:
        raise _no_header(path, found, head, cut)
    return None


def read_head(path: Path) -> tuple[bytes, bool]:
    """The file's first :data:`HEADER_LINES` lines, read up to :data:`MAX_HEADER_BYTES`, and
    whether that bound ended the read (then only the complete lines before it are returned).
    Regular files only, never blocking, each byte read once (:mod:`ledger.safe_read`)."""
    try:
        fd, _st = open_regular(path)
    except OSError as exc:
        raise unreadable_session_error(path, exc) from exc
    try:
        return read_regular_head(fd, HEADER_LINES, MAX_HEADER_BYTES)
    except OSError as exc:
        raise unreadable_session_error(path, exc) from exc
    finally:
        os.close(fd)


def unreadable_session_error(path: Path, exc: OSError) -> SessionFileError:
    """The error for a session path that cannot be read, in the words every command uses."""
    if isinstance(exc, FileNotFoundError):
        return SessionFileError(
            path, "no such file", hint="check the path, or list sessions with 'rewind sessions'"
        )
    if isinstance(exc, NotRegularFileError):
        return SessionFileError(
            path, f"{exc.strerror}, not a session file", hint="pass a .jsonl session file"
        )
    if isinstance(exc, PermissionError):
        return SessionFileError(path, "cannot be read (permission denied)")
    return SessionFileError(path, f"cannot be read: {exc.strerror or exc}")


def _header_of(head: bytes) -> dict[str, Any] | NoHeaderError:
    try:
        return parse_header_only(head, HEADER_LINES)
    except NoHeaderError as exc:
        return exc


def _no_header(path: Path, error: NoHeaderError, head: bytes, cut: bool) -> SessionFileError:
    if not cut:
        reason = str(error)
    elif not head:
        reason = f"its first line is longer than {_MIB_TEXT}, far longer than a session header"
    else:
        reason = f"no session header in its first {_MIB_TEXT}: {error}"
    return SessionFileError(path, f"not a Pi session file ({reason})", hint=_HEADER_HINT)


# --- appending ----------------------------------------------------------------------------


class Unset(Enum):
    """The type of :data:`UNSET` (a one-member enum, so that type checkers narrow ``is UNSET``)."""

    UNSET = "UNSET"


UNSET: Final = Unset.UNSET
"""``parent_id=UNSET``: no parent named, append at the leaf (``None`` names no parent: a root)."""

ParentRequest = str | None | Unset
"""The parent an append asks for: an entry id, ``None`` (a new root) or :data:`UNSET` (the leaf)."""

_Builder = Callable[[str, str | None, str], dict[str, Any]]
"""Makes one entry from its new id, its parent and its timestamp."""
_FINGERPRINT = 64


class SessionAppender:
    """Appends entries to one session file, safely shared with other processes.

    It remembers how far it has read, so each append reads only what other writers added since.
    """

    def __init__(
        self, path: Path | str, *, clock: Clock | None = None, ids: IdSource | None = None
    ) -> None:
        self.path = Path(path)
        self.clock = clock or SystemClock()
        self.ids = ids or RandomIds()
        self._known_ids: set[str] = set()
        self._leaf: str | None = None
        self._offset = -1
        self._inode: tuple[int, int] | None = None
        self._fingerprint = b""

    def append_custom(
        self, custom_type: str, data: dict[str, Any], *, parent_id: ParentRequest = UNSET
    ) -> dict[str, Any]:
        """Append a ``custom`` entry (``pi.appendEntry``); returns the entry as written."""

        def build(entry_id: str, parent: str | None, stamp: str) -> dict[str, Any]:
            return custom_entry(custom_type, data, entry_id, parent, stamp)

        return self._append([build], parent_id)[0]

    def append_entry(
        self, fields: dict[str, Any], *, parent_id: ParentRequest = UNSET
    ) -> dict[str, Any]:
        """Append any entry: ``{"type": …, "id", "parentId", "timestamp", **rest}`` in Pi's order."""

        def build(entry_id: str, parent: str | None, stamp: str) -> dict[str, Any]:
            entry = {"type": fields["type"], "id": entry_id, "parentId": parent, "timestamp": stamp}
            entry.update((k, v) for k, v in fields.items() if k not in entry)
            return entry

        return self._append([build], parent_id)[0]

    def _append(
        self, builders: Sequence[_Builder], parent_id: ParentRequest
    ) -> list[dict[str, Any]]:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError as exc:
            raise SessionAppendError(self.path, "no such file") from exc
        except IsADirectoryError as exc:
            raise SessionAppendError(self.path, "is a directory, not a session file") from exc
        except OSError as exc:
            raise SessionAppendError(
                self.path, f"cannot be opened for appending: {exc.strerror or exc}"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                size = self._catch_up(fd)
                written: list[dict[str, Any]] = []
                payload = bytearray()
                if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                    payload += b"\n"
                parent = self._leaf if parent_id is UNSET else parent_id
                for build in builders:
                    entry_id = self.ids.entry_id(self._known_ids)
                    entry = build(entry_id, parent, iso_from_ms(self.clock.now_ms()))
                    line = serialize_entry(entry)
                    payload += line
                    self._known_ids.add(entry_id)
                    written.append(entry)
                    parent = entry_id
                _write_all(fd, bytes(payload))
                os.fsync(fd)
                self._leaf = written[-1]["id"]
                self._offset = size + len(payload)
                self._fingerprint = _tail(fd, self._offset)
                return written
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError as exc:
            raise SessionAppendError(self.path, f"append failed: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)

    def _catch_up(self, fd: int) -> int:
        """Bring the known ids and leaf up to the file's current end; returns its size."""
        stat = os.fstat(fd)
        size = stat.st_size
        inode = (stat.st_dev, stat.st_ino)
        if (
            self._offset < 0
            or inode != self._inode
            or size < self._offset
            or os.pread(fd, len(self._fingerprint), self._offset - len(self._fingerprint))
            != self._fingerprint
        ):
            self._full_read(fd, size)
            self._inode = inode
            return size
        if size > self._offset:
            tail = os.pread(fd, size - self._offset, self._offset)
            end = tail.rfind(b"\n") + 1
            for line in tail[:end].split(b"\n"):
                self._note_line(line)
            self._offset += end
            self._fingerprint = _tail(fd, self._offset)
        return size

    def _full_read(self, fd: int, size: int) -> None:
        # The same bound as every session read, checked before the bytes are held.
        if size > MAX_SESSION_BYTES:
            raise SessionAppendError(
                self.path, f"is larger than {MAX_SESSION_BYTES:,} bytes, not a session file"
            )
        data = os.pread(fd, size, 0)
        try:
            parsed = parse_session_bytes(data)
        except NoHeaderError as exc:
            raise SessionAppendError(
                self.path, f"not a Pi session file ({exc})", hint=_HEADER_HINT
            ) from exc
        if parsed.migrated_from is not None:
            raise SessionAppendError(
                self.path,
                f"is a version {parsed.migrated_from} session file",
                hint="open it once with Pi so that Pi migrates it to version 3, then try again",
            )
        self._known_ids = {entry.id for entry in parsed.entries}
        self._leaf = parsed.entries[-1].id if parsed.entries else None
        self._offset = data.rfind(b"\n") + 1
        self._fingerprint = data[max(0, self._offset - _FINGERPRINT) : self._offset]

    def _note_line(self, line: bytes) -> None:
        import orjson  # here: a spawned bridge's first answer reads no file (issue 34)

        if not line.strip():
            return
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        if (
            isinstance(obj, dict)
            and obj.get("type") != "session"
            and isinstance(obj.get("id"), str)
        ):
            self._known_ids.add(obj["id"])
            self._leaf = obj["id"]


def _tail(fd: int, end: int) -> bytes:
    """The last bytes before ``end``: a cheap check that nobody rewrote what we already read."""
    start = max(0, end - _FINGERPRINT)
    return os.pread(fd, end - start, start)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


# --- creating -----------------------------------------------------------------------------


def encode_cwd(cwd: str) -> str:
    """Pi 0.73.1's session directory name for a cwd (``getDefaultSessionDir``); not reversible."""
    return "--" + re.sub(r"[/\\:]", "-", re.sub(r"^[/\\]", "", cwd)) + "--"


def session_file_name(timestamp: str, session_id: str) -> str:
    return f"{timestamp.replace(':', '-').replace('.', '-')}_{session_id}.jsonl"


def create_session_file(
    sessions_dir: Path,
    cwd: str,
    entries: Sequence[dict[str, Any]] = (),
    *,
    parent_session: str | None = None,
    clock: Clock | None = None,
    ids: IdSource | None = None,
) -> Path:
    """Write a new v3 session file in ``sessions_dir/--<encoded cwd>--/`` and return its path.

    ``entries`` are written verbatim after the header, in order (a fork copies its path with the
    ids preserved, as Pi does).
    """
    clock = clock or SystemClock()
    ids = ids or RandomIds()
    now = clock.now_ms()
    stamp = iso_from_ms(now)
    session_id = ids.session_id(now)
    header: dict[str, Any] = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": stamp,
        "cwd": cwd,
    }
    if parent_session is not None:
        header["parentSession"] = parent_session
    directory = sessions_dir / encode_cwd(cwd)
    target = directory / session_file_name(stamp, session_id)
    payload = serialize_entry(header) + b"".join(serialize_entry(entry) for entry in entries)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        temp = directory / f".{target.name}.{os.getpid()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_all(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, target)  # fails if the target exists: never replace a session
        finally:
            os.unlink(temp)
    except OSError as exc:
        reason = "already exists" if exc.errno == errno.EEXIST else (exc.strerror or str(exc))
        raise SessionFileError(target, f"cannot create session file: {reason}") from exc
    return target
