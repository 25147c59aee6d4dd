"""Whether the owner of a lock or a file is alive: ``flock`` probes and process identities
(docs/design.md#disk-upkeep, docs/design.md#sessions-here).

Why it exists: rewind removes what a killed process left (a ref lock, a registry entry, a
journal's verdict) and must never remove what a *live* process still uses, however long it has
been stopped (``SIGSTOP``, a suspended laptop, a stalled disk). Age proves nothing. Two things
do, and every removal in rewind asks one of them through this module:

- **an ``flock`` held for the file's whole life**: the kernel drops it when the holder dies,
  also on ``kill -9``, and a reused pid cannot hold it. :func:`take_lock` takes one,
  :func:`lock_held` probes it (a non-blocking shared ``flock`` on a new descriptor);
- **an identity** (:class:`Owner`: pid, the process's start time, the boot id, the host),
  checked against the process table: alive while that pid on this host and boot has that start
  time. It decides only where no ``flock`` can tell (a file system without it), or to name the
  holder in a message.

Invariants: nothing here writes anything but the lock file :func:`take_lock` creates; a probe
never raises; "cannot tell" is its own answer (``None``), never "gone": a caller removes a file
only on a definite "gone". Lower than every subsystem (the basics layer): the store's ref lock,
the restore journal and the session registry all use it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import re
import stat
import time
from pathlib import Path

from ledger.plain import FrozenPlain


def take_lock(path: Path) -> int | None:
    """Create ``path`` and hold an exclusive ``flock`` on it; ``None`` where the file system has
    no ``flock`` (the owner's identity is then the proof). ``O_CLOEXEC``: a git child that
    outlives a killed owner must not keep the lock (and so the owner) alive. A remover that
    judged the new file abandoned between its creation and its ``flock`` (it holds no lock yet)
    removed the name: the lock is then on no name, so the file is created again."""
    for _attempt in range(5):
        fd = _create_and_lock(path)
        if fd is None or same_file(fd, path):
            return fd
        os.close(fd)  # locked a file a remover already unlinked: take the name again
    raise OSError(errno.EAGAIN, "the lock file kept being removed", str(path))


def _create_and_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + 0.05
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            # A new file: only a probe (a moment's shared lock) or a remover judging it
            # abandoned (:func:`remove_if_unlocked`) can hold it; wait that moment out.
            busy = exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
            if not busy or time.monotonic() >= deadline:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(path)
                return None
            time.sleep(0.001)


def remove_if_unlocked(path: Path) -> bool:
    """Remove the lock file ``path`` if nobody holds its ``flock``: judged on a descriptor that
    holds the exclusive ``flock`` itself while the name is removed, and by name only if the name
    is still that file. An owner that created the file but had not locked it yet then finds its
    name gone (:func:`same_file`) and takes a new one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not stat.S_ISREG(os.fstat(fd).st_mode) or not same_file(fd, path):
            return False
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def lock_held(path: Path) -> bool | None:
    """Whether some process holds ``path``'s lock; ``None`` when this cannot be told (no
    ``flock`` here, no permission), so that the identity decides."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return False  # closed, or never made: nobody holds it
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # released by the close below
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        return None
    finally:
        os.close(fd)
    return False


def same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` is (still) the file open on ``fd``: what a lock's owner checks right
    before it renames or removes the lock by name, so that it never acts on another's."""
    try:
        mine, there = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def _read_small(path: str, limit: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, limit)  # one bounded read: /proc files are produced whole
    except OSError:
        return None
    finally:
        os.close(fd)


def proc_start(pid: int) -> int | None:
    """Process ``pid``'s start time: ``/proc/<pid>/stat`` field 22; ``None`` if it is gone (or
    there is no ``/proc``: :mod:`ledger.facilities`)."""
    if not process_table():
        return None
    raw = _read_small(f"/proc/{pid}/stat", 4096)
    if raw is None:
        return None
    # Field 2 is the command in parentheses and may hold spaces and ')': split after the last.
    rest = raw.rpartition(b")")[2].split()
    try:
        return int(rest[22 - 3])
    except (IndexError, ValueError):
        return None


def boot_id() -> str | None:
    if not process_table():
        return None
    raw = _read_small("/proc/sys/kernel/random/boot_id", 128)
    if not raw:
        return None
    return raw.decode("ascii", "replace").strip() or None


def process_table() -> bool:
    from ledger.facilities import facilities

    return facilities().process_table


def pid_exists(pid: int) -> bool | None:
    """``False`` only when no process has ``pid`` (``kill(pid, 0)``: ``ESRCH``); ``None`` when
    one has it (perhaps another, reusing the pid) or this cannot be told."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return None
    return None


_TOKEN = re.compile(r"[^\x21-\x7e]")


class Owner(FrozenPlain):
    """Who made a file: enough to tell, later and from another process, whether it still runs.
    Not a dataclass: created before a spawned bridge's first answer (ledger/plain.py)."""

    __slots__ = ("boot", "host", "pid", "start")
    pid: int
    start: int | None
    """``/proc/<pid>/stat`` field 22 (clock ticks after boot); ``None`` without a process table."""
    boot: str | None
    host: str

    def __init__(self, pid: int, start: int | None, boot: str | None, host: str) -> None:
        self._init(pid=pid, start=start, boot=boot, host=host)

    @staticmethod
    def current() -> Owner:
        return _current(os.getpid())  # per pid: a forked child is another owner

    def alive(self) -> bool | None:
        """``True``: that process runs; ``False``: provably gone; ``None``: cannot be told (another
        host, or no process table and the pid is taken). A reused pid has another start time, a
        process of an earlier boot is gone."""
        if self.pid <= 0:
            return False
        if (_TOKEN.sub("_", self.host) or "-") != _host():
            return None  # another machine's pids mean nothing here
        here = boot_id()
        if here is not None and self.boot is not None:
            if self.boot != here:
                return False
            if self.start is not None:
                return proc_start(self.pid) == self.start
        return pid_exists(self.pid)

    def to_fields(self) -> str:
        """``pid=… start=… boot=… host=…`` (no value holds a space)."""
        host = _TOKEN.sub("_", self.host) or "-"  # as _host() spells it
        boot = _TOKEN.sub("_", self.boot) if self.boot else "-"
        start = str(self.start) if self.start is not None else "-"
        return f"pid={self.pid} start={start} boot={boot} host={host}"

    @staticmethod
    def from_fields(fields: dict[str, str]) -> Owner | None:
        """The owner :meth:`to_fields` wrote, from its ``key=value`` pairs; ``None`` if it is not
        one."""
        try:
            pid = int(fields["pid"])
            start = None if fields["start"] == "-" else int(fields["start"])
            boot = None if fields["boot"] == "-" else fields["boot"]
            host = fields["host"]
        except (KeyError, ValueError):
            return None
        return Owner(pid, start, boot, host)


@functools.cache
def _current(pid: int) -> Owner:
    return Owner(pid, proc_start(pid), boot_id(), _host())


def _host() -> str:
    return _TOKEN.sub("_", host_name()) or "-"


def host_name() -> str:
    """``socket.gethostname()`` without importing ``socket`` (~5 ms of a spawned bridge's start,
    issue 34): on Linux and macOS both read the kernel's node name (glibc's ``gethostname`` is
    ``uname``'s ``nodename``); a unit test holds the two equal, as identities written by other
    processes (journals, the turn gate) are compared with ``socket.gethostname()``."""
    return os.uname().nodename


def parse_fields(text: str) -> dict[str, str]:
    """``key=value`` words of one line."""
    pairs = (word.partition("=") for word in text.split())
    return {key: value for key, sep, value in pairs if sep}


__all__ = [
    "Owner",
    "boot_id",
    "host_name",
    "lock_held",
    "parse_fields",
    "pid_exists",
    "proc_start",
    "process_table",
    "remove_if_unlocked",
    "same_file",
    "take_lock",
]
