"""Pi sessions hosted by the repository's watcher: the bridge without a process of its own.

Why it exists: every ``pi -p`` run starts a new Pi, and with it a new ``rewind serve --stdio``.
Even with its captures sent to the shared watcher (:mod:`ledger.bridge.delegate`) such a bridge
costs ~0.2 s to start (interpreter, imports) and ~45 ms of first use in a new interpreter per
run (docs/capture.md#hosted-sessions). A watcher that already runs has all of that warm, so it
also serves whole sessions: Pi's extension connects to ``<git-dir>/pi-rewind/bridge.sock``,
says hello, and then speaks the bridge protocol (:mod:`ledger.bridge.protocol`) on that
connection exactly as it would on a child's stdin/stdout. Each connection is served by its own
:class:`~ledger.bridge.server.BridgeServer` on its own thread, with its own engine and its own
:class:`~ledger.git.repo.GitRepo`; captures go straight to the watcher's change feed. The socket
itself is made and guarded by :mod:`ledger.bridge.private_socket`, as the snapshot service's is.

Invariants:
- Hosting never changes what a session records. The watcher hosts a session only for its own
  repository (work tree and git dir, resolved) and only when the extension's environment,
  restricted to what can change the bridge's behaviour (:func:`bridge_env`: git's variables,
  ours, Pi's, the locale, ``HOME``, ``PATH``…), equals its own: the engine then reads the same
  settings, runs the same git and finds the same agent dir as a bridge the extension would have
  started. In any other case the hello is declined and the extension starts its own bridge.
- Only this user: the socket lives in the git dir (whoever can write there can already run
  code as the user through hooks, the trust model of git's own fsmonitor socket), is created
  with mode 0600 inside a private dir that nobody else may write, and the server checks each
  client's uid with ``SO_PEERCRED`` before it reads the hello. The extension checks the
  socket's owner and its directory's mode before it connects.
- No connection ends or floods the watcher. Hellos are read by one thread for all connections
  (:class:`~ledger.bridge.private_socket.LineGate`, shared with the snapshot service): at most :data:`MAX_PENDING_HELLOS`
  waiting (the oldest is declined ``busy`` to make room), each bounded to :data:`MAX_HELLO`
  bytes and :data:`HELLO_TIMEOUT_S`; a session gets its own thread only once its hello is
  accepted, and at most :data:`MAX_SESSIONS` run at once. A bad hello (not JSON, nested too
  deep, not UTF-8, wrong types) is a counted decline with an answer; whatever a session thread
  raises ends that session only, counted, never as a traceback.
- The watcher does not end for being idle while a session is connected. When it is stopped,
  it stops accepting, removes the socket, ends each session between two events (the one in
  flight is finished, the next is not started; the extension then starts a bridge of its own),
  and waits for them.
- One listener per repository: started only by the process that holds the repository's serve
  lock (:class:`ledger.git.private.ServeLock`, taken by
  :class:`~ledger.bridge.snapshot_socket.SnapshotService`), so a stale socket file left by a
  crash is safely replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ledger.bridge.private_socket import (
    PATH_MAX,
    LineGate,
    fits,
    listen_private,
    peer_pid,
    send_decline,
)
from ledger.bridge.session_env import bridge_env
from ledger.git.private import private_dir, unsafe_private_dir

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.bridge.server import BridgeServer
    from ledger.git.locate import Located
    from ledger.retention.after_session import OwedSweep

HELLO_VERSION = 1
SOCKET_NAME = "bridge.sock"
MAX_HELLO = 1 << 16
"""A hello's size (the environment is a few KiB)."""
HELLO_TIMEOUT_S = 2.0
"""From connect to the hello's end (the extension sends it at once and waits 1 s for the answer)."""
MAX_PENDING_HELLOS = 16
MAX_SESSIONS = 64


def socket_path(git_dir: Path) -> Path:
    """Where the hosted sessions of the repository with this git dir are accepted."""
    return private_dir(git_dir) / SOCKET_NAME


class HostedSessions:
    """Accept Pi sessions on the repository's bridge socket and serve each on its own thread."""

    def __init__(
        self,
        root: Path,
        git_dir: Path,
        *,
        common_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.git_dir = Path(os.path.realpath(git_dir))
        self.path = socket_path(self.git_dir)
        self._located: Located | None = (
            (self.root, self.git_dir, Path(os.path.realpath(common_dir)))
            if common_dir is not None
            else None
        )
        """git's answer for the root, as this process's repository has it: a session whose
        cwd is the root opens its repository from it (the hello said the root and the git dir
        are these, and the environment ours, so git would answer the same)."""
        self.hosted = 0
        """Sessions accepted so far."""
        self.declined: dict[str, int] = {}
        self.commands: dict[str, int] = {}
        """One-shot commands asked for, by outcome (``served``, or why the client ran it)."""
        self.failed: dict[str, int] = {}
        """Hosted sessions ended by an unexpected error, by its type (never a traceback)."""
        self.refusal: str | None = None
        """Why :meth:`start` did not listen."""
        self.last_end = clock()
        self._env = bridge_env(os.environ if env is None else env)
        self._clock = clock
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._guard = threading.Lock()
        self._sessions: dict[threading.Thread, socket.socket] = {}
        self._servers: dict[threading.Thread, BridgeServer] = {}
        """The sessions past their hello, to stop between two events."""
        self._release: threading.Timer | None = None
        """A memory release due once one-shot commands stop coming (:meth:`_release_soon`)."""
        self._commands_running = 0

    # --- life -------------------------------------------------------------------------------

    def start(self) -> bool:
        """Listen (only while holding the repository's serve lock); ``False`` (nothing started,
        :attr:`refusal` says why) when the socket cannot be made safely here: a path too long
        for a Unix socket, a private dir others may write, no permission."""
        if not fits(self.path):  # Pi's extension connects by path
            self.refusal = f"the path {self.path} is longer than a Unix socket's ({PATH_MAX} bytes)"
            return False
        # Safety: a socket in a directory another user may write could be swapped for theirs
        # between the extension's check and its connect.
        self.refusal = unsafe_private_dir(self.git_dir)
        if self.refusal is not None:
            return False
        try:
            self._listener = listen_private(self.path)
        except OSError as exc:
            self.refusal = f"cannot listen on {self.path}: {exc.strerror or exc}"
            return False
        self._thread = threading.Thread(
            target=self._accept, name="rewind-hosted-accept", daemon=True
        )
        self._thread.start()
        return True

    def active(self) -> int:
        with self._guard:
            return len(self._sessions)

    def idle_s(self) -> float:
        """0 while a session is connected, else seconds since the last one ended."""
        if self.active():
            return 0.0
        return self._clock() - self.last_end

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop accepting, remove the socket, end each session between two events: the one in
        flight is finished (a restore and its records are never cut apart by us), the next is
        not started (the extension then starts a bridge of its own). A session that stays in
        one event past ``timeout_s`` (a menu left open) has its input cut: it sees the end of
        input at its next read, before that event changes anything after the menu."""
        self._closed.set()
        with self._guard:
            if self._release is not None:
                self._release.cancel()
                self._release = None
        if self._listener is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the gate's select now
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
        with self._guard:
            sessions, servers = dict(self._sessions), dict(self._servers)
        deadline = self._clock() + timeout_s
        for thread, conn in sessions.items():
            server = servers.get(thread)
            waited = server is not None and server.between_events.acquire(
                timeout=max(0.0, deadline - self._clock())
            )
            try:
                if waited:
                    assert server is not None
                    server.stop_between_events()
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RD)
            finally:
                if waited:
                    assert server is not None
                    server.between_events.release()
        for thread in sessions:
            thread.join(timeout=max(0.0, deadline - self._clock()))

    # --- connections ------------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._listener is not None
        gate = LineGate(
            self._listener,
            self._closed,
            noun="hello",
            limit=MAX_HELLO,
            timeout_s=HELLO_TIMEOUT_S,
            max_pending=MAX_PENDING_HELLOS,
            clock=self._clock,
        )
        gate.run(self._on_hello, self._count)

    def _count(self, why: str) -> None:
        with self._guard:
            self.declined[why] = self.declined.get(why, 0) + 1

    def _on_hello(self, conn: socket.socket, line: bytes | None) -> None:
        """On the gate's thread: host the session on a thread of its own, or decline it."""
        hello, why = ({}, "no hello") if not line else self._hello(line)
        thread = threading.Thread(
            target=self._session, args=(conn, hello), name="rewind-hosted-session", daemon=True
        )
        with self._guard:
            if why is None and len(self._sessions) >= MAX_SESSIONS:
                why = "busy"
            elif why is None and self._closed.is_set():
                why = "stopping"
            if why is None:
                self._sessions[thread] = conn
        if why is not None:
            self._count(why)
            send_decline(conn, why)
            conn.close()
            return
        thread.start()

    def _session(self, conn: socket.socket, hello: dict[str, object]) -> None:
        thread = threading.current_thread()
        hosted = False
        command = hello.get("op") == "command"
        try:
            if command:  # a one-shot command (ledger.cli.served)
                from ledger.bridge.served_commands import serve_command

                hosted = True  # activity for --idle-exit; its memory freed after it
                with self._guard:
                    self._commands_running += 1
                conn.sendall(b'{"ok": true}\n')
                outcome = serve_command(conn, hello)
                with self._guard:
                    self.commands[outcome] = self.commands.get(outcome, 0) + 1
                return
            with self._guard:
                self.hosted += 1
            hosted = True
            # `ahead`: events may be written before the one before is answered (README, "The
            # bridge protocol"); an older watcher says nothing, and is sent one at a time.
            conn.sendall(b'{"ok": true, "ahead": true}\n')
            owed = self._serve(conn)
            if owed is not None:
                # A pi -p session's shutdown sweep, run once Pi no longer waits: the connection
                # closed first. Still counted as a session, so that stopping the watcher waits
                # for it as for an event in flight (ledger/retention/after_session.py).
                with contextlib.suppress(OSError):
                    conn.close()
                owed.run()
        except (OSError, ValueError):
            pass  # the extension went away mid-write: nothing of ours is half-done
        except Exception as exc:  # never a traceback on the watcher's stderr: counted
            with self._guard:
                name = type(exc).__name__
                self.failed[name] = self.failed.get(name, 0) + 1
        finally:
            self._forget(thread, conn, hosted)
            if hosted and command:
                with self._guard:
                    self._commands_running -= 1
                self._release_soon()
            elif hosted:
                release_memory()

    def _release_soon(self) -> None:
        """Free what one-shot commands held once they stop coming for :data:`RELEASE_AFTER_S`.
        A full collection of a watcher that holds a 100k-file tree costs 30–70 ms with the GIL
        held: right after each command, the next one (``rewind restore && rewind status``) or a
        bridge's capture waited for it (~25 ms more for a ``rewind diff`` right after a restore).
        Deferred, it runs when nobody waits; never while a command runs."""
        with self._guard:
            if self._release is not None:
                self._release.cancel()
            if self._closed.is_set():
                self._release = None
                return
            timer = threading.Timer(RELEASE_AFTER_S, self._release_when_quiet)
            timer.daemon = True
            timer.name = "rewind-release-memory"
            self._release = timer
        timer.start()

    def _release_when_quiet(self) -> None:
        with self._guard:
            if self._release is not threading.current_thread() or self._closed.is_set():
                return  # another command came (and will release after itself), or stopping
            if self._commands_running:
                self._release = None  # the running command's own end schedules it again
                return
            self._release = None
        release_memory()

    def _hello(self, line: bytes) -> tuple[dict[str, object], str | None]:
        """The hello, and why it is not served (``None``: serve it); never raises. ``op``:
        ``bridge`` (a Pi session) or ``command`` (a one-shot command,
        :mod:`ledger.bridge.served_commands`), both under the same checks."""
        try:
            hello = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested too deep
            return {}, "unknown hello"
        if not isinstance(hello, dict) or hello.get("op") not in ("bridge", "command"):
            return {}, "unknown hello"
        if hello.get("v") != HELLO_VERSION:
            return hello, "another protocol version"
        if hello.get("root") != str(self.root) or hello.get("gitDir") != str(self.git_dir):
            return hello, "another repository"
        if hello.get("env") != self._env:
            return hello, "another environment"
        if hello["op"] == "command":
            from ledger.bridge.served_commands import refusal

            return hello, refusal(hello)
        return hello, None

    def _serve(self, conn: socket.socket) -> OwedSweep | None:
        """Serve one session on ``conn``; the shutdown sweep a print-mode session left owed."""
        from ledger.bridge.server import BridgeServer

        thread = threading.current_thread()
        with conn.makefile("rb") as reader, conn.makefile("wb") as writer:
            # The agent dir as a bridge the extension starts finds it: from the environment
            # (PI_CODING_AGENT_DIR, HOME), which equals ours (checked in the hello).
            # The extension connects from Pi's own process: its pid is the Pi the user sees.
            server = BridgeServer(reader, writer, kind="hosted", pi_pid=peer_pid(conn))
            # A pi -p run's sweeps wait until it is over: no startup sweep beside its captures
            # in this process, and none in the shutdown answer Pi waits for (issue 34).
            server.state.sweeps_after_session = True
            server.state.known_repo = self._located
            with self._guard:
                if self._closed.is_set():
                    return None  # stopping already: this session starts no event here
                self._servers[thread] = server
            server.serve()
            return server.state.owed_sweep

    def _forget(self, thread: threading.Thread, conn: socket.socket, hosted: bool) -> None:
        with contextlib.suppress(OSError):
            conn.close()
        with self._guard:
            self._sessions.pop(thread, None)
            self._servers.pop(thread, None)
            if hosted:  # a declined hello is no use, so it is not activity (--idle-exit)
                self.last_end = self._clock()


RELEASE_AFTER_S = 1.0
"""How long after the last one-shot command its memory is released (:meth:`HostedSessions.
_release_soon`): a script's next command comes sooner, a person's later."""


def release_memory() -> None:
    """After a hosted session ended: free what it held, and give the freed heap back.

    The session's engine, repository handle and parsed session hang together in reference
    cycles (host, engine, lineage reader), which CPython frees only at a collection, maybe many
    captures later; and what its thread freed stays in the process (RSS) until glibc is asked
    to return it (:func:`ledger.git.feed.inotify.trim_heap`). Once per session, after its
    last event: no prompt waits for it."""
    import gc

    from ledger.git.feed.inotify import trim_heap

    gc.collect()
    trim_heap()


__all__ = [
    "HELLO_TIMEOUT_S",
    "HELLO_VERSION",
    "MAX_HELLO",
    "MAX_PENDING_HELLOS",
    "MAX_SESSIONS",
    "RELEASE_AFTER_S",
    "HostedSessions",
    "bridge_env",
    "release_memory",
    "socket_path",
]
