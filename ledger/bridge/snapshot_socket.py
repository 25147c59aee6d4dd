"""A one-shot ``rewind snapshot`` answered by the running ``rewind serve`` of its repository.

Why it exists: a one-shot process pays interpreter start-up, imports and git's stat scan of the
whole tree (~0.3 s at 100k files, docs/capture.md#served-snapshots), while the bridge of a Pi
session (or ``rewind serve --watch``) already watches that tree and captures in O(changed). So
``rewind snapshot`` first asks it over a local socket and captures by itself only when nobody
answers.

Invariants:
- Delegation never changes the answer. The server answers only for its own repository (work
  tree and git dir, both resolved), only when the client's git-relevant environment (``GIT_*``,
  ``HOME``, ``XDG_CONFIG_HOME``, ``EMAIL``) equals its own, and with the settings the client
  would load (the client's agent dir, the repository's project settings). In any other case, and
  on any failure or timeout, the client captures by itself.
- Only the same user, both ways, and no other user can keep us from serving: the socket is
  ``<git-dir>/pi-rewind/snapshot.sock`` (:func:`socket_path`), mode 0600, in a directory that
  must be this user's and writable by nobody else (:func:`ledger.git.private.unsafe_private_dir`).
  One process per repository serves: the holder of :class:`ledger.git.private.ServeLock`, which
  alone replaces a socket left by a killed server. (It was a Linux abstract socket, whose name
  any local user could bind first, leaving the repository without a watcher.) The client checks
  the socket's and the directory's owner and mode before it connects, and the server's uid
  (``SO_PEERCRED``) before it sends; the server checks the client's before it reads. A path
  longer than a Unix socket's address holds (:data:`~ledger.bridge.private_socket.PATH_MAX`) is reached through the
  directory's descriptor (``/proc/self/fd/N/snapshot.sock``), so deep repositories are served
  too.
- One request per connection, one JSON line each way. Requests are read by one thread for all
  connections at once (:class:`ledger.bridge.private_socket.LineGate`: bounded in size, time and number, so idle or
  slow connections hold up nobody and cost no thread) and served one at a time on that thread with
  its own :class:`~ledger.git.repo.GitRepo` (libgit2 objects are not shared between threads);
  the capture lock orders them with the bridge's own captures. No request ends the service.
- The client half imports only the standard library: it runs before pygit2 would be loaded.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ledger.bridge.private_socket import (
    LineGate,
    connect_private,
    listen_private,
    read_line,
)

# Not `from typing import TYPE_CHECKING`: the client half is on the one-shot CLI's start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess

PROTOCOL = 1
CLIENT_TIMEOUT_S = 120.0
"""How long a client waits for the answer (a capture may wait for a prompt's capture)."""
SOCKET_NAME = "snapshot.sock"
_MAX_REQUEST = 1 << 16
_REQUEST_TIMEOUT_S = 5.0
_MAX_PENDING = 32
"""Connections whose request is still being read (more: the oldest is declined, ``busy``)."""
_SEND_TIMEOUT_S = 30.0
_DISCOVERY_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
)

Fields = dict[str, object]
"""A snapshot report as plain values (``SnapshotReport.fields()``), the same on both paths."""


def supported() -> bool:
    """Served snapshots need a peer-credential check (:mod:`ledger.facilities`)."""
    from ledger.facilities import facilities

    return facilities().peer_credentials


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of an environment that can change what git captures or who commits."""
    return {
        key: value
        for key, value in env.items()
        if key.startswith("GIT_") or key in ("HOME", "XDG_CONFIG_HOME", "EMAIL")
    }


def socket_path(git_dir: Path) -> Path:
    """Where the service of the repository with this git dir listens: in its private dir
    (:func:`ledger.git.private.private_dir`, spelled out here: the client half imports only the
    standard library)."""
    return Path(git_dir) / "pi-rewind" / SOCKET_NAME


# --- client ----------------------------------------------------------------------------------


def find_repository(start: Path) -> tuple[Path, Path] | None:
    """``(work tree, git dir)`` that git would find from ``start``, resolved; ``None`` when the
    guess could be wrong (discovery redirected by the environment) or there is no ``.git``.
    A wrong guess is harmless anyway: the service checks the request's paths and declines."""
    if any(key in os.environ for key in _DISCOVERY_ENV):
        return None
    here = Path(os.path.realpath(start))
    for candidate in (here, *here.parents):
        dotgit = candidate / ".git"
        if dotgit.is_dir():
            return candidate, Path(os.path.realpath(dotgit))
        if dotgit.is_file():
            try:
                text = dotgit.read_text("utf-8").strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not text.startswith("gitdir:"):
                return None
            return candidate, Path(os.path.realpath(candidate / text[len("gitdir:") :].strip()))
    return None


def request_snapshot(
    start: Path, agent_dir: Path, *, timeout_s: float = CLIENT_TIMEOUT_S
) -> tuple[Fields, list[str]] | None:
    """Ask the service of the repository holding ``start`` for a snapshot: ``(report fields,
    settings warnings)``, or ``None`` when there is no service or it declined (capture then)."""
    if not supported():
        return None
    found = find_repository(start)
    if found is None:
        return None
    root, git_dir = found
    request = {
        "v": PROTOCOL,
        "op": "snapshot",
        "root": str(root),
        "gitDir": str(git_dir),
        "agentDir": os.path.abspath(agent_dir),
        "env": relevant_env(os.environ),
    }
    conn = connect_private(socket_path(git_dir), timeout_s)
    if isinstance(conn, str):
        return None
    try:
        with conn:
            conn.sendall(json.dumps(request).encode("utf-8", "surrogateescape") + b"\n")
            answer = json.loads(read_line(conn, 1 << 24) or b"null")
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(answer, dict) or answer.get("ok") is not True:
        return None
    fields, warnings = answer.get("report"), answer.get("warnings")
    if not isinstance(fields, dict) or not isinstance(warnings, list) or not _well_formed(fields):
        return None
    return fields, [str(w) for w in warnings]


def request_capture(
    root: Path, git_dir: Path, settings: Fields, *, timeout_s: float = CLIENT_TIMEOUT_S
) -> Fields | str:
    """Ask the service of ``(root, git_dir)`` to capture the work tree with ``settings`` (the
    capture-relevant snapshot settings, :func:`capture_settings_fields`) and return the
    :class:`~ledger.git.capture.scan.CaptureResult` as plain values; on failure, why: ``"absent"``
    (nobody listens: a watcher still starting, or gone) or another reason (declined, broken)."""
    if not supported():
        return "unsupported"
    request = {
        "v": PROTOCOL,
        "op": "capture",
        "root": str(root),
        "gitDir": str(git_dir),
        "settings": settings,
        "env": relevant_env(os.environ),
    }
    conn = connect_private(socket_path(git_dir), timeout_s)
    if isinstance(conn, str):
        return conn
    try:
        with conn:
            conn.sendall(json.dumps(request).encode("utf-8", "surrogateescape") + b"\n")
            answer = json.loads(read_line(conn, 1 << 24) or b"null")
    except (OSError, ValueError, RecursionError) as exc:
        return f"broken: {type(exc).__name__}"
    if not isinstance(answer, dict):
        return "broken: no answer"
    if answer.get("ok") is not True:
        error = answer.get("error")
        if answer.get("why") == "refused" and isinstance(error, dict):
            # The capture itself refused (a first capture over its limits): the same refusal a
            # local capture would give, not a failure of the service.
            return {"refused": {k: str(v) for k, v in error.items() if v is not None}}
        return str(answer.get("why", "declined"))
    captured = answer.get("capture")
    if not isinstance(captured, dict) or not _well_formed_capture(captured):
        return "broken: malformed answer"
    return captured


def capture_settings_fields(
    max_untracked_file_bytes: int,
    protected_dirs: tuple[str, ...],
    first_capture_max_files: int | None = None,
    first_capture_max_bytes: int | None = None,
) -> Fields:
    """The snapshot settings a capture depends on, as sent with a ``capture`` request (the
    first-capture limits only when given: an older watcher ignores unknown keys)."""
    fields: Fields = {
        "maxUntrackedFileBytes": max_untracked_file_bytes,
        "protectedDirs": list(protected_dirs),
    }
    if first_capture_max_files is not None:
        fields["firstCaptureMaxFiles"] = first_capture_max_files
    if first_capture_max_bytes is not None:
        fields["firstCaptureMaxBytes"] = first_capture_max_bytes
    return fields


def serving(root: Path, git_dir: Path) -> bool:
    """Whether a process of this user serves the snapshots of ``(root, git_dir)`` (it may still
    decline a request: another environment, or another work tree of the same git dir). Connects
    and leaves without a request, which the service neither counts nor treats as activity."""
    if not supported():
        return False
    probe = connect_private(socket_path(git_dir), 5.0)
    if isinstance(probe, str):
        return False
    probe.close()
    return True


def start_watcher(
    start: Path, idle_exit_s: int, options: Sequence[str] = ()
) -> subprocess.Popen[bytes] | None:
    """Start ``rewind serve --watch --idle-exit N`` for the repository holding ``start``,
    detached (its own session, no terminal, no output), so the next ``rewind snapshot`` there
    is served: the started process, or ``None`` where snapshots cannot be served (not Linux, no
    repository the client would find), when one of this user's processes already serves them
    (it declined this client: another environment), or the process could not be started.

    On by default (``rewind.snapshot.autoWatchSeconds``, 600 s; 0 turns it off), as git's
    fsmonitor daemon and Watchman outlive their command, and visible (``rewind serve --status``,
    ``rewind doctor``; ``rewind serve --stop``). Safe to race: a second watcher of the
    same repository refuses by itself (one holder of the serve lock), and the watcher ends after
    ``idle_exit_s`` seconds without a request."""
    if idle_exit_s <= 0 or not supported():
        return None
    found = find_repository(start)
    if found is None or serving(*found):
        return None
    import subprocess

    command = [sys.executable, "-m", "ledger", "serve", "--watch", "--idle-exit", str(idle_exit_s)]
    command += options  # a pi -p run's owed sweep (ledger/retention/after_session.py)
    try:
        watcher = subprocess.Popen(
            command,
            cwd=found[0],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not in the caller's process group: Ctrl-C there spares it
            close_fds=True,
        )
    except OSError:
        return None
    # Reaped if it ends while we still run (a library caller lives on): no zombie is left.
    threading.Thread(target=watcher.wait, name="rewind-watcher-reaper", daemon=True).start()
    return watcher


_PROBE = "no request"
_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "json": dict,
    "commit": str,
    "tree": str,
    "reused": bool,
    "skipped": list,
    "ms": (int, float),
    "rebuilt": bool,
    "identityFallback": bool,
}


def _well_formed(fields: dict[str, object]) -> bool:
    """An answer the CLI can print (another version of the server may answer otherwise: then
    the client captures by itself rather than fail)."""
    if not all(isinstance(fields.get(key), kind) for key, kind in _FIELD_TYPES.items()):
        return False
    skipped = fields["skipped"]
    assert isinstance(skipped, list)
    return all(
        isinstance(item, dict) and isinstance(item.get("path"), str) and "reason" in item
        for item in skipped
    )


_CAPTURE_TYPES: dict[str, type | tuple[type, ...]] = {
    "tree": str,
    "skipped": list,
    "rebuilt": bool,
    "updated": int,
    "ms": (int, float),
}


def _well_formed_capture(fields: dict[str, object]) -> bool:
    if not all(isinstance(fields.get(key), kind) for key, kind in _CAPTURE_TYPES.items()):
        return False
    tree, skipped = fields["tree"], fields["skipped"]
    assert isinstance(tree, str) and isinstance(skipped, list)
    if len(tree) not in (40, 64) or any(c not in "0123456789abcdef" for c in tree):
        return False
    return all(
        isinstance(item, dict)
        and isinstance(item.get("path"), str)
        and isinstance(item.get("reason"), str)
        and (item.get("size") is None or isinstance(item.get("size"), int))
        for item in skipped
    )


# --- server ----------------------------------------------------------------------------------


class SnapshotService:
    """Serves snapshots of one repository to one-shot ``rewind snapshot`` processes."""

    def __init__(
        self, root: Path, git_dir: Path, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.git_dir = Path(os.path.realpath(git_dir))
        self.path = socket_path(self.git_dir)
        self.served = 0
        """Snapshots answered (``rewind snapshot``)."""
        self.captured = 0
        """Captures answered (a bridge's, :mod:`ledger.bridge.delegate`)."""
        self.declined: dict[str, int] = {}
        self.last_request = clock()
        self.refusal: tuple[str, str] | None = None
        """Why :meth:`start` did not listen, and a hint: what ``rewind serve --watch`` says."""
        self.holder: int | None = None
        """The pid of the process that already serves this repository (0: not known)."""
        self._busy = False
        self._clock = clock
        self._lock: object | None = None
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._repo: object | None = None

    def start(self) -> bool:
        """Take the repository's serve lock and listen; ``False`` (nothing started or held,
        :attr:`refusal` says why) when another process already serves this repository, the
        private dir is not safe for a socket, or not on Linux."""
        from ledger.git.private import ServeLock, unsafe_private_dir

        serve = "'rewind snapshot' captures by itself here, as without a watcher"
        if not supported():
            self.refusal = ("no Unix sockets with peer credentials here", serve)
            return False
        unsafe = unsafe_private_dir(self.git_dir)
        if unsafe is not None:
            self.refusal = (unsafe, f"{serve}; make it a directory of yours only you may write")
            return False
        lock = ServeLock(self.git_dir)
        try:
            self.holder = lock.acquire()
        except OSError as exc:
            self.refusal = (f"cannot lock {lock.path}: {exc.strerror or exc}", serve)
            return False
        if self.holder is not None:
            pid = f" (pid {self.holder})" if self.holder else ""
            self.refusal = (
                f"another 'rewind serve'{pid} already serves this repository's snapshots",
                "'rewind snapshot' is already fast here; stop the other one to run this one",
            )
            return False

        try:
            self._listener = listen_private(self.path)
        except OSError as exc:
            lock.release()
            self.refusal = (f"cannot listen on {self.path}: {exc.strerror or exc}", serve)
            return False
        self._lock = lock
        self._thread = threading.Thread(
            target=self._serve, name="rewind-snapshot-socket", daemon=True
        )
        self._thread.start()
        return True

    def close(self) -> None:
        self._closed.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the gate's select now
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._listener is not None:
            # Before the lock is released: the next holder's socket is never ours to remove.
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self._listener.close()
        if self._lock is not None:
            from ledger.git.private import ServeLock

            assert isinstance(self._lock, ServeLock)
            self._lock.release()
            self._lock = None

    def idle_s(self) -> float:
        """Seconds since the last snapshot or capture served (0 while a request is being
        answered): what ``--idle-exit`` counts. A declined or empty connection is no use, so
        it is not activity."""
        if self._busy:
            return 0.0
        return self._clock() - self.last_request

    def _serve(self) -> None:

        assert self._listener is not None
        gate = LineGate(
            self._listener,
            self._closed,
            noun="request",
            limit=_MAX_REQUEST,
            timeout_s=_REQUEST_TIMEOUT_S,
            max_pending=_MAX_PENDING,
            clock=self._clock,
        )
        gate.run(self._on_request, self._count)

    def _count(self, why: str) -> None:
        self.declined[why] = self.declined.get(why, 0) + 1

    def _on_request(self, conn: socket.socket, line: bytes | None) -> None:
        with conn:
            if not line:
                return  # connected and left: asked whether we serve (not counted)
            self._busy = True
            try:
                answer = self._answer(line)
            except Exception as exc:  # never let one request end the service
                answer = {"ok": False, "why": f"{type(exc).__name__}: {exc}"}
            if answer.get("ok") is not True:
                self._count(str(answer.get("why", "?")).split(":", 1)[0])
            else:
                self.last_request = self._clock()
            self._busy = False
            # Bounded: a client that does not read its answer holds the service this long.
            conn.settimeout(_SEND_TIMEOUT_S)
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps(answer).encode("utf-8", "surrogateescape") + b"\n")

    def _answer(self, line: bytes) -> dict[str, object]:
        from ledger.git.repo import GitRepo
        from ledger.git.store.snapshot import take_snapshot
        from ledger.settings import load_settings

        try:
            request = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested too deep
            return {"ok": False, "why": "unknown request"}
        if not isinstance(request, dict) or request.get("v") != PROTOCOL:
            return {"ok": False, "why": "unknown request"}
        if request.get("op") not in ("snapshot", "capture"):
            return {"ok": False, "why": "unknown request"}
        if request.get("root") != str(self.root) or request.get("gitDir") != str(self.git_dir):
            return {"ok": False, "why": "another repository"}
        if request.get("env") != relevant_env(os.environ):
            return {"ok": False, "why": "another environment"}
        if self._repo is None:
            self._repo = GitRepo.discover(self.root)
        repo = self._repo
        assert isinstance(repo, GitRepo)
        if request["op"] == "capture":
            return self._capture(repo, request.get("settings"))
        agent_dir = request.get("agentDir")
        if not isinstance(agent_dir, str):
            return {"ok": False, "why": "unknown request"}
        settings, warnings = load_settings(Path(agent_dir), repo.root)
        report = take_snapshot(repo, settings.snapshot)
        self.served += 1
        return {"ok": True, "report": report.fields(), "warnings": warnings}

    def _capture(self, repo: object, given: object) -> dict[str, object]:
        """A bridge's capture (:mod:`ledger.bridge.delegate`): the tree only; the bridge commits
        it. The bridge's own settings are used, so the answer is the one it would compute."""
        from ledger.errors import CaptureTooLargeError
        from ledger.git.capture.scan import capture_tree
        from ledger.git.repo import GitRepo
        from ledger.settings import SnapshotSettings

        assert isinstance(repo, GitRepo)
        if not isinstance(given, dict):
            return {"ok": False, "why": "unknown request"}
        limit, dirs = given.get("maxUntrackedFileBytes"), given.get("protectedDirs")
        if (
            not isinstance(limit, int)
            or isinstance(limit, bool)
            or limit < 0
            or not isinstance(dirs, list)
            or not all(isinstance(d, str) for d in dirs)
        ):
            return {"ok": False, "why": "unknown request"}
        settings = SnapshotSettings(max_untracked_file_bytes=limit, protected_dirs=tuple(dirs))
        files, size = given.get("firstCaptureMaxFiles"), given.get("firstCaptureMaxBytes")
        if isinstance(files, int) and not isinstance(files, bool) and files >= 0:
            settings = settings.replace(first_capture_max_files=files)
        if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
            settings = settings.replace(first_capture_max_bytes=size)  # absent: the defaults
        try:
            captured = capture_tree(repo, settings)
        except CaptureTooLargeError as exc:
            error = {"type": type(exc).__name__, "message": exc.message, "hint": exc.hint}
            return {"ok": False, "why": "refused", "error": error}
        self.captured += 1
        return {
            "ok": True,
            "capture": {
                "tree": captured.tree,
                "skipped": [s.fields() for s in captured.skipped],
                "rebuilt": captured.rebuilt,
                "updated": captured.updated,
                "ms": captured.ms,
            },
        }


__all__ = [
    "SnapshotService",
    "capture_settings_fields",
    "find_repository",
    "relevant_env",
    "request_capture",
    "request_snapshot",
    "serving",
    "socket_path",
    "start_watcher",
]
