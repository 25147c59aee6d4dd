"""The session archive: one ``.tar.gz`` file holding a session, its ancestors and its snapshots.

Why it exists: ``rewind export`` must produce one file a user can move to another machine, and
``rewind import`` must read such a file without trusting it. The layout is fixed and small::

    manifest.json          what the archive holds (versions, original cwd and repo, HEAD, counts,
                           and the sha256 and size of every other member)
    sessions/0.jsonl       the exported session
    sessions/1.jsonl …     its ancestors through parentSession, nearest first
    snapshots.bundle       a git bundle (v2) of every snapshot commit the ledgers reference

Invariants:
- Reading never touches the disk besides the archive: members are read into memory, never
  extracted. Only regular-file members with exactly the names above are accepted; ``..``,
  absolute names, links, devices and directories are refused (:class:`HostileArchiveError`).
- Sizes are bounded (:class:`Limits`); a member larger than its bound, a truncated or corrupt
  archive, a member whose bytes do not match the manifest's sha256, or a missing member is
  refused (:class:`CorruptArchiveError`). Nothing is returned until everything checked out.
- Writing goes to a temporary file next to the target, renamed into place at the end.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ledger.errors import CorruptArchiveError, HostileArchiveError

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


def read_archive(path: Path, limits: Limits | None = None) -> ArchiveContents:
    """Read and check an archive entirely in memory (see the module invariants)."""
    limits = limits or Limits()
    members: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for count, info in enumerate(tar):
                if count >= limits.members:
                    raise HostileArchiveError(f"more than {limits.members} members in the archive")
                check_member_name(info.name)
                if info.issym() or info.islnk():
                    raise HostileArchiveError(
                        f"link in the archive: {info.name!r} -> {info.linkname!r}"
                    )
                if not info.isfile():
                    raise HostileArchiveError(f"not a regular file in the archive: {info.name!r}")
                if info.name in members:
                    raise HostileArchiveError(f"member appears twice in the archive: {info.name!r}")
                bound = (
                    limits.manifest_bytes
                    if info.name == MANIFEST
                    else limits.member_bytes
                    if info.name == BUNDLE
                    else limits.session_bytes
                )
                if info.size > bound:
                    raise HostileArchiveError(
                        f"member too large: {info.name!r} ({info.size} bytes, limit {bound})"
                    )
                total += info.size
                if total > limits.total_bytes:
                    raise HostileArchiveError(
                        f"archive too large (more than {limits.total_bytes} bytes)"
                    )
                handle = tar.extractfile(info)
                if handle is None:
                    raise CorruptArchiveError(f"cannot read member {info.name!r}")
                data = handle.read(info.size + 1)
                if len(data) != info.size:
                    raise CorruptArchiveError(f"member {info.name!r} is truncated")
                members[info.name] = data
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise CorruptArchiveError(f"{path}: no such file", hint="check the path") from exc
        raise CorruptArchiveError(
            f"{path}: not a readable archive ({type(exc).__name__}: {exc})"
        ) from exc
    if MANIFEST not in members:
        raise CorruptArchiveError("the archive has no manifest.json")
    manifest = Manifest.decode(members.pop(MANIFEST))
    sessions = []
    for member in manifest.sessions:
        if not _SESSION_NAME.match(member.file):
            raise HostileArchiveError(
                f"manifest names an unexpected session member: {member.file!r}"
            )
        found = members.pop(member.file) if member.file in members else None
        if found is None:
            raise CorruptArchiveError(f"member {member.file!r} is missing")
        if sha256(found) != member.sha256 or len(found) != member.size:
            raise CorruptArchiveError(f"member {member.file!r} does not match its checksum")
        sessions.append(found)
    bundle = members.pop(BUNDLE) if BUNDLE in members else None
    if bundle is None:
        raise CorruptArchiveError(f"member {BUNDLE!r} is missing")
    if sha256(bundle) != manifest.bundle_sha256 or len(bundle) != manifest.bundle_size:
        raise CorruptArchiveError(f"member {BUNDLE!r} does not match its checksum")
    if members:
        raise HostileArchiveError(
            f"members the manifest does not list: {', '.join(sorted(members))}"
        )
    return ArchiveContents(manifest, sessions, bundle)


__all__ = [
    "ArchiveContents",
    "Limits",
    "Manifest",
    "SessionMember",
    "check_member_name",
    "read_archive",
    "sha256",
    "write_archive",
]
