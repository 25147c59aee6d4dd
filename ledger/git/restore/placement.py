"""Writing a restore's files so that each is always whole: staged beside, then renamed into place.

Why it exists: ``git checkout-index -f`` unlinks a file and writes the new one in place, so a
restore killed (or out of disk) in the middle of a write left truncated files: 285 of 300 in the
fault campaign. Here git writes every new file into a staging directory inside the work tree
(``<root>/.pi-rewind-staging-<id>/``, same file system, so a rename is atomic), and each file is
then renamed over its destination (files written in-process are staged flat, one name each,
:func:`ledger.git.restore.direct_write.write_staged`, and renamed the same way). At every
moment a path holds its old version or its new one, never a part of either
(docs/design.md#crash-safe-restore).

Invariants:
- Renames and directory creation go through descriptors opened with ``O_NOFOLLOW``: nothing is
  created, replaced or removed through a symlink, and nothing outside the root is touched.
- The staging directory is created fresh (``mkdir`` fails if it exists) and removed at the end;
  if the process dies, the open restore journal names it and the recovery removes it.
- A destination on another file system inside the work tree (a mount point) gets a copy written
  beside it and renamed, which keeps the same guarantee.
- :func:`free_space_problem` is checked before the restore starts: the staged bytes must fit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

from ledger.git.restore.nofollow import DIR_FLAGS, DirStack, NotADirectoryOnPath, open_dir
from ledger.git.runner import GitRunner, nul_join
from ledger.quoting import display_name

SPACE_MARGIN_BYTES = 4 << 20
"""Free space kept in hand beyond the bytes a restore stages (metadata, filters' growth)."""


class PlacementError(OSError):
    """A path could not be placed safely (a symlink or a file where a directory must be)."""


def free_space_problem(root: Path, needed: int) -> tuple[int, int] | None:
    """``(needed, available)`` when the file system of ``root`` cannot take ``needed`` bytes
    (plus a margin), else None."""
    try:
        st = os.statvfs(root)
    except OSError:
        return None
    available = st.f_bavail * st.f_frsize
    total = needed + SPACE_MARGIN_BYTES + needed // 100
    return (total, available) if available < total else None


class Placer:
    """Writes ``(path, mode, blob)`` entries of a throw-away index into the work tree."""

    def __init__(self, root: Path, git: GitRunner, staging: str) -> None:
        self.root = os.fsencode(os.fspath(root))
        self.git = git
        self.staging = staging

    # --- staging ------------------------------------------------------------------------

    def create_staging(self) -> None:
        os.mkdir(self.root + b"/" + os.fsencode(self.staging), 0o700)

    def remove_staging(self) -> None:
        remove_tree(self.root, self.staging)

    def write(
        self, paths: Sequence[str], *, index: Path, config: Sequence[tuple[str, str]]
    ) -> None:
        """Stage ``paths`` (git's own checkout: attributes, filters, modes, symlinks), then
        rename each into place."""
        if not paths:
            return
        self.git.run(
            ["checkout-index", "-f", f"--prefix={self.staging}/", "-z", "--stdin"],
            input=nul_join(paths),
            index=index,
            config=config,
            operation="git checkout-index (restore)",
        )
        self.place_all(paths)

    # --- one path -----------------------------------------------------------------------

    def place_all(self, paths: Sequence[str], sources: Sequence[str] | None = None) -> None:
        """Rename each staged path into place, in order. ``sources``: where each was staged
        under the staging directory (the in-process writes' flat names,
        :func:`~ledger.git.restore.direct_write.write_staged`); default: its own path there, as
        git's checkout stages it. The staging side's descriptors are kept from one path to the
        next (:class:`~ledger.git.restore.nofollow.DirStack`: our own fresh directory); the work
        tree's side is walked from the root for every path, so that a directory replaced by a
        symlink meanwhile is refused, never followed."""
        with DirStack(self.root) as staged:
            for i, path in enumerate(paths):
                self.place(path, staged, None if sources is None else sources[i])

    def place(self, path: str, staged: DirStack | None = None, source: str | None = None) -> None:
        parts = os.fsencode(path).split(b"/")
        src = os.fsencode(path if source is None else source).split(b"/")
        staging = [os.fsencode(self.staging), *src[:-1]]
        if staged is not None:
            src_fd = self._kept_dir(staged, staging)
        else:
            src_fd = self._open_dir(staging, create=False)
        try:
            dst_fd = self._open_dir(parts[:-1], create=True)
            try:
                try:
                    os.rename(src[-1], parts[-1], src_dir_fd=src_fd, dst_dir_fd=dst_fd)
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
                    _copy_then_rename(src_fd, dst_fd, src[-1], parts[-1])
            finally:
                os.close(dst_fd)
        finally:
            if staged is None:
                os.close(src_fd)

    @staticmethod
    def _kept_dir(staged: DirStack, parts: Sequence[bytes]) -> int:
        try:
            return staged.open(parts)
        except NotADirectoryOnPath as exc:
            raise PlacementError(
                exc.errno, f"{display_name(exc.part)} is not a directory (symlink?)"
            ) from None

    def _open_dir(self, parts: Sequence[bytes], *, create: bool) -> int:
        try:
            fd = open_dir(self.root, parts, create=create)
        except NotADirectoryOnPath as exc:
            raise PlacementError(
                exc.errno, f"{display_name(exc.part)} is not a directory (symlink?)"
            ) from None
        assert fd is not None  # only missing_ok gives None
        return fd


def _copy_then_rename(src_fd: int, dst_fd: int, source: bytes, name: bytes) -> None:
    """Across file systems: a copy beside the destination, then an atomic rename."""
    tmp = b"." + name + b".pi-rewind-tmp"
    st = os.lstat(source, dir_fd=src_fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dst_fd)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(source, dir_fd=src_fd), tmp, dir_fd=dst_fd)
    else:
        src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_fd)
        try:
            dst = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                stat.S_IMODE(st.st_mode),
                dir_fd=dst_fd,
            )
            try:
                with (
                    os.fdopen(src, "rb", closefd=False) as reader,
                    os.fdopen(dst, "wb", closefd=False) as writer,
                ):
                    shutil.copyfileobj(reader, writer, 1 << 20)
            finally:
                os.close(dst)
        finally:
            os.close(src)
    os.rename(tmp, name, src_dir_fd=dst_fd, dst_dir_fd=dst_fd)
    os.unlink(source, dir_fd=src_fd)


def remove_tree(root: bytes | str | Path, rel: str) -> None:
    """Remove ``rel`` (a directory under ``root``) and everything in it, never following a
    symlink; a missing directory is fine."""
    base = os.fsencode(os.fspath(root))
    parts = os.fsencode(rel).split(b"/")
    try:
        fd = open_dir(base, parts[:-1], missing_ok=True)
    except NotADirectoryOnPath as exc:
        if exc.errno == errno.ENOTDIR:
            return  # a file where a directory was: nothing of the tree to remove
        raise OSError(exc.errno, exc.strerror) from None
    if fd is None:
        return
    try:
        _remove_at(fd, parts[-1])
    finally:
        os.close(fd)


def _remove_at(parent_fd: int, name: bytes) -> None:
    try:
        st = os.lstat(name, dir_fd=parent_fd)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent_fd)
        return
    fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    try:
        for child in os.listdir(fd):
            _remove_at(fd, os.fsencode(child))
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


__all__ = ["PlacementError", "Placer", "free_space_problem", "remove_tree"]
