"""rewind's private directory in a git directory, ``<git-dir>/pi-rewind/``, and the right to
serve a repository (docs/design.md#isolation-from-the-users-git-state).

Why it exists: every part of rewind that keeps a file beside a repository (the capture index,
restore journals, the registry of live sessions, the turn gate, the watcher's sockets and lock,
the store's usage cache) keeps it here, the only directory of ``.git`` whose files we write; and
the watcher's sockets can only be trusted in a directory nobody else may write.

Invariants: the directory is made 0700 whatever the umask says; a symlinked, foreign or
group/other-writable one is refused for sockets (:func:`unsafe_private_dir`); one ``rewind serve``
per repository holds ``serve.lock`` (:class:`ServeLock`), released by the kernel when it dies.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from pathlib import Path

PRIVATE_DIR_NAME = "pi-rewind"


def private_dir(git_dir: Path) -> Path:
    """``<git-dir>/pi-rewind``: the only directory of ``.git`` whose files we write."""
    return Path(git_dir) / PRIVATE_DIR_NAME


def make_private_dir(git_dir: Path, sub: str | None = None) -> Path:
    """Create the private dir (and ``sub`` in it) if missing, mode 0700 whatever the umask
    says: only a directory nobody else may write can hold our sockets
    (:func:`unsafe_private_dir`), and its files are nobody else's business."""
    directory = private_dir(git_dir)
    directory.mkdir(mode=0o700, exist_ok=True)
    if sub is not None:
        directory = directory / sub
        directory.mkdir(mode=0o700, exist_ok=True)
    return directory


# --- the serving process's lock and sockets ------------------------------------------------------
#
# Only this user may hold them: they live in the private dir, which must be this user's, a real
# directory (not a symlink) and writable by nobody else, so no other user can create, replace or
# remove an entry in it (a Linux abstract socket name, which the service used before, could be
# taken first by any local user, who then kept the watcher from starting). Whoever may write the
# git dir itself can already run code as the user through hooks: git's own trust model.

SERVE_LOCK_NAME = "serve.lock"


def unsafe_private_dir(git_dir: Path, *, create: bool = True) -> str | None:
    """Why the private dir of ``git_dir`` cannot hold sockets only this user can use, or ``None``
    when it can. ``create``: make it first (mode 0700) when it does not exist."""
    directory = private_dir(git_dir)
    if create:
        with contextlib.suppress(FileExistsError, FileNotFoundError):
            directory.mkdir(mode=0o700)  # a missing git dir is reported by the lstat below
    try:
        info = os.lstat(directory)
    except OSError as exc:
        return f"cannot use {directory}: {exc.strerror or exc}"
    if stat.S_ISLNK(info.st_mode):
        return f"{directory} is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return f"{directory} is not a directory"
    if info.st_uid != os.getuid():
        return f"{directory} belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"{directory} may be written by other users (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


class ServeLock:
    """The right to serve one repository (its snapshots and hosted sessions): an ``flock`` on
    ``<git-dir>/pi-rewind/serve.lock``, held for the serving process's lifetime and released by
    the kernel when it dies. Only its holder may replace a socket left by a killed server. The
    holder writes its pid into the file, so that a refused server can name it.

    Check :func:`unsafe_private_dir` first: in a directory others may write, the file could be
    theirs (they would hold the lock)."""

    def __init__(self, git_dir: Path) -> None:
        self.path = private_dir(git_dir) / SERVE_LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> int | None:
        """Take it: ``None`` when taken, else the pid of the process that holds it (0 when it
        cannot be told). Raises :class:`OSError` when the file cannot be opened."""
        # O_CLOEXEC: a child (git) outliving us must not keep the lock. O_NOFOLLOW: a symlink
        # planted in the directory is not followed (the directory check makes that impossible
        # for other users; this is for a stale or mistaken one).
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(self.path, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            try:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                return _lock_holder(fd)
            finally:
                os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"%d\n" % os.getpid(), 0)
        self._fd = fd
        return None

    def release(self) -> None:
        """Give it up (the file stays: removing it could let two processes hold two locks)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


def serving_pid(git_dir: Path) -> int | None:
    """The pid of the process that serves the repository of ``git_dir`` (holds its serve lock;
    0 when it cannot be told), or ``None`` when nobody does. Read-only: a shared, non-blocking
    probe on the lock file, never created here."""
    path = private_dir(git_dir) / SERVE_LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return _lock_holder(fd)
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _lock_holder(fd: int) -> int:
    """The pid written by the holder of the flock on ``fd``'s file; when it has not written it yet
    (or names a process that is gone), the one the kernel lists in ``/proc/locks``; else 0."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode("ascii").strip() or "0")
        if pid > 0 and os.path.exists(f"/proc/{pid}"):
            return pid
    from ledger.facilities import facilities

    if not facilities().process_table:
        return 0
    with contextlib.suppress(OSError, ValueError):
        inode = str(os.fstat(fd).st_ino)
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            for line in locks:  # "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF"; waiters: "->"
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].split(":")[-1] == inode:
                    return int(fields[4])
    return 0


__all__ = [
    "PRIVATE_DIR_NAME",
    "SERVE_LOCK_NAME",
    "ServeLock",
    "make_private_dir",
    "private_dir",
    "serving_pid",
    "unsafe_private_dir",
]
