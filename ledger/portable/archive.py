"""The session archive: one ``.tar.gz`` file holding a session, its ancestors and its snapshots.

Why it exists: ``rewind export`` must produce one file a user can move to another machine, and
``rewind import`` must read such a file without trusting it. The layout is fixed and small::

    manifest.json          what the archive holds (versions, original cwd and repo, HEAD, counts,
                           and the sha256 and size of every other member)
    sessions/0.jsonl       the exported session
    sessions/1.jsonl …     its ancestors through parentSession, nearest first
    snapshots.bundle       a git bundle (v2) of every snapshot commit the ledgers reference

Invariants:
- Reading never extracts anything: :mod:`ledger.portable.tarstream` reads the ``.tar.gz``
  stream itself, and every member's name, type and declared size is checked before a byte of its
  body is read. Only regular-file members with exactly the names above are accepted; ``..``,
  absolute names, links, devices, directories, GNU long-name records and global or oversized pax
  headers are refused (:class:`HostileArchiveError`).
- ``manifest.json`` comes first (as export writes it), so every later member must be listed in
  it, with its exact size, before its body is read. Session files (at most
  ``Limits.session_bytes`` each) are held in memory; the bundle is hashed while it streams into an
  anonymous temporary file (:func:`open_archive`) and is never held whole.
- Sizes are bounded (:class:`Limits`); a member larger than its bound, a truncated or corrupt
  archive, a member whose bytes do not match the manifest's sha256 or size, or a missing member
  is refused (:class:`CorruptArchiveError`). Nothing is returned until everything checked out.
- Writing goes to a temporary file next to the target, renamed into place at the end.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import stat
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ledger.errors import CorruptArchiveError, HostileArchiveError
from ledger.portable.tarstream import Member, TarStream

FORMAT = "rewind-session-archive"
VERSION = 1
MANIFEST = "manifest.json"
BUNDLE = "snapshots.bundle"
_SESSION_NAME = re.compile(r"^sessions/(0|[1-9][0-9]{0,3})\.jsonl$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class Limits:
    """Upper bounds for what an import reads into memory."""

    member_bytes: int = 1 << 30
    session_bytes: int = 256 << 20
    manifest_bytes: int = 16 << 20
    total_bytes: int = 2 << 30
    members: int = 1000


@dataclass(frozen=True)
class SessionMember:
    """One session file of the archive, as the manifest describes it."""

    file: str
    id: str
    name: str
    cwd: str | None
    parent_session: str | None
    original_path: str
    sha256: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "id": self.id,
            "name": self.name,
            "cwd": self.cwd,
            "parentSession": self.parent_session,
            "originalPath": self.original_path,
            "sha256": self.sha256,
            "size": self.size,
        }

    @classmethod
    def from_json(cls, data: Any) -> SessionMember:
        if not isinstance(data, dict):
            raise CorruptArchiveError("manifest: a session entry is not an object")
        return cls(
            file=_text(data, "file"),
            id=_text(data, "id"),
            name=_text(data, "name"),
            cwd=_opt_text(data, "cwd"),
            parent_session=_opt_text(data, "parentSession"),
            original_path=_text(data, "originalPath"),
            sha256=_text(data, "sha256"),
            size=_int(data, "size"),
        )


@dataclass(frozen=True)
class Manifest:
    """The archive's table of contents (``manifest.json``)."""

    session_id: str
    original_cwd: str | None
    original_repo: str
    repository_head: str | None
    exported_at: str
    ledger_version: str
    sessions: list[SessionMember]
    snapshots: list[str]
    missing_snapshots: list[str] = field(default_factory=list)
    bundle_sha256: str = ""
    bundle_size: int = 0
    format: str = FORMAT
    version: int = VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "version": self.version,
            "ledgerVersion": self.ledger_version,
            "session": self.session_id,
            "originalCwd": self.original_cwd,
            "originalRepo": self.original_repo,
            "repositoryHead": self.repository_head,
            "exportedAt": self.exported_at,
            "sessions": [s.to_json() for s in self.sessions],
            "snapshots": self.snapshots,
            "missingSnapshots": self.missing_snapshots,
            "bundle": {"file": BUNDLE, "sha256": self.bundle_sha256, "size": self.bundle_size},
            "counts": {
                "sessions": len(self.sessions),
                "snapshots": len(self.snapshots),
                "missingSnapshots": len(self.missing_snapshots),
            },
        }

    def encode(self) -> bytes:
        return orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2) + b"\n"

    @classmethod
    def decode(cls, data: bytes) -> Manifest:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise CorruptArchiveError(f"manifest.json is not JSON ({exc})") from exc
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise CorruptArchiveError("manifest.json is not a rewind session archive manifest")
        if obj.get("version") != VERSION:
            raise CorruptArchiveError(
                f"archive version {obj.get('version')!r} is not supported (this is {VERSION})"
            )
        bundle = obj.get("bundle")
        if not isinstance(bundle, dict):
            raise CorruptArchiveError("manifest: no bundle entry")
        sessions = obj.get("sessions")
        if not isinstance(sessions, list) or not sessions:
            raise CorruptArchiveError("manifest: no sessions")
        snapshots = _sha_list(obj.get("snapshots"), "snapshots")
        missing = _sha_list(obj.get("missingSnapshots", []), "missingSnapshots")
        return cls(
            session_id=_text(obj, "session"),
            original_cwd=_opt_text(obj, "originalCwd"),
            original_repo=_text(obj, "originalRepo"),
            repository_head=_opt_text(obj, "repositoryHead"),
            exported_at=_text(obj, "exportedAt"),
            ledger_version=_text(obj, "ledgerVersion"),
            sessions=[SessionMember.from_json(s) for s in sessions],
            snapshots=snapshots,
            missing_snapshots=missing,
            bundle_sha256=_text(bundle, "sha256"),
            bundle_size=_int(bundle, "size"),
        )


def _text(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise CorruptArchiveError(f"manifest: {key!r} is missing or not a string")
    return value


def _opt_text(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise CorruptArchiveError(f"manifest: {key!r} is not a string")
    return value


def _int(obj: dict[str, Any], key: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CorruptArchiveError(f"manifest: {key!r} is not a size")
    return value


def _sha_list(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(
        isinstance(v, str) and _HEX40.match(v) for v in value
    ):
        raise CorruptArchiveError(f"manifest: {key!r} is not a list of commit ids")
    return list(value)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class ArchiveContents:
    manifest: Manifest
    sessions: list[bytes]
    """Session file bytes, in the manifest's order (the exported session first)."""
    bundle: bytes


def write_archive(target: Path, manifest: Manifest, sessions: list[bytes], bundle: bytes) -> int:
    """Write the archive atomically; returns its size in bytes."""
    target = Path(target)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    members = [(MANIFEST, manifest.encode())]
    members += [(member.file, data) for member, data in zip(manifest.sessions, sessions)]
    members.append((BUNDLE, bundle))
    try:
        with (
            open(temp, "wb") as raw,
            tarfile.open(
                fileobj=raw, mode="w:gz", compresslevel=1, format=tarfile.PAX_FORMAT
            ) as tar,
        ):
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                info.mtime = 0
                tar.addfile(info, io.BytesIO(data))
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return target.stat().st_size


def check_member_name(name: str) -> None:
    """Refuse names that could escape or that the format does not know."""
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise HostileArchiveError(f"absolute path in the archive: {name!r}")
    parts = re.split(r"[/\\]", name)
    if ".." in parts:
        raise HostileArchiveError(f"path with '..' in the archive: {name!r}")
    if name not in (MANIFEST, BUNDLE) and not _SESSION_NAME.match(name):
        raise HostileArchiveError(f"unexpected member in the archive: {name!r}")


class ArchiveFile:
    """A checked archive whose bundle waits in an anonymous temporary file (see :func:`open_archive`).

    ``sessions`` are the session files' bytes in the manifest's order; ``bundle`` is positioned
    at 0 and holds exactly ``manifest.bundle_size`` bytes whose sha256 matched the manifest.
    """

    def __init__(self, manifest: Manifest, sessions: list[bytes], bundle: BinaryIO) -> None:
        self.manifest = manifest
        self.sessions = sessions
        self.bundle = bundle


@contextlib.contextmanager
def open_archive(
    path: Path, limits: Limits | None = None, *, spool_dir: Path | None = None
) -> Iterator[ArchiveFile]:
    """Read and check an archive, streaming its bundle into a temporary file in ``spool_dir``
    (default: the system's temporary directory) that is gone when the context ends.

    The members are read in the order export writes them; ``manifest.json`` must come first, so
    every later member's name, size and checksum are known before its body is read. Session
    files (each at most ``limits.session_bytes``) are held in memory; the bundle is hashed and
    written out in chunks, never held.
    """
    limits = limits or Limits()
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below; a
        # regular file ignores the flag).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise CorruptArchiveError(f"{path}: no such file", hint="check the path") from exc
    except OSError as exc:
        raise CorruptArchiveError(
            f"{path}: not a readable archive ({type(exc).__name__}: {exc})"
        ) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        # A FIFO or a device could feed the reader forever; an archive is a file.
        os.close(fd)
        raise CorruptArchiveError(f"{path}: not a regular file", hint="check the path")
    # The spool is an anonymous file (O_TMPFILE where the file system has it): nothing to clean
    # up even if the process is killed, and nothing visible in the spool directory.
    with open(fd, "rb") as raw, tempfile.TemporaryFile(dir=spool_dir) as spool:
        # Read errors of the archive become CorruptArchiveError in TarStream; a failed write to
        # the spool (a full disk) stays an OSError, which the CLI reports as such.
        stream = TarStream(raw, max_members=limits.members, max_total=limits.total_bytes)
        manifest, sessions = _read_members(stream, limits, spool)
        raw.close()
        spool.seek(0)
        yield ArchiveFile(manifest, sessions, spool)


def _bound(limits: Limits, name: str) -> int:
    if name == MANIFEST:
        return limits.manifest_bytes
    return limits.member_bytes if name == BUNDLE else limits.session_bytes


def _next(stream: TarStream, limits: Limits) -> Member | None:
    """The next member, its name and declared size checked before its body is read."""
    member = stream.next_member()
    if member is not None:
        check_member_name(member.name)
        bound = _bound(limits, member.name)
        if member.size > bound:
            raise HostileArchiveError(
                f"member too large: {member.name!r} ({member.size} bytes, limit {bound})"
            )
    return member


def _read_members(
    stream: TarStream, limits: Limits, spool: BinaryIO
) -> tuple[Manifest, list[bytes]]:
    first = _next(stream, limits)
    if first is None or first.name != MANIFEST:
        raise CorruptArchiveError("the archive does not start with manifest.json")
    manifest = Manifest.decode(b"".join(stream.body()))
    expected: dict[str, tuple[str, int]] = {}
    for entry in manifest.sessions:
        if not _SESSION_NAME.match(entry.file):
            raise HostileArchiveError(
                f"manifest names an unexpected session member: {entry.file!r}"
            )
        if entry.file in expected:
            raise CorruptArchiveError(f"manifest lists {entry.file!r} twice")
        expected[entry.file] = (entry.sha256, entry.size)
    expected[BUNDLE] = (manifest.bundle_sha256, manifest.bundle_size)
    found: dict[str, bytes] = {}
    seen = {MANIFEST}
    while (member := _next(stream, limits)) is not None:
        if member.name in seen:
            raise HostileArchiveError(f"member appears twice in the archive: {member.name!r}")
        seen.add(member.name)
        if member.name not in expected:
            raise HostileArchiveError(f"members the manifest does not list: {member.name}")
        digest, size = expected[member.name]
        if member.size != size:
            raise CorruptArchiveError(f"member {member.name!r} does not match its checksum")
        hasher = hashlib.sha256()
        if member.name == BUNDLE:
            for chunk in stream.body():
                hasher.update(chunk)
                spool.write(chunk)
        else:
            chunks = []
            for chunk in stream.body():
                hasher.update(chunk)
                chunks.append(chunk)
            found[member.name] = b"".join(chunks)
        if hasher.hexdigest() != digest:
            raise CorruptArchiveError(f"member {member.name!r} does not match its checksum")
    for name in expected:
        if name not in seen:
            raise CorruptArchiveError(f"member {name!r} is missing")
    spool.flush()
    return manifest, [found[entry.file] for entry in manifest.sessions]


def read_archive(path: Path, limits: Limits | None = None) -> ArchiveContents:
    """Read and check an archive with its bundle in memory (for small archives and tests; an
    import uses :func:`open_archive`, which never holds the bundle)."""
    with open_archive(path, limits) as archive:
        return ArchiveContents(archive.manifest, archive.sessions, archive.bundle.read())


__all__ = [
    "ArchiveContents",
    "ArchiveFile",
    "Limits",
    "Manifest",
    "SessionMember",
    "check_member_name",
    "open_archive",
    "read_archive",
    "sha256",
    "write_archive",
]
