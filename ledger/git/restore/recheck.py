"""One scan per restore: the plan's capture re-checked under the lock instead of taken again.

Why it exists: a command that shows a plan and then restores used to capture the work tree
twice, once for the plan and once more under the private index's lock (and ``rewind restore``
without ``--yes`` three times: its dry run planned too). At 100k files a capture is a stat scan
of the whole tree (~0.2 s), most of a restore (docs/capture.md#one-scan-per-restore). The
capture under the lock was there for one reason: the restore must act on what the files hold
*now*, not on what they held when the plan was made. That question only concerns the paths the
plan touches; every other path is neither read nor written by the restore. So the plan's scan
(:class:`PlanScan`) remembers, for each path it touches, what ``lstat`` said right after the
plan; under the lock the restore asks ``lstat`` again and reuses the plan only when every answer
is the same (:func:`still_current`), else it captures and plans again, as before.

Why this is exact:
- A path the plan touches that was written after the capture read it has a ``ctime`` at or after
  the moment the capture started (``ctime`` cannot be set by a program; the moment is read from
  the same coarse clock the kernel stamps files with, :func:`scan_clock_ns`). Such a path is
  *suspect*: its content is hashed again, as a capture hashes it (git's clean filters, one
  ``git hash-object`` for all of them; in-process when no attribute or filter can apply, as
  :mod:`ledger.git.restore.direct_write` decides), and must equal what the plan's capture
  recorded, else there is no reuse. :data:`SUSPECT_MARGIN_NS` widens the window for file
  systems that keep whole seconds (two for FAT).
- Between the plan and the lock, any change to a touched path changes its ``lstat`` (size,
  ``mtime``, ``ctime`` in nanoseconds, inode, mode): a path created where the plan adds one, a
  file replaced by a link or a directory, a write of the same size.
- A path the plan does not touch may change meanwhile, as it may during the restore: the
  restore leaves it as it is, so nothing of it is lost. What the undo snapshot then holds for
  it is its content at the scan, as for any path changed while a restore runs.
- With a watcher (``rewind serve --watch``) the plan's capture is the watcher's, taken after the
  same moment, so the same rule holds; the watcher is never asked under the lock (it would wait
  for that very lock).

Invariants: read-only except the blobs ``git hash-object -w`` writes for suspects (the objects a
capture would write; a suspect hashed in-process, when no attribute or filter applies, writes
nothing: a match means the capture already wrote that blob). Anything unusual (a submodule in
the plan, a name the hashing path cannot take) means no reuse, never a guess.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

from pygit2.enums import FileMode

from ledger.git.capture.scan import PRIVATE_CONFIG, CaptureResult
from ledger.git.capture.treeedit import LazyUnsupported, current_entries
from ledger.git.repo import GitRepo
from ledger.git.restore.direct_write import blob_id, conversion_free, read_file
from ledger.git.runner import GitRunner
from ledger.git.trees import Change, Entry
from ledger.plain import FrozenPlain
from ledger.settings import SnapshotSettings

SUSPECT_MARGIN_NS = 2_000_000_000
"""A touched path whose ``ctime`` is this close to the scan's start (or later) is hashed again:
two seconds, the coarsest timestamps a file system keeps (FAT); one second for most others."""

_CLOCK = getattr(time, "CLOCK_REALTIME_COARSE", None)


def scan_clock_ns() -> int:
    """Now, on the clock the kernel stamps ``ctime`` with (Linux: the coarse real-time clock,
    which may lag ``time.time_ns()`` by a tick: a file written right after this moment can never
    carry an earlier ``ctime``)."""
    if _CLOCK is not None:
        return time.clock_gettime_ns(_CLOCK)
    return time.time_ns()


class Stamp(FrozenPlain):
    """What ``lstat`` said of a path (``None`` in a stamp map: nothing there)."""

    __slots__ = ("ctime_ns", "dev", "ino", "mode", "mtime_ns", "size")
    mode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int

    def __init__(
        self, mode: int, size: int, mtime_ns: int, ctime_ns: int, ino: int, dev: int
    ) -> None:
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "mtime_ns", mtime_ns)
        object.__setattr__(self, "ctime_ns", ctime_ns)
        object.__setattr__(self, "ino", ino)
        object.__setattr__(self, "dev", dev)

    def _fields(self) -> tuple[object, ...]:
        return (self.mode, self.size, self.mtime_ns, self.ctime_ns, self.ino, self.dev)

    @classmethod
    def of(cls, st: os.stat_result) -> Stamp:
        return cls(st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


class PlanScan(FrozenPlain):
    """The scan a plan was made from, kept so that the restore can reuse it under its lock."""

    __slots__ = ("captured", "settings", "stamps")
    captured: CaptureResult
    settings: SnapshotSettings
    stamps: Mapping[str, Stamp | None]
    """Every path the plan touches (and the directories it replaces), as found after the plan."""

    def __init__(
        self,
        captured: CaptureResult,
        settings: SnapshotSettings,
        stamps: Mapping[str, Stamp | None],
    ) -> None:
        self._init(captured=captured, settings=settings, stamps=stamps)


class PlanShape(Protocol):
    """What a restore plan (:class:`ledger.git.restore.plan.RestorePlan`) tells this module
    (a protocol, not an import: the plan module builds :class:`PlanScan` values)."""

    @property
    def current_tree(self) -> str: ...
    @property
    def added(self) -> Sequence[str]: ...
    @property
    def modified(self) -> Sequence[str]: ...
    @property
    def deleted(self) -> Sequence[str]: ...
    @property
    def replace_dirs(self) -> Sequence[str]: ...
    @property
    def submodules(self) -> Sequence[tuple[str, str]]: ...
    @property
    def changes(self) -> Sequence[Change]: ...


def _lstat(root: bytes, path: str) -> Stamp | None:
    try:
        return Stamp.of(os.lstat(root + b"/" + os.fsencode(path)))
    except (FileNotFoundError, NotADirectoryError):
        return None


def _touched(plan: PlanShape) -> list[str]:
    return list(dict.fromkeys([*plan.added, *plan.modified, *plan.deleted, *plan.replace_dirs]))


def stamp_plan(
    repo: GitRepo,
    plan: PlanShape,
    captured: CaptureResult,
    settings: SnapshotSettings,
    started_ns: int,
) -> PlanScan | None:
    """The plan's scan, or ``None`` when it cannot be reused under the lock (the restore then
    captures again): a submodule in the plan, a touched path that is not as the capture found
    it (present where the plan adds a file; a suspect whose content differs)."""
    if plan.submodules or captured.tree != plan.current_tree:
        return None
    root = os.fsencode(repo.root)
    found = {c.path: c.old for c in plan.changes}
    stamps: dict[str, Stamp | None] = {}
    suspects: list[str] = []
    limit = started_ns - SUSPECT_MARGIN_NS
    for path in _touched(plan):
        now = stamps[path] = _lstat(root, path)
        before = found.get(path)
        if path in found and before is None:  # the plan adds it: nothing may be there
            if now is not None and not stat.S_ISDIR(now.mode):
                return None
            continue
        if before is None or now is None:
            if before is not None:  # the capture held it, it is gone now
                return None
            continue  # a directory the plan replaces
        if stat.S_ISDIR(now.mode) or before.mode == FileMode.COMMIT:
            return None
        if now.ctime_ns >= limit:
            suspects.append(path)
    if suspects and not _same_content(repo, suspects, found):
        return None
    return PlanScan(captured, settings, stamps)


def _same_content(
    repo: GitRepo,
    paths: list[str],
    found: Mapping[str, Entry | None],
) -> bool:
    """Each suspect holds what the capture recorded (hashed as a capture hashes it: in-process
    when no attribute or filter can apply, :func:`~ledger.git.restore.direct_write.
    conversion_free`; else through git's clean filters)."""
    filemode = repo.config_bool("core.filemode", True)
    if conversion_free(repo, paths) is None:
        return all(_same_bytes(repo, path, found.get(path), filemode) for path in paths)
    try:
        entries = current_entries(
            GitRunner(repo.root, repo.git_dir),
            repo.pygit2,
            str(repo.root),
            paths,
            filemode=filemode,
            config=PRIVATE_CONFIG,
        )
    except (LazyUnsupported, OSError):
        return False
    for path in paths:
        entry, before = entries.get(path), found.get(path)
        if entry is None or before is None:
            return False
        mode, oid = entry
        if mode != before.mode or str(oid) != before.oid:
            return False
    return True


def _same_bytes(repo: GitRepo, path: str, before: Entry | None, filemode: bool) -> bool:
    """One suspect, hashed in-process as ``git add`` would record it (no conversion applies)."""
    if before is None:
        return False
    name = os.fsencode(repo.root) + b"/" + os.fsencode(path)
    try:
        st = os.lstat(name)
        if stat.S_ISLNK(st.st_mode):
            return before.mode == FileMode.LINK and blob_id(os.readlink(name)) == before.oid
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    executable = filemode and bool(st.st_mode & 0o100)
    mode = FileMode.BLOB_EXECUTABLE if executable else FileMode.BLOB
    data = read_file(repo.root, path)  # O_NOFOLLOW: a file turned link meanwhile is no match
    return mode == before.mode and data is not None and blob_id(data) == before.oid


def still_current(repo: GitRepo, scan: PlanScan) -> bool:
    """Under the lock: every path the plan touches is as :func:`stamp_plan` found it."""
    root = os.fsencode(repo.root)
    return all(_lstat(root, path) == before for path, before in scan.stamps.items())


__all__ = [
    "SUSPECT_MARGIN_NS",
    "PlanScan",
    "PlanShape",
    "Stamp",
    "scan_clock_ns",
    "stamp_plan",
    "still_current",
]
