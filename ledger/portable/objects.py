"""Moving snapshot commits between repositories: bundles out, quarantined and checked packs in.

Why it exists: a session's rewind points are commits of one repository. Export writes them as a
git bundle (v2, git's own transport format: ``git bundle verify`` and ``git fetch`` accept it)
with one ref per snapshot, ``refs/pi-rewind/snapshots/<sha>``. Import must not let a hostile
bundle put anything in the repository, so it works like git's receive-pack quarantine:

1. the pack goes into a fresh ``.git/objects/incoming-rewind-*`` directory (``git index-pack
   --strict`` with that directory as the object directory and the repository's as alternate),
2. every commit in it must be a snapshot (no parents, subject ``pi rewind snapshot``) — or, for
   a remote's export, a keepalive or the export commit — and everything must be connected,
3. only then are the pack files moved into ``.git/objects/pack``; otherwise the quarantine is
   deleted and nothing was written.

An archive's bundle is read from the checked spool file (:func:`read_bundle_header`, then
``index-pack`` reads the pack from that file): a large pack is never held in memory.

Invariants: writes only inside ``.git/objects`` (the quarantine and its migration) and, through
:func:`append_to_store`, ``refs/pi-rewind/store`` (one compare-and-swap append of the whole batch
on top of whatever is there, never replacing it, skipping snapshots it already keeps).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ledger.errors import (
    CorruptArchiveError,
    GitError,
    HostileArchiveError,
)
from ledger.git.repo import GitRepo
from ledger.git.runner import EMPTY_TREE, GitRunner
from ledger.git.store.bundle_objects import ObjectView
from ledger.git.store.chain import (
    KEEPALIVE_MESSAGE,
    SNAPSHOT_SUBJECT,
    Store,
    git_identity,
    offset_minutes,
)

BUNDLE_SIGNATURE = b"# v2 git bundle\n"
SNAPSHOT_REF_PREFIX = "refs/pi-rewind/snapshots/"
SESSION_REF_PREFIX = "refs/pi-rewind/sessions/"
EXPORT_SUBJECT = "pi rewind session export"
_REF_LINE = re.compile(rb"^([0-9a-f]{40}) (refs/[!-~]+)$")


def write_bundle(repo: GitRepo, snapshots: list[str]) -> bytes:
    """A v2 bundle holding ``snapshots`` (and their trees and blobs), one ref per snapshot."""
    header = (
        BUNDLE_SIGNATURE
        + b"".join(f"{sha} {SNAPSHOT_REF_PREFIX}{sha}\n".encode() for sha in snapshots)
        + b"\n"
    )
    pack = pack_objects(repo, snapshots)
    return header + pack


def pack_objects(repo: GitRepo, tips: Iterable[str]) -> bytes:
    runner = GitRunner(repo.root, repo.git_dir)
    result = runner.run(
        ["pack-objects", "--stdout", "--revs", "--delta-base-offset", "-q"],
        input="".join(f"{sha}\n" for sha in tips).encode(),
        operation="git pack-objects",
    )
    return result.stdout


@dataclass(frozen=True)
class Bundle:
    refs: list[tuple[str, str]]
    pack: bytes


@dataclass(frozen=True)
class BundleHeader:
    refs: list[tuple[str, str]]
    pack_offset: int
    """Where the pack starts in the bundle file."""


_MAX_REF_LINE = 200  # "<40 hex> refs/pi-rewind/snapshots/<40 hex>\n" is 107 bytes


def read_bundle_header(handle: BinaryIO, max_refs: int) -> BundleHeader:
    """Read a v2 bundle's header from ``handle`` (at most ``max_refs`` refs, each line bounded);
    refuse prerequisites and foreign refs. ``handle`` is left somewhere after the header."""
    if handle.readline(len(BUNDLE_SIGNATURE)) != BUNDLE_SIGNATURE:
        raise CorruptArchiveError("the snapshots bundle is not a v2 git bundle")
    offset = len(BUNDLE_SIGNATURE)
    refs: list[tuple[str, str]] = []
    while True:
        line = handle.readline(_MAX_REF_LINE)
        offset += len(line)
        if not line.endswith(b"\n"):
            raise CorruptArchiveError(
                "the snapshots bundle's header has an overlong line or no end"
            )
        line = line[:-1]
        if not line:
            break
        if line.startswith(b"-"):
            raise HostileArchiveError(
                "the bundle needs commits this repository may not have (prerequisites)"
            )
        match = _REF_LINE.match(line)
        if match is None:
            raise CorruptArchiveError(f"bad bundle header line {line[:80]!r}")
        sha, ref = match.group(1).decode(), match.group(2).decode()
        if ref != SNAPSHOT_REF_PREFIX + sha:
            raise HostileArchiveError(
                f"the bundle names a ref outside the snapshot namespace: {ref}"
            )
        refs.append((sha, ref))
        if len(refs) > max_refs:
            raise CorruptArchiveError("the snapshots bundle names more snapshots than listed")
    if refs and handle.read(4) != b"PACK":
        raise CorruptArchiveError("the snapshots bundle holds no pack")
    return BundleHeader(refs, offset)


def parse_bundle(data: bytes) -> Bundle:
    """Split a v2 bundle held in memory into its refs and pack (see :func:`read_bundle_header`)."""
    header = read_bundle_header(io.BytesIO(data), max_refs=len(data))
    return Bundle(header.refs, data[header.pack_offset :])


class Quarantine:
    """A private object directory inside ``.git/objects`` that borrows the repository's objects."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self.objects = repo.common_dir / "objects"
        self.path = Path(tempfile.mkdtemp(prefix="incoming-rewind-", dir=self.objects))
        (self.path / "pack").mkdir()
        self.runner = GitRunner(repo.root, repo.git_dir)
        self.env = {
            "GIT_OBJECT_DIRECTORY": str(self.path),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.objects),
            "GIT_QUARANTINE_PATH": str(self.path),
        }

    def run(
        self, args: list[str], operation: str, *, input: bytes | None = None, check: bool = True
    ) -> bytes:
        result = self.runner.run(
            args, operation=operation, input=input, extra_env=self.env, check=check
        )
        return result.stdout

    def index_pack(self, pack: bytes) -> None:
        try:
            self.run(["index-pack", "--strict", "--stdin"], "git index-pack", input=pack)
        except GitError as exc:
            raise CorruptArchiveError(f"the snapshots pack is corrupt ({exc.detail})") from exc

    def index_pack_file(self, handle: BinaryIO, offset: int) -> None:
        """``git index-pack --strict --stdin`` reading the pack straight from ``handle`` (a real
        file) from ``offset`` on: a large pack is never held in our memory."""
        handle.flush()
        # The child reads from the shared file offset; set it at the OS level (not only in
        # Python's buffer) right before git starts.
        os.lseek(handle.fileno(), offset, os.SEEK_SET)
        cmd = self.runner.command(["index-pack", "--strict", "--stdin"])
        try:
            proc = subprocess.run(
                cmd,
                cwd=str(self.runner.root),
                env=self.runner.env(extra=self.env),
                stdin=handle.fileno(),
                capture_output=True,
                check=False,
            )
        except OSError as exc:
            raise GitError(
                "git index-pack", str(exc), hint="is git installed and on PATH?"
            ) from exc
        if proc.returncode != 0:
            detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[:6]
            raise CorruptArchiveError(
                f"the snapshots pack is corrupt ({'; '.join(detail) or proc.returncode})"
            )

    def commits(self) -> list[str]:
        """Every commit object in the quarantine (not the repository's)."""
        out = self.runner.run(
            ["cat-file", "--batch-check=%(objectname) %(objecttype)", "--batch-all-objects"],
            operation="git cat-file",
            extra_env={"GIT_OBJECT_DIRECTORY": str(self.path)},
        ).stdout
        return [line.split()[0] for line in out.decode().splitlines() if line.endswith(" commit")]

    def object_view(self) -> ObjectView:
        """A read-only view of the repository that also sees the quarantined objects."""
        return ObjectView.with_objects(self.repo, self.path)

    def check_connected(self, tips: list[str]) -> None:
        if not tips:
            return
        result = self.runner.run(
            ["rev-list", "--objects", "--stdin", "--quiet"],
            operation="git rev-list",
            input="".join(f"{t}\n" for t in tips).encode(),
            extra_env=self.env,
            check=False,
        )
        if result.returncode != 0:
            raise CorruptArchiveError(
                "the snapshots are incomplete (objects are missing from the pack)"
            )

    def migrate(self) -> int:
        """Move the quarantined packs and loose objects into the repository; returns files moved."""
        moved = 0
        for src in sorted(self.path.rglob("*"), key=_migrate_order):
            if not src.is_file() or src.is_symlink():
                continue
            rel = src.relative_to(self.path)
            dst = self.objects / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.exists():
                continue
            os.replace(src, dst)
            moved += 1
        return moved

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _migrate_order(path: Path) -> tuple[int, str]:
    """Packs before their indexes (a reader must never see an index without its pack)."""
    suffix = path.suffix
    return (
        {".pack": 0, ".rev": 1, ".idx": 2}.get(suffix, 0 if path.parent.name != "pack" else 3),
        str(path),
    )


@contextlib.contextmanager
def quarantine(repo: GitRepo) -> Iterator[Quarantine]:
    q = Quarantine(repo)
    try:
        yield q
    finally:
        q.remove()


def classify(view: ObjectView, sha: str) -> str:
    """``snapshot``, ``keepalive``, ``export`` or ``other`` for one commit."""
    commit = view.commit(sha)
    if commit is None:
        return "other"
    subject = commit.subject
    parents = len(commit.parents)
    if subject == SNAPSHOT_SUBJECT and parents == 0:
        return "snapshot"
    if subject == KEEPALIVE_MESSAGE and commit.tree == EMPTY_TREE and parents in (1, 2):
        return "keepalive"
    if subject == EXPORT_SUBJECT and parents == 1:
        return "export"
    return "other"


def check_commits(
    view: ObjectView, commits: list[str], *, allowed: frozenset[str]
) -> dict[str, str]:
    kinds = {}
    for sha in commits:
        kind = classify(view, sha)
        if kind not in allowed:
            raise HostileArchiveError(
                f"the bundle holds commit {sha[:12]}, which is not a rewind snapshot",
                hint="nothing was written; a session archive holds snapshot commits only",
            )
        kinds[sha] = kind
    return kinds


def append_to_store(repo: GitRepo, snapshots: list[str]) -> list[str]:
    """Append the snapshots the store does not keep yet (in order), with one compare-and-swap for
    the batch (:meth:`Store.append_many`); returns those appended."""
    when_s = int(time.time())
    return Store(repo).append_many(snapshots, git_identity(repo), when_s, offset_minutes(when_s))


def keepalive_chain(repo: GitRepo, snapshots: list[str]) -> str:
    """Objects only (no ref): a keepalive chain over ``snapshots``, as the store builds it; its head."""
    when_s = int(time.time())
    head = Store(repo).keepalive_chain(
        None, snapshots, git_identity(repo), when_s, offset_minutes(when_s)
    )
    assert head is not None
    return head


__all__ = [
    "EXPORT_SUBJECT",
    "SESSION_REF_PREFIX",
    "SNAPSHOT_REF_PREFIX",
    "Bundle",
    "BundleHeader",
    "Quarantine",
    "append_to_store",
    "check_commits",
    "classify",
    "keepalive_chain",
    "pack_objects",
    "parse_bundle",
    "quarantine",
    "read_bundle_header",
    "write_bundle",
]
