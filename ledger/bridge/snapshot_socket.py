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
- Only the same user, both ways: a Linux abstract socket (no file anywhere, gone with the
  process; its name is derived from the work tree and git dir). The server checks the client's
  uid with ``SO_PEERCRED`` before it reads a request, and the client checks the server's before
  it sends one (any user can bind an abstract name first).
- One request per connection, one JSON line each way. Requests are served one at a time on the
  service's own thread with its own :class:`~ledger.git.repo.GitRepo` (libgit2 objects are not
  shared between threads); the capture lock orders them with the bridge's own captures.
- The client half imports only the standard library: it runs before pygit2 would be loaded.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path

# Not `from typing import TYPE_CHECKING`: the client half is on the one-shot CLI's start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess

PROTOCOL = 1
CLIENT_TIMEOUT_S = 120.0
"""How long a client waits for the answer (a capture may wait for a prompt's capture)."""
_MAX_REQUEST = 1 << 16
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
    return sys.platform.startswith("linux") and hasattr(socket, "SO_PEERCRED")


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of an environment that can change what git captures or who commits."""
    return {
        key: value
        for key, value in env.items()
        if key.startswith("GIT_") or key in ("HOME", "XDG_CONFIG_HOME", "EMAIL")
    }


def socket_name(root: Path, git_dir: Path) -> bytes:
    """The abstract socket name of the service for this work tree and git dir (resolved).

    Two CRC-32s, not a cryptographic hash (hashlib's OpenSSL import costs ~4 ms of a one-shot
    command): a collision is harmless, the service checks the request's paths and declines."""
    a = zlib.crc32(os.fsencode(root))
    b = zlib.crc32(os.fsencode(git_dir), a)
    return b"\0rewind-ledger/snapshot/%08x%08x" % (a, b)


# --- client ----------------------------------------------------------------------------------


def find_repository(start: Path) -> tuple[Path, Path] | None:
    """``(work tree, git dir)`` that git would find from ``start``, resolved; ``None`` when the
    guess could be wrong (discovery redirected by the environment) or there is no ``.git``.
    A wrong guess is harmless anyway: no service listens under its name."""
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
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout_s)
            conn.connect(socket_name(root, git_dir))
            # Abstract names are shared by all users of the network namespace: a name held by
            # another user's process is never told anything, nor believed.
            if peer_uid(conn) != os.getuid():
                return None
            conn.sendall(json.dumps(request).encode("utf-8", "surrogateescape") + b"\n")
            answer = json.loads(read_line(conn, 1 << 24) or b"null")
    except (OSError, ValueError):
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
    :class:`~ledger.git.capture.CaptureResult` as plain values; on failure, why: ``"absent"``
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
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout_s)
            try:
                conn.connect(socket_name(root, git_dir))
            except OSError:
                return "absent"
            if peer_uid(conn) != os.getuid():  # see request_snapshot
                return "another user"
            conn.sendall(json.dumps(request).encode("utf-8", "surrogateescape") + b"\n")
            answer = json.loads(read_line(conn, 1 << 24) or b"null")
    except (OSError, ValueError) as exc:
        return f"broken: {type(exc).__name__}"
    if not isinstance(answer, dict):
        return "broken: no answer"
    if answer.get("ok") is not True:
        return str(answer.get("why", "declined"))
    captured = answer.get("capture")
    if not isinstance(captured, dict) or not _well_formed_capture(captured):
        return "broken: malformed answer"
    return captured


def capture_settings_fields(
    max_untracked_file_bytes: int, protected_dirs: tuple[str, ...]
) -> Fields:
    """The snapshot settings a capture depends on, as sent with a ``capture`` request."""
    return {
        "maxUntrackedFileBytes": max_untracked_file_bytes,
        "protectedDirs": list(protected_dirs),
    }


def serving(root: Path, git_dir: Path) -> bool:
    """Whether a process of this user serves the snapshots of ``(root, git_dir)`` (it may still
    decline a request: another environment). Connects and leaves without a request, which the
    service neither counts nor treats as activity."""
    if not supported():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(socket_name(root, git_dir))
            return peer_uid(probe) == os.getuid()
        except OSError:
            return False


def start_watcher(start: Path, idle_exit_s: int) -> subprocess.Popen[bytes] | None:
    """Start ``rewind serve --watch --idle-exit N`` for the repository holding ``start``,
    detached (its own session, no terminal, no output), so the next ``rewind snapshot`` there
    is served: the started process, or ``None`` where snapshots cannot be served (not Linux, no
    repository the client would find), when one of this user's processes already serves them
    (it declined this client: another environment), or the process could not be started.

    Opt-in (``rewind.snapshot.autoWatchSeconds``), as git's fsmonitor daemon is: a process that
    outlives the command is never started by default. Safe to race: a second watcher of the
    same repository refuses by itself (one server per socket name), and the watcher ends after
    ``idle_exit_s`` seconds without a request."""
    if idle_exit_s <= 0 or not supported():
        return None
    found = find_repository(start)
    if found is None or serving(*found):
        return None
    import subprocess

    command = [sys.executable, "-m", "ledger", "serve", "--watch", "--idle-exit", str(idle_exit_s)]
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


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (Linux ``SO_PEERCRED``)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def read_line(conn: socket.socket, limit: int) -> bytes | None:
    """One line without its newline; ``None`` at end of input or past ``limit`` bytes."""
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
        if len(data) > limit:
            return None
    return data.split(b"\n", 1)[0]


# --- server ----------------------------------------------------------------------------------


class SnapshotService:
    """Serves snapshots of one repository to one-shot ``rewind snapshot`` processes."""

    def __init__(
        self, root: Path, git_dir: Path, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.git_dir = Path(os.path.realpath(git_dir))
        self.served = 0
        """Snapshots answered (``rewind snapshot``)."""
        self.captured = 0
        """Captures answered (a bridge's, :mod:`ledger.bridge.delegate`)."""
        self.declined: dict[str, int] = {}
        self.last_request = clock()
        self._busy = False
        self._clock = clock
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    def start(self) -> bool:
        """Listen; ``False`` (and nothing started) when another process already serves this
        repository or the platform has no abstract sockets."""
        if not supported():
            return False
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(socket_name(self.root, self.git_dir))
            listener.listen(16)
        except OSError:
            listener.close()
            return False
        listener.settimeout(0.5)
        self._listener = listener
        self._thread = threading.Thread(
            target=self._serve, name="rewind-snapshot-socket", daemon=True
        )
        self._thread.start()
        return True

    def close(self) -> None:
        self._closed.set()
        if self._listener is not None:  # wake a waiting accept() now: connect to ourselves
            with (
                contextlib.suppress(OSError),
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as wake,
            ):
                wake.connect(socket_name(self.root, self.git_dir))
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()

    def idle_s(self) -> float:
        """Seconds since the last snapshot or capture served (0 while a request is being
        answered): what ``--idle-exit`` counts. A declined or empty connection is no use, so
        it is not activity."""
        if self._busy:
            return 0.0
        return self._clock() - self.last_request

    def _serve(self) -> None:
        from ledger.git.repo import GitRepo

        repo: GitRepo | None = None
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._closed.is_set():
                conn.close()
                return
            with conn:
                self._busy = True
                try:
                    if repo is None:
                        repo = GitRepo.discover(self.root)
                    answer = self._answer(conn, repo)
                except Exception as exc:  # never let one request end the service
                    answer = {"ok": False, "why": f"{type(exc).__name__}: {exc}"}
                if answer.get("why") == _PROBE:
                    pass
                elif answer.get("ok") is not True:
                    why = str(answer.get("why", "?")).split(":", 1)[0]
                    self.declined[why] = self.declined.get(why, 0) + 1
                else:
                    self.last_request = self._clock()
                self._busy = False
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps(answer).encode("utf-8", "surrogateescape") + b"\n")

    def _answer(self, conn: socket.socket, repo: object) -> dict[str, object]:
        from ledger.git.repo import GitRepo
        from ledger.git.snapshot import take_snapshot
        from ledger.settings import load_settings

        assert isinstance(repo, GitRepo)
        if peer_uid(conn) != os.getuid():
            return {"ok": False, "why": "another user"}
        conn.settimeout(5.0)
        line = read_line(conn, _MAX_REQUEST)
        if not line:
            return {"ok": False, "why": _PROBE}  # connected and left: asked whether we serve
        request = json.loads(line)
        if not isinstance(request, dict) or request.get("v") != PROTOCOL:
            return {"ok": False, "why": "unknown request"}
        if request.get("op") not in ("snapshot", "capture"):
            return {"ok": False, "why": "unknown request"}
        if request.get("root") != str(self.root) or request.get("gitDir") != str(self.git_dir):
            return {"ok": False, "why": "another repository"}
        if request.get("env") != relevant_env(os.environ):
            return {"ok": False, "why": "another environment"}
        if request["op"] == "capture":
            return self._capture(conn, repo, request.get("settings"))
        agent_dir = request.get("agentDir")
        if not isinstance(agent_dir, str):
            return {"ok": False, "why": "unknown request"}
        conn.settimeout(None)
        settings, warnings = load_settings(Path(agent_dir), repo.root)
        report = take_snapshot(repo, settings.snapshot)
        self.served += 1
        return {"ok": True, "report": report.fields(), "warnings": warnings}

    def _capture(self, conn: socket.socket, repo: object, given: object) -> dict[str, object]:
        """A bridge's capture (:mod:`ledger.bridge.delegate`): the tree only; the bridge commits
        it. The bridge's own settings are used, so the answer is the one it would compute."""
        from ledger.git.capture import capture_tree
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
        conn.settimeout(None)
        settings = SnapshotSettings(max_untracked_file_bytes=limit, protected_dirs=tuple(dirs))
        captured = capture_tree(repo, settings)
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
    "peer_uid",
    "read_line",
    "relevant_env",
    "request_capture",
    "request_snapshot",
    "serving",
    "socket_name",
    "start_watcher",
]
