"""The authorship index on disk: one append-only file per work tree, shared by every session
(docs/authorship.md#the-file).

Why it exists: every session of a work tree appends what its captures found (its agent's turns,
the user's changes, its rewinds) and reads what the others appended, in O(new bytes) per look.
The file lives in the private dir, ``<git-dir>/pi-rewind/authorship.idx``, beside its lock
``authorship.lock`` (callers pass the private dir: this package imports nothing of git).

Concurrency (the decisions, each for a reason):

- **Appends**: ``O_APPEND`` and one ``write()`` per frame of at most 64 KiB, under a *shared*
  ``flock`` of the lock file: on a local file system the kernel never interleaves two such
  writes, and any number of sessions append at once. A short write (a full disk, a signal) is an
  error for the caller (:class:`AuthorshipIndexError`): the adapter then :meth:`invalidates
  <AuthorshipStore.invalidate>` the index, which is rebuilt at its next use.
- **Rewrites** (compaction, a rebuild's replacement, invalidation) hold the lock *exclusively*
  and rename a new file over the old one: no appender can be writing into the file being
  replaced (it holds the shared lock from before it opens the file until it has closed it). Only
  a rewrite drops a torn tail. Where ``flock`` is unavailable appends go on unlocked and
  rewrites are refused (an index that grows is still exact).
- **Readers** take no lock: they open the file, read from where they stopped and keep an
  incomplete frame at the end for the next read; a new inode (a rewrite) means a full reload.
- **A missing file** is created by an append as ``partial`` (its history is missing): a
  rebuild then writes a complete file, merging the records appended meanwhile. Only where the
  caller proves there is no history (a repository's first recorded snapshot: the store keeps no
  other) is it created ``complete``, since a rebuild would write exactly those records.

Invariants: reads are bounded (:data:`MAX_FILE_BYTES`; a larger file is not read, it is rebuilt
or compacted); a file of a newer format version is neither read nor written; the library never
prints.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from ledger.authorship.codec import (
    VERSION,
    Decoded,
    Header,
    State,
    decode_frames,
    decode_header,
    encode_header,
    encode_record,
    frame_checksum,
)
from ledger.authorship.model import AuthorshipIndex, Key, Record, compact
from ledger.errors import AuthorshipIndexError
from ledger.plain import Plain

INDEX_NAME = "authorship.idx"
TMP_SUFFIX = ".tmp"
"""``authorship.idx.<pid>.<ns>.tmp``: a rewrite's or creation's temporary, its writer's lock."""
LOCK_NAME = "authorship.lock"
MAX_FILE_BYTES = 256 * 1024 * 1024
"""The most a reader reads (about 3M path entries): a larger file is rebuilt or compacted."""
READ_CHUNK = 4 * 1024 * 1024
APPEND_WAIT_S = 10.0
"""How long an append waits for a rewrite to end (a rewrite of a full file takes ~1 s)."""
REWRITE_WAIT_S = 2.0
"""How long a rewrite waits for appends to end before it gives up (upkeep tries again later)."""
_POLL_S = 0.01

Status = Literal["ok", "missing", "partial", "damaged", "newer", "too-large"]
"""``ok``: a complete file read whole; ``partial``: created by appends while no index existed;
``damaged``: a bad header, or frames that did not check before the end; ``newer``: a later
format version (left alone); ``too-large``: over :data:`MAX_FILE_BYTES`. Every status but ``ok``
means: rebuild (``newer``: in memory only, never written)."""


class Loaded(Plain):
    """A whole read of the file."""

    __slots__ = (
        "end",
        "identity",
        "last_snapshot",
        "latest",
        "pending",
        "records",
        "skipped",
        "status",
        "version",
    )
    status: Status
    records: list[Record]
    skipped: int
    pending: bool
    """An incomplete frame is at the end (a writer at work, or torn)."""
    version: int | None
    end: int
    """Where a tailing reader goes on: after the last whole frame, or before an incomplete one."""
    last_snapshot: str | None
    """The snapshot of the file's last whole record (a sparse read too)."""
    identity: FileIdentity | None
    """The file read (:func:`file_identity`): it held this content while it is the same."""
    latest: Latest | None
    """Its latest whole record, for :meth:`AuthorshipStore.latest` to go on from."""

    def __init__(
        self,
        status: Status,
        records: list[Record] | None = None,
        skipped: int = 0,
        pending: bool = False,
        version: int | None = None,
        end: int = 0,
        last_snapshot: str | None = None,
    ) -> None:
        self.status = status
        self.records = [] if records is None else records
        self.skipped = skipped
        self.pending = pending
        self.version = version
        self.end = end
        self.last_snapshot = last_snapshot
        self.identity = None
        self.latest = None


FileIdentity = tuple[int, int, int, int]
"""``(st_dev, st_ino, st_size, st_mtime_ns)`` of the index file. The file is only appended to
or replaced (a compaction, a rebuild: a new inode), and an append changes its size, so while the
identity is the same, so is every byte read under it."""


def file_identity(st: os.stat_result) -> FileIdentity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Latest(Plain):
    """The file's latest whole record as one read found it: the work tree's latest recorded
    snapshot (the base of the next capture), and where the next such read can start
    (docs/authorship.md#the-latest-snapshot-without-a-whole-read)."""

    __slots__ = ("at", "checksum", "end", "identity", "snapshot")
    identity: FileIdentity
    """The file as read: the same identity, the same answer, nothing read."""
    at: int
    """Where that record's frame starts."""
    checksum: int
    """Its checksum: a later read finds the same frame there before it trusts what it knew."""
    end: int
    """Where the next read goes on (after the last whole frame, or before an incomplete one)."""
    snapshot: str

    def __init__(
        self, identity: FileIdentity, at: int, checksum: int, end: int, snapshot: str
    ) -> None:
        self.identity = identity
        self.at = at
        self.checksum = checksum
        self.end = end
        self.snapshot = snapshot


def _latest_in(identity: FileIdentity, data: bytes, base: int, decoded: Decoded) -> Latest | None:
    """The latest record ``decoded`` found in ``data`` (the file's bytes from ``base`` on)."""
    if decoded.last_at is None or decoded.last_snapshot is None:
        return None
    checksum = frame_checksum(data, decoded.last_at)
    if checksum is None:
        return None
    return Latest(
        identity, base + decoded.last_at, checksum, base + decoded.end, decoded.last_snapshot
    )


def _no_flock(exc: OSError) -> bool:
    return exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS)


class AuthorshipStore:
    """The index file of one work tree, in ``directory`` (the private dir)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / INDEX_NAME
        self.lock_path = self.directory / LOCK_NAME

    # --- locks ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, exclusive: bool, wait_s: float) -> Iterator[bool]:
        """Hold the lock file shared or exclusive; yields whether it is held (``False``: this
        file system has no ``flock``). Raises :class:`TimeoutError` after ``wait_s``."""
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(self.lock_path, flags, 0o600)
        try:
            mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
            deadline = time.monotonic() + wait_s
            held = True
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if _no_flock(exc):
                        held = False
                        break
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"{self.lock_path} stayed locked for {wait_s:.0f} s")
                time.sleep(_POLL_S)
            yield held
        finally:
            os.close(fd)  # releases the flock

    # --- appends --------------------------------------------------------------------------

    def _create(self, state: State) -> None:
        """Make the file with only its header, atomically (``link`` of a finished temporary:
        another process never sees a file without its header)."""
        temporary = self._temporary()
        try:
            with (
                _written_new(temporary, [encode_header(state)]),
                contextlib.suppress(FileExistsError),
            ):
                os.link(temporary, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)

    def _temporary(self) -> Path:
        return self.directory / f"{INDEX_NAME}.{os.getpid()}.{time.monotonic_ns()}{TMP_SUFFIX}"

    def append(
        self, records: Sequence[Record], *, history_free: Callable[[], bool] | None = None
    ) -> bool:
        """Append ``records`` in order. A missing file is created ``partial``, or ``complete``
        when ``history_free`` (asked then, under the lock) says no point can exist before
        these records. ``False``: not appended because the file is of a newer version or its
        header is damaged (it is rebuilt or left alone). Raises :class:`AuthorshipIndexError`
        when a write fails."""
        frames = [frame for record in records for frame in encode_record(record)]
        if not frames:
            return True
        try:
            with self._locked(False, APPEND_WAIT_S):
                return self._append_locked(frames, history_free)
        except TimeoutError as exc:
            raise AuthorshipIndexError(self.path, str(exc)) from exc
        except OSError as exc:
            raise AuthorshipIndexError(self.path, exc.strerror or str(exc)) from exc

    def _append_locked(
        self, frames: Sequence[bytes], history_free: Callable[[], bool] | None
    ) -> bool:
        flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(self.path, flags)
        except FileNotFoundError:
            self._create("complete" if history_free is not None and history_free() else "partial")
            fd = os.open(self.path, flags)
        try:
            header = decode_header(os.pread(fd, 64, 0))
            if header is None or header.version != VERSION:
                return False
            for frame in frames:
                # One write per frame: the kernel appends it whole, never interleaved with
                # another appender's (O_APPEND, regular file, local file system).
                written = os.write(fd, frame)
                if written != len(frame):
                    raise AuthorshipIndexError(
                        self.path, f"short write ({written} of {len(frame)} bytes)"
                    )
            return True
        finally:
            os.close(fd)

    # --- whole reads ----------------------------------------------------------------------

    def read(self, *, only: Iterable[bytes] | None = None) -> Loaded:
        """Every record of the file, with its status (never raises for its contents).
        ``only``: just what answers about these paths (records naming them, with only their
        entries), for a few paths in a process that has no index loaded: the other frames are
        checked but not parsed."""
        try:
            with _open_read(self.path) as (fd, size):
                if size > MAX_FILE_BYTES:
                    return Loaded("too-large")
                identity = file_identity(os.fstat(fd))
                data = _read_range(fd, 0, size)
        except FileNotFoundError:
            return Loaded("missing")
        except OSError:
            return Loaded("damaged")
        loaded, decoded = _loaded_with(data, only)
        if len(data) == identity[2]:
            loaded.identity = identity
            if decoded is not None:
                loaded.latest = _latest_in(identity, data, 0, decoded)
        return loaded

    def latest(self, known: Latest | None = None) -> Latest | None:
        """The file's latest whole record (``None``: the file is missing, unreadable, too large,
        damaged at its head, or holds no record). With ``known`` (an earlier answer), only what
        was appended after it is read, once the file is found to be the same one grown by
        appends: the same inode, not shorter, and the frame ``known`` names still there with
        its checksum (an inode reused by a rewrite fails that). The latest record does not
        depend on anything before it, so the answer is the one a whole read gives."""
        try:
            with _open_read(self.path) as (fd, size):
                identity = file_identity(os.fstat(fd))
                if known is not None and identity == known.identity:
                    return known
                if size > MAX_FILE_BYTES:
                    return None
                if known is not None and identity[:2] == known.identity[:2] and size >= known.end:
                    data = _read_range(fd, known.at, size)
                    if len(data) == size - known.at and frame_checksum(data, 0) == known.checksum:
                        decoded = decode_frames(data, known.end - known.at, only=())
                        if decoded.last_at is None:
                            # Nothing whole appended yet: the same record, read on from its end.
                            end = known.at + decoded.end
                            return Latest(identity, known.at, known.checksum, end, known.snapshot)
                        found = _latest_in(identity, data, known.at, decoded)
                        if found is not None:
                            return found
                data = _read_range(fd, 0, size)
        except OSError:
            return None
        if len(data) != identity[2]:
            # Shorter than its size said (never for a file only appended to): answered, but
            # under an identity no later look matches, so it is read again.
            identity = (identity[0], identity[1], -1, -1)
        _, whole = _loaded_with(data, ())
        return None if whole is None else _latest_in(identity, data, 0, whole)

    # --- rewrites -------------------------------------------------------------------------

    def _rewrite(self, make: Iterable[bytes]) -> None:
        temporary = self._temporary()
        try:
            with _written_new(temporary, make, sync=True):
                os.replace(temporary, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        with contextlib.suppress(OSError):
            dir_fd = os.open(self.directory, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def compact(self, referenced: Iterable[Key] | None = None) -> Loaded | None:
        """Rewrite the file keeping only what answers for ``referenced`` keys (every key of a
        kept snapshot and of the current tree: retention's call; ``None``: drop only superseded
        entries), dropping any torn tail. Only a complete, undamaged file of this version is
        compacted; returns what was kept, or ``None`` when nothing was done (busy, no
        ``flock``, or a file that must be rebuilt instead)."""
        try:
            with self._locked(True, REWRITE_WAIT_S) as held:
                if not held:
                    return None
                loaded = self.read()
                if loaded.status != "ok" or loaded.skipped:
                    return None
                kept = compact(loaded.records, referenced)
                self._rewrite(_frames_of(kept, "complete"))
                return Loaded("ok", kept)
        except TimeoutError:
            return None

    def replace(self, rebuilt: Sequence[Record]) -> bool:
        """Write a rebuilt index (complete), keeping the records appended since the rebuild read
        the ledgers: those after the last record of the file the rebuild also produced (all of
        them when it produced none). ``False``: not written (busy, no ``flock``, or the file is
        of a newer version)."""
        try:
            with self._locked(True, REWRITE_WAIT_S) as held:
                if not held:
                    return False
                loaded = self.read()
                if loaded.status == "newer":
                    return False
                known = {(r.snapshot, r.author) for r in rebuilt}
                tail = loaded.records
                for position in range(len(tail) - 1, -1, -1):
                    if (tail[position].snapshot, tail[position].author) in known:
                        tail = tail[position + 1 :]
                        break
                self._rewrite(_frames_of([*rebuilt, *tail], "complete"))
                return True
        except TimeoutError:
            return False

    def invalidate(self) -> bool:
        """Remove the file so that its next reader rebuilds it (after a failed append)."""
        try:
            with self._locked(True, APPEND_WAIT_S) as held:
                if not held:
                    return False
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
                return True
        except TimeoutError:
            return False


def _frames_of(records: Iterable[Record], state: State) -> Iterator[bytes]:
    yield encode_header(state)
    for record in records:
        yield from encode_record(record)


@contextlib.contextmanager
def _written_new(path: Path, chunks: Iterable[bytes], *, sync: bool = False) -> Iterator[None]:
    """A new temporary file at ``path`` holding ``chunks``, kept open (and ``flock``'ed) while the
    caller renames or links it into place: the temporary is its writer's lock, so a ``kill -9``
    leftover is told from a live writer's by its free ``flock``
    (:mod:`ledger.git.store.leftovers`), never by its age."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(path, flags, 0o600)
    try:
        with contextlib.suppress(OSError):  # no flock here: never judged, never removed
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _open_read(path: Path) -> Iterator[tuple[int, int]]:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        yield fd, os.fstat(fd).st_size
    finally:
        os.close(fd)


def _read_range(fd: int, start: int, end: int) -> bytes:
    """The bytes ``[start, end)`` of ``fd`` (fewer if the file is shorter). Every caller checked
    ``end`` against :data:`MAX_FILE_BYTES`, so this is one read: a file read in chunks was
    copied twice (the chunks, then their join: ~4 ms of a cold capture's ~8 ms read of a 7 MB
    index). Only a short read (the file shrank, or a signal) goes on in bounded reads."""
    if end <= start:
        return b""
    whole = os.pread(fd, end - start, start)
    if len(whole) == end - start or not whole:
        return whole
    chunks: list[bytes] = [whole]
    position = start + len(whole)
    while position < end:
        chunk = os.pread(fd, min(READ_CHUNK, end - position), position)
        if not chunk:
            break
        chunks.append(chunk)
        position += len(chunk)
    return b"".join(chunks)


def _loaded(data: bytes, only: Iterable[bytes] | None = None) -> Loaded:
    return _loaded_with(data, only)[0]


def _loaded_with(data: bytes, only: Iterable[bytes] | None) -> tuple[Loaded, Decoded | None]:
    """What a whole read found, and its frames as decoded (``None``: none were: no header, or
    another version)."""
    header = decode_header(data)
    if header is None:
        return Loaded("damaged"), None
    if header.version > VERSION:
        return Loaded("newer", version=header.version), None
    if header.version != VERSION:
        return Loaded("damaged", version=header.version), None
    decoded = decode_frames(data, header.length, only=only)
    status: Status = "damaged" if decoded.skipped else _status_of(header)
    loaded = Loaded(
        status,
        decoded.records,
        decoded.skipped,
        decoded.pending,
        header.version,
        decoded.end,
        decoded.last_snapshot,
    )
    return loaded, decoded


def _status_of(header: Header) -> Status:
    return "ok" if header.state == "complete" else "partial"


class AuthorshipReader:
    """An :class:`~ledger.authorship.model.AuthorshipIndex` kept current with the file: loaded
    once, then each :meth:`refresh` reads only the bytes appended since (a rewrite, seen as a
    new inode or a shorter file, reloads it whole)."""

    def __init__(self, store: AuthorshipStore) -> None:
        self.store = store
        self.index = AuthorshipIndex()
        self.status: Status = "missing"
        self.skipped = 0
        self._identity: tuple[int, int] | None = None
        self._offset = 0

    def _reset(self) -> None:
        self.index = AuthorshipIndex()
        self.skipped = 0
        self._identity = None
        self._offset = 0

    def refresh(self) -> Status:
        """Take what was appended since the last call; the status of the file as read."""
        try:
            with _open_read(self.store.path) as (fd, size):
                info = os.fstat(fd)
                identity = (info.st_dev, info.st_ino)
                if identity != self._identity or size < self._offset:
                    self._reset()
                if size > MAX_FILE_BYTES:
                    self._reset()
                    self.status = "too-large"
                    return self.status
                if self._identity is None:
                    loaded = _loaded(_read_range(fd, 0, size))
                    self.status = loaded.status
                    if loaded.version != VERSION:
                        return self.status  # no header, or another version: not read (rebuild)
                    self._identity = identity
                    self.index.extend(loaded.records)
                    self.skipped = loaded.skipped
                    self._offset = loaded.end
                    return self.status
                if size > self._offset:
                    data = _read_range(fd, self._offset, size)
                    decoded = decode_frames(data)
                    self.index.extend(decoded.records)
                    self._offset += decoded.end
                    if decoded.skipped:
                        self.skipped += decoded.skipped
                        self.status = "damaged"
                return self.status
        except FileNotFoundError:
            self._reset()
            self.status = "missing"
        except OSError:
            self._reset()
            self.status = "damaged"
        return self.status


__all__ = [
    "APPEND_WAIT_S",
    "INDEX_NAME",
    "LOCK_NAME",
    "MAX_FILE_BYTES",
    "TMP_SUFFIX",
    "AuthorshipReader",
    "AuthorshipStore",
    "Latest",
    "Loaded",
    "Status",
]
