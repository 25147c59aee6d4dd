"""The one symlink-safe walk into the work tree: a directory opened component by component with
``O_NOFOLLOW``, relative to its parent's descriptor (docs/design.md#restore).

Why it exists: a restore writes and deletes files under the work tree root, and a component of a
path may have become a symlink (to ``/etc``, to ``~``, into ``.git``) since it was checked. Every
write, rename and delete of a restore therefore goes through a descriptor of the parent directory
reached this way: a symlink anywhere on the path stops the walk instead of being followed. File
placement (:mod:`ledger.git.restore.placement`: writes, renames, removal of staged trees) and the
restore's deletes (:class:`ledger.git.restore.safety.SafeFs`) both use :func:`open_dir`.

Invariants: never follows a symlink (``O_NOFOLLOW`` on every component, ``O_DIRECTORY``);
descriptors are ``O_CLOEXEC`` and closed on every path out, the one returned is the caller's to
close; creates directories only when asked (mode 0777 before the umask, as git does).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Sequence

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class NotADirectoryOnPath(OSError):
    """A component of the path is a symlink or not a directory (``ELOOP``/``ENOTDIR``); the
    caller words it (its messages are pinned by tests)."""

    def __init__(self, err: int, part: bytes) -> None:
        super().__init__(err, os.strerror(err))
        self.part = part


def open_dir(
    root: bytes | str, parts: Sequence[bytes], *, create: bool = False, missing_ok: bool = False
) -> int | None:
    """A descriptor of ``root/parts[0]/…/parts[-1]`` (``root`` itself for no parts), each
    component opened with ``O_NOFOLLOW`` relative to the one before. A missing component is
    created (``create``), or gives ``None`` (``missing_ok``), or raises ``FileNotFoundError``;
    a symlink or non-directory component raises :class:`NotADirectoryOnPath`."""
    fd = os.open(root, DIR_FLAGS)
    try:
        for part in parts:
            try:
                nfd = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                    nfd = _open_part(part, fd)
                elif missing_ok:
                    os.close(fd)
                    return None
                else:
                    raise
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotADirectoryOnPath(exc.errno, part) from None
                raise
            os.close(fd)
            fd = nfd
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd


class DirStack:
    """Descriptors of ``root/parts[0]/…`` kept along the last path opened, for a run of paths
    that share leading directories (a sorted list): each :meth:`open` opens only the components
    it does not share with the one before, each with ``O_NOFOLLOW`` relative to its parent, as
    :func:`open_dir` does. At most one descriptor per level is held.

    Only for a directory tree this process made and no one else writes (a restore's staging
    directory, created fresh with mode 0700): a kept descriptor stays on its directory wherever
    that is moved, where :func:`open_dir` walks from the root again for every path."""

    def __init__(self, root: bytes | str) -> None:
        self._root = os.open(root, DIR_FLAGS)
        self._parts: list[bytes] = []
        self._fds: list[int] = []

    def open(self, parts: Sequence[bytes], *, create: bool = False) -> int:
        """The descriptor of ``root/parts…``; this object's, valid until the next call."""
        shared = 0
        limit = min(len(parts), len(self._parts))
        while shared < limit and self._parts[shared] == parts[shared]:
            shared += 1
        self._drop(shared)
        fd = self._fds[-1] if self._fds else self._root
        for part in parts[shared:]:
            try:
                fd = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                fd = _open_part(part, fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotADirectoryOnPath(exc.errno, part) from None
                raise
            self._fds.append(fd)
            self._parts.append(part)
        return fd

    def _drop(self, keep: int) -> None:
        while len(self._fds) > keep:
            self._parts.pop()
            with contextlib.suppress(OSError):
                os.close(self._fds.pop())

    def close(self) -> None:
        self._drop(0)
        with contextlib.suppress(OSError):
            os.close(self._root)

    def __enter__(self) -> DirStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open_part(part: bytes, parent_fd: int) -> int:
    try:
        return os.open(part, DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise NotADirectoryOnPath(exc.errno, part) from None
        raise


__all__ = ["DIR_FLAGS", "DirStack", "NotADirectoryOnPath", "open_dir"]
