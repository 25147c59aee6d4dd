"""Unix sockets only this user can reach or hold: the primitives both local services share.

Why it exists: the snapshot service (:mod:`ledger.bridge.snapshot_socket`) and hosted Pi
sessions (:mod:`ledger.bridge.hosted`) each listen on a socket file in our private dir of the git
dir. What makes that safe, and what keeps a bad or idle client from costing a thread or holding
anyone up, is the same for both, so it lives here once.

Invariants:
- A socket lives in a directory that is this user's and writable by nobody else
  (:func:`ledger.git.private.unsafe_private_dir` checks it before listening); it is created 0600
  and replaced only by the holder of the repository's serve lock. A client checks the directory
  and the socket before it connects (:func:`connect_private`) and the server's uid after; a
  server checks the client's uid before it reads (:class:`LineGate`).
- A path longer than ``sun_path`` holds (:data:`PATH_MAX`) is reached through the directory's
  descriptor (``/proc/self/fd/N/<name>``, :func:`address`).
- A first line is bounded in size and time, each byte scanned once; a flood of idle connections
  costs no thread and keeps nobody out (:class:`LineGate`).
- Standard library only: the snapshot client runs on the one-shot CLI's start-up path, before
  pygit2 would be imported.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import selectors
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

PATH_MAX = 107
"""Longest socket path used as such: ``sun_path`` holds 108 bytes, one kept for the final NUL."""


def fits(path: Path) -> bool:
    """Whether ``path`` is short enough to be a Unix socket's address (:data:`PATH_MAX`)."""
    return len(os.fsencode(path)) <= PATH_MAX


def open_dir(directory: Path) -> int:
    """A descriptor of ``directory`` itself (not of what a symlink there points to), to check
    and reach a socket in it: :func:`address`. Raises :class:`OSError`."""
    return os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def address(path: Path, folder: int) -> bytes:
    """The address of the socket ``path`` whose directory is open as ``folder``: the path, or,
    when it is too long for ``sun_path``, the same file through the descriptor."""
    if fits(path):
        return os.fsencode(path)
    return b"/proc/self/fd/%d/%s" % (folder, os.fsencode(path.name))


def connect_private(path: Path, timeout_s: float) -> socket.socket | str:
    """A connection to the socket ``path`` of this user's server, or why not: ``"absent"`` (no
    socket, or nobody listens) or another reason (not this user's).

    Checked before connecting: the socket is this user's, in a directory of this user's that
    nobody else may write (where it could be swapped between the check and the connect);
    after: the listening process is this user's (``SO_PEERCRED``), so a request is never told
    to, nor an answer believed from, another user."""
    uid = os.getuid()
    try:
        folder = open_dir(path.parent)
    except OSError:
        return "absent"
    try:
        info = os.fstat(folder)
        if info.st_uid != uid or info.st_mode & 0o022:
            return "unsafe directory"
        try:
            sock = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return "absent"
        if not stat.S_ISSOCK(sock.st_mode) or sock.st_uid != uid:
            return "another user"
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(timeout_s)
            conn.connect(address(path, folder))
            if peer_uid(conn) == uid:
                return conn
            why = "another user"
        except OSError:
            why = "absent"
        conn.close()
        return why
    finally:
        os.close(folder)


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (Linux ``SO_PEERCRED``)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def peer_pid(conn: socket.socket) -> int | None:
    """The pid of the process at the other end of a Unix socket (Linux ``SO_PEERCRED``), as of
    its ``connect``; ``None`` when it cannot be asked."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    pid = int(struct.unpack("3i", creds)[0])
    return pid if pid > 0 else None


def read_line(conn: socket.socket, limit: int) -> bytes | None:
    """One line without its newline; ``None`` at end of input or past ``limit`` bytes. Each
    received byte is scanned once (only the new chunk is searched for the newline)."""
    data = bytearray()
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        end = chunk.find(b"\n")
        if end >= 0:
            data += chunk[:end]
            return bytes(data) if len(data) <= limit else None
        data += chunk
        if len(data) > limit:
            return None


def listen_private(path: Path, backlog: int = 64) -> socket.socket:
    """A listening socket at ``path`` (mode 0600; any length, :func:`address`), replacing
    whatever socket was there: only for the holder of the serve lock, in a private dir checked
    by :func:`ledger.git.private.unsafe_private_dir`. Raises :class:`OSError`."""
    folder = open_dir(path.parent)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=folder)  # a killed server's: we hold the lock
        listener.bind(address(path, folder))
        # Not via the umask, which is the whole process's (a git started meanwhile by another
        # thread would create private files). Until the chmod, the directory's mode and the
        # peer check keep others out.
        os.chmod(path.name, 0o600, dir_fd=folder)
        listener.listen(backlog)
    except OSError:
        listener.close()
        raise
    finally:
        os.close(folder)
    return listener


def send_decline(conn: socket.socket, why: str) -> None:
    """Answer ``{"ok": false, "why": …}`` if it fits in the socket's buffer now (never waits)."""
    with contextlib.suppress(OSError):
        conn.setblocking(False)
        conn.send(json.dumps({"ok": False, "why": why}).encode() + b"\n")


class _Pending:
    __slots__ = ("data", "deadline")

    def __init__(self, deadline: float) -> None:
        self.data = bytearray()
        self.deadline = deadline


class LineGate:
    """Accepts the connections of one listener and reads the first line of each, for all of them
    on the calling thread: a connection costs no thread before its line is complete.

    Bounds: the line's size (``limit`` bytes, checked as it grows; each byte scanned once), the
    time to send it (``timeout_s``), and the connections waiting (``max_pending``: beyond, the
    oldest is declined ``busy``, so a flood of idle connections keeps out neither a prompt
    client nor the next one). Another user's connection is declined before anything is read.
    A declined connection gets ``{"ok": false, "why": …}`` and is closed; ``count`` hears why.
    A complete line is handed to ``on_line`` (``None``: the client left without one), blocking,
    with the connection, which it then owns; an exception there ends that connection only."""

    def __init__(
        self,
        listener: socket.socket,
        closed: threading.Event,
        *,
        noun: str,
        limit: int,
        timeout_s: float,
        max_pending: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._listener = listener
        self._closed = closed
        self._noun = noun
        self._limit = limit
        self._timeout_s = timeout_s
        self._max_pending = max_pending
        self._clock = clock
        self._pending: dict[socket.socket, _Pending] = {}  # in arrival order: oldest first
        self._selector = selectors.DefaultSelector()

    def run(
        self,
        on_line: Callable[[socket.socket, bytes | None], None],
        count: Callable[[str], None],
    ) -> None:
        """Until ``closed`` is set or the listener is shut down."""
        self._count = count
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ)
        try:
            while not self._closed.is_set():
                wait = 0.5
                if self._pending:
                    first = next(iter(self._pending.values()))
                    wait = max(0.0, min(wait, first.deadline - self._clock()))
                events = self._selector.select(wait)
                now = self._clock()
                ready: set[socket.socket] = set()
                for key, _ in events:
                    if key.fileobj is not self._listener:
                        ready.add(key.fileobj)  # type: ignore[arg-type]
                    elif not self._accept():
                        return
                for conn in ready:
                    if conn in self._pending:
                        self._read(conn, on_line)
                # Expired: not readable when the select returned (one whose line came while
                # we were busy answering another is read first, not declined).
                for conn, pending in list(self._pending.items()):
                    if pending.deadline > now:
                        break
                    if conn not in ready:
                        self._decline(conn, f"slow {self._noun}")
        finally:
            for conn in self._pending:
                conn.close()
            self._pending.clear()
            self._selector.close()

    def _accept(self) -> bool:
        """Accept every waiting connection; ``False`` when the listener is closed."""
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as exc:
                if self._closed.is_set() or exc.errno in (errno.EBADF, errno.EINVAL):
                    return False
                time.sleep(0.05)  # out of descriptors or memory: accept later, no busy loop
                return True
            conn.setblocking(False)
            try:
                uid = peer_uid(conn)
            except OSError:
                conn.close()
                continue
            if uid != os.getuid():
                self._count("another user")
                send_decline(conn, "another user")
                conn.close()
                continue
            if len(self._pending) >= self._max_pending:
                self._decline(next(iter(self._pending)), "busy")
            self._pending[conn] = _Pending(self._clock() + self._timeout_s)
            self._selector.register(conn, selectors.EVENT_READ)

    def _read(
        self, conn: socket.socket, on_line: Callable[[socket.socket, bytes | None], None]
    ) -> None:
        try:
            chunk = conn.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._decline(conn, f"broken {self._noun}")
            return
        pending = self._pending[conn]
        end = chunk.find(b"\n")
        if chunk and end < 0:
            pending.data += chunk
            if len(pending.data) > self._limit:
                self._decline(conn, f"{self._noun} too long")
            return
        line = bytes(pending.data) + chunk[:end] if chunk else None  # None: left without one
        if line is not None and len(line) > self._limit:
            self._decline(conn, f"{self._noun} too long")
            return
        self._forget(conn)
        try:
            conn.setblocking(True)
            on_line(conn, line)
        except Exception as exc:  # one connection's failure never ends the gate
            self._count(type(exc).__name__)
            conn.close()

    def _decline(self, conn: socket.socket, why: str) -> None:
        self._forget(conn)
        self._count(why)
        send_decline(conn, why)
        conn.close()

    def _forget(self, conn: socket.socket) -> None:
        self._pending.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)


__all__ = [
    "PATH_MAX",
    "LineGate",
    "address",
    "connect_private",
    "fits",
    "listen_private",
    "open_dir",
    "peer_pid",
    "peer_uid",
    "read_line",
    "send_decline",
]
