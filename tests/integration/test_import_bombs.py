"""``rewind import`` reads nothing it has not bounded, and keeps no foreign ``parentSession``.

The bombs are written as raw tar headers into a gzip stream (concatenated gzip members of
zeros, ~1000:1), so a 1 GiB record costs about a megabyte on disk. The import runs as a real
process under ``prlimit --as``: an importer that held such a record (as :mod:`tarfile` does with
GNU long names and pax headers, or as the old reader did with the bundle) dies of MemoryError
instead of refusing the archive.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ledger.errors import CorruptArchiveError, HostileArchiveError
from ledger.git.repo import GitRepo
from ledger.portable import export_archive, import_archive
from ledger.portable.archive import BUNDLE, MANIFEST, Manifest, read_archive, sha256, write_archive
from tests.enginekit import Agent
from tests.gitkit import ROOT, git

PRLIMIT = shutil.which("prlimit")
AS_LIMIT = 400 << 20  # an import needs under 150 MiB; holding any of the bombs needs more
GIB = 1 << 30

needs_prlimit = pytest.mark.skipif(
    PRLIMIT is None, reason="prlimit (util-linux) is not installed: cannot bound the importer"
)


# --- building archives byte by byte -------------------------------------------------------------


def _header(name: str, size: int, kind: bytes = b"0") -> bytes:
    block = bytearray(512)
    raw = name.encode()
    block[: len(raw)] = raw
    block[100:108] = b"0000644\x00"
    block[108:116] = b"0000000\x00"
    block[116:124] = b"0000000\x00"
    block[124:136] = b"%011o\x00" % size
    block[136:148] = b"00000000000\x00"
    block[156:157] = kind
    block[257:265] = b"ustar\x0000"
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\x00 " % sum(block)
    return bytes(block)


def _padding(size: int) -> bytes:
    return bytes(-size % 512)


def _member(name: str, data: bytes, kind: bytes = b"0") -> bytes:
    return _header(name, len(data), kind) + data + _padding(len(data))


def _pax(key: str, value: str) -> bytes:
    """One pax record, ``"<len> <key>=<value>\\n"``, whose length counts itself."""
    body = f" {key}={value}\n".encode()
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def _zeros_gz(size: int) -> bytes:
    """``size`` zero bytes as concatenated gzip members (gzip and tar read them as one stream)."""
    mib = gzip.compress(bytes(1 << 20), compresslevel=9)
    whole, rest = divmod(size, 1 << 20)
    return mib * whole + (gzip.compress(bytes(rest)) if rest else b"")


def _end() -> bytes:
    return bytes(1024)


def _export(repo: Path, tmp_path: Path) -> Path:
    agent = Agent.start(repo, tmp_path / "agent")
    agent.prompt("make a file", lambda r: (r / "new.txt").write_text("x\n"))
    archive = tmp_path / "good.rewind"
    export_archive(GitRepo.discover(repo), agent.session_file, archive)
    return archive


def _prefix(archive: Path, *, bundle_size: int | None = None) -> bytes:
    """The manifest and session members of a real export, uncompressed; with ``bundle_size``
    the manifest claims a bundle of that many bytes with a checksum no bytes have."""
    contents = read_archive(archive)
    manifest = contents.manifest
    if bundle_size is not None:
        manifest = Manifest(
            **{**manifest.__dict__, "bundle_size": bundle_size, "bundle_sha256": "0" * 64}
        )
    out = _member(MANIFEST, manifest.encode())
    for member, data in zip(manifest.sessions, contents.sessions):
        out += _member(member.file, data)
    return out


def _state(repo: Path, agent_dir: Path) -> tuple[str, list[str], list[str]]:
    refs = git(repo, "for-each-ref")
    files = sorted(str(p) for p in agent_dir.rglob("*")) if agent_dir.exists() else []
    objects = sorted(str(p.relative_to(repo)) for p in (repo / ".git" / "objects").rglob("*"))
    return refs, files, objects


def _import_bounded(archive: Path, repo: Path, agent_dir: Path) -> subprocess.CompletedProcess[str]:
    assert PRLIMIT is not None
    return subprocess.run(
        [PRLIMIT, f"--as={AS_LIMIT}", "--", sys.executable, "-m", "ledger", "import", str(archive)]
        + ["--agent-dir", str(agent_dir)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,  # generous: a refusal takes seconds; a reader that decompresses a bomb won't
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _assert_refused_with_nothing_written(
    proc: subprocess.CompletedProcess[str], before: tuple[str, list[str], list[str]], after: object
) -> None:
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: archive refused"), proc.stderr
    assert "hint: nothing was written" in proc.stderr
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    assert after == before


# --- header-record bombs --------------------------------------------------------------------------


@needs_prlimit
@pytest.mark.parametrize(
    "kind, name",
    [(b"L", "././@LongLink"), (b"x", "PaxHeaders/snapshots.bundle")],
    ids=["gnu-long-name", "pax-header"],
)
def test_a_gigabyte_header_record_is_refused_before_it_is_read(
    repo: Path, tmp_path: Path, kind: bytes, name: str
) -> None:
    archive = tmp_path / "bomb.rewind"
    prefix = _prefix(_export(repo, tmp_path))
    with open(archive, "wb") as out:
        out.write(gzip.compress(prefix + _header(name, GIB, kind)))
        out.write(_zeros_gz(GIB))
        out.write(gzip.compress(_member(BUNDLE, b"") + _end()))
    assert archive.stat().st_size < 4 << 20
    agent_dir = tmp_path / "agent2"
    before = _state(repo, agent_dir)
    proc = _import_bounded(archive, repo, agent_dir)
    _assert_refused_with_nothing_written(proc, before, _state(repo, agent_dir))
    assert "never writes" in proc.stderr


@needs_prlimit
def test_a_large_member_with_a_wrong_checksum_is_refused_without_being_held(
    repo: Path, tmp_path: Path
) -> None:
    size = 512 << 20  # within Limits.member_bytes, so it is read and hashed; above AS_LIMIT
    archive = tmp_path / "big.rewind"
    with open(archive, "wb") as out:
        out.write(gzip.compress(_prefix(_export(repo, tmp_path), bundle_size=size)))
        out.write(gzip.compress(_header(BUNDLE, size)))
        out.write(_zeros_gz(size))
        out.write(gzip.compress(_end()))
    assert archive.stat().st_size < 4 << 20
    agent_dir = tmp_path / "agent2"
    before = _state(repo, agent_dir)
    proc = _import_bounded(archive, repo, agent_dir)
    _assert_refused_with_nothing_written(proc, before, _state(repo, agent_dir))
    assert "does not match its checksum" in proc.stderr


@pytest.mark.parametrize(
    "attack",
    ["global-pax", "long-link", "sparse-pax", "manifest-not-first", "junk-after-end"],
)
def test_records_export_never_writes_are_refused(repo: Path, tmp_path: Path, attack: str) -> None:
    prefix = _prefix(_export(repo, tmp_path))
    bundle = _member(BUNDLE, read_archive(tmp_path / "good.rewind").bundle)
    if attack == "global-pax":
        tar = _member("pax_global_header", _pax("comment", "hello"), b"g") + prefix + bundle
    elif attack == "long-link":
        tar = prefix + _member("././@LongLink", b"snapshots.bundle\x00", b"K") + bundle
    elif attack == "sparse-pax":
        tar = prefix + _member("PaxHeaders/b", _pax("GNU.sparse.size", "9"), b"x") + bundle
    elif attack == "manifest-not-first":
        manifest_len = 512 + len(read_archive(tmp_path / "good.rewind").manifest.encode())
        manifest_len += -manifest_len % 512
        tar = prefix[manifest_len:] + prefix[:manifest_len] + bundle
    else:
        tar = prefix + bundle + _end() + b"not padding"
    archive = tmp_path / "bad.rewind"
    archive.write_bytes(gzip.compress(tar + _end()))
    agent_dir = tmp_path / "agent2"
    before = _state(repo, agent_dir)
    with pytest.raises((HostileArchiveError, CorruptArchiveError)) as err:
        import_archive(GitRepo.discover(repo), agent_dir, archive)
    assert err.value.hint and "nothing was written" in err.value.hint
    assert _state(repo, agent_dir) == before


def test_a_small_pax_header_naming_the_member_is_read_like_tar_reads_it(
    repo: Path, tmp_path: Path
) -> None:
    prefix = _prefix(_export(repo, tmp_path))
    data = read_archive(tmp_path / "good.rewind").bundle
    record = _pax("path", BUNDLE)
    tar = prefix + _member("PaxHeaders/b", record, b"x") + _member("placeholder", data) + _end()
    archive = tmp_path / "pax.rewind"
    archive.write_bytes(gzip.compress(tar))
    assert read_archive(archive).bundle == data


# --- parentSession --------------------------------------------------------------------------------


def test_an_imported_session_keeps_no_parent_session_the_archive_does_not_hold(
    repo: Path, tmp_path: Path
) -> None:
    contents = read_archive(_export(repo, tmp_path))
    original = contents.sessions[0]
    first, _, rest = original.partition(b"\n")
    header = orjson.loads(first)
    header["parentSession"] = "/etc/passwd"
    session = orjson.dumps(header) + b"\n" + rest
    member = contents.manifest.sessions[0]
    member = type(member)(
        **{
            **member.__dict__,
            "parent_session": "/etc/passwd",
            "sha256": sha256(session),
            "size": len(session),
        }
    )
    manifest = Manifest(**{**contents.manifest.__dict__, "sessions": [member]})
    archive = tmp_path / "parent.rewind"
    write_archive(archive, manifest, [session], contents.bundle)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    report = import_archive(GitRepo.discover(clone), tmp_path / "agent2", archive)
    written = Path(report.session_file).read_bytes()
    new_first, _, new_rest = written.partition(b"\n")
    new_header = orjson.loads(new_first)
    assert "parentSession" not in new_header
    assert new_header["id"] == header["id"] and new_header["cwd"] == str(clone.resolve())
    assert new_rest == rest  # every byte after the header line is the archive's
