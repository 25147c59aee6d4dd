"""The command line's client of the watcher: ``rewind restore``, ``undo``, ``diff`` and
``status`` run by the repository's running watcher when it takes them.

Why it exists: see :mod:`ledger.bridge.served_commands` (the server half). A one-shot process
pays ~0.3 s of start-up and a whole-tree stat scan before it restores one file; the watcher has
both done. This client decides in a few milliseconds, with the standard library only, whether to
ask: a served command (:data:`COMMANDS`), not ``--help``, no question to ask (a restore or undo
without ``--yes``/``--dry-run`` whose stdin and stderr are a terminal asks for confirmation: it
runs here), ``REWIND_SERVED`` not ``0``, and a watcher listening on the repository's bridge
socket. Then it sends the hello (the arguments, the directory, the environment a command reads,
the umask) and prints the answer.

Invariants:
- Any failure before the answer (nobody listens, declined, a broken connection, a malformed
  answer) means: run the command here, as if no watcher ran. The command has then changed
  nothing: the watcher answers ``{"local": …}`` only before any change, and a broken connection
  before the hello is accepted means it never ran.
- The watcher runs the command only after the client, having read its acceptance, says ``go``:
  a client that gave up waiting runs the command itself, and the watcher then never does.
- A connection lost *after* ``go`` is the one case where the command may have run: the client
  then says so and exits 1, and never runs it a second time (a restore twice would record two
  operations).
- Output is printed exactly as the command wrote it (raw bytes in paths included) and the exit
  status is the command's.
"""

from __future__ import annotations

import _socket
import json
import os
import stat
import sys

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

# What this client imports is paid by every served command (issue 34: ``rewind restore`` with
# a watcher running ≤ 0.05 of the reference's, ~80 ms at 100k files, of which the interpreter's
# own start is ~45 ms): ``_socket`` rather than ``socket`` (its enums, ``selectors``, ~4 ms),
# ``os.path`` strings rather than ``pathlib`` (not loaded by a regular install's start-up), no
# module of the bridge (``threading``, ``socket``). Its guesses are checked against theirs by
# tests/unit/test_served_client.py.

COMMANDS = frozenset({"restore", "undo", "diff", "status"})
"""The commands a watcher runs for the command line."""
_ASKING = frozenset({"restore", "undo"})
"""Commands that ask for confirmation without ``--yes`` or ``--dry-run``."""
_VALUED = ("--repo", "--agent-dir")
"""Global options that take a value (the command is the first other word)."""
_CONNECT_TIMEOUT_S = 2.0
_ANSWER_TIMEOUT_S = 600.0
"""A served command never waits for a turn; this bounds a wedged watcher."""
_MAX_LINE = 1 << 21
HELLO_VERSION = 1  # ledger.bridge.hosted.HELLO_VERSION (not imported: it pulls in pygit2)


def command_of(argv: list[str]) -> tuple[str | None, str | None]:
    """``(command, --repo value)`` as the parser will see them, or ``(None, …)`` when unsure
    (an abbreviated or unknown global option, ``--``): then the command runs here."""
    repo: str | None = None
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in _VALUED:
            if i + 1 >= len(argv):
                return None, repo
            if word == "--repo":
                repo = argv[i + 1]
            i += 2
            continue
        if word.startswith("--repo="):
            repo = word[len("--repo=") :]
        elif not word.startswith("-"):
            return word, repo
        elif word != "--json" and not word.startswith("--agent-dir="):
            return None, repo
        i += 1
    return None, repo


def current_umask() -> int | None:
    """This process's umask, read without changing it (Linux: ``/proc/self/status``; ``None``
    where it cannot be read that way: the command then runs here)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        return None
    return None


def wanted(argv: list[str]) -> tuple[str, str] | None:
    """``(command, where to look for the repository)`` when the watcher should be asked."""
    if os.environ.get("REWIND_SERVED", "1") == "0":
        return None
    command, repo = command_of(argv)
    if command not in COMMANDS or "-h" in argv or "--help" in argv:
        return None
    if command in _ASKING and not {"--yes", "-y", "--dry-run"} & set(argv):
        try:
            if sys.stdin.isatty() and sys.stderr.isatty():
                return None  # it will ask: a question is answered here, not by the watcher
        except (AttributeError, ValueError):
            return None
    start = os.getcwd()
    if repo is not None:
        start = os.path.join(start, repo)
    return command, start


_DISCOVERY_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
)
""":data:`ledger.bridge.snapshot_socket._DISCOVERY_ENV` (a unit test holds them equal)."""


def find_repository(start: str) -> tuple[str, str] | None:
    """``(work tree, git dir)`` that git would find from ``start``, resolved; ``None`` when the
    guess could be wrong: :func:`ledger.bridge.snapshot_socket.find_repository` with strings
    (a unit test holds them equal). A wrong guess is harmless: the watcher declines a hello
    whose paths are not its repository's."""
    if any(key in os.environ for key in _DISCOVERY_ENV):
        return None
    here = os.path.realpath(start)
    while True:
        dotgit = os.path.join(here, ".git")
        if os.path.isdir(dotgit):
            return here, os.path.realpath(dotgit)
        if os.path.isfile(dotgit):
            try:
                with open(dotgit, encoding="utf-8") as file:
                    text = file.read().strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not text.startswith("gitdir:"):
                return None
            return here, os.path.realpath(os.path.join(here, text[len("gitdir:") :].strip()))
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def supported() -> bool:
    """:func:`ledger.facilities.facilities`' ``peer_credentials`` (a unit test holds them equal):
    the watcher's answer is believed only from a process of this user's. ``REWIND_PORTABLE=1``
    (:data:`ledger.facilities.PORTABLE_ENV`) reports it absent, as there."""
    if os.environ.get("REWIND_PORTABLE", "") not in ("", "0"):
        return False
    return sys.platform.startswith("linux") and hasattr(_socket, "SO_PEERCRED")


_PATH_MAX = 107
""":data:`ledger.bridge.private_socket.PATH_MAX`."""


def connect_private(path: str, timeout_s: float) -> _socket.socket | None:
    """A connection to this user's watcher listening at ``path``, or ``None``: the checks of
    :func:`ledger.bridge.private_socket.connect_private` (the socket and its directory are this
    user's and nobody else may write the directory; the listening process is this user's,
    ``SO_PEERCRED``), on a bare ``_socket``."""
    uid = os.getuid()
    try:
        folder = os.open(
            os.path.dirname(path), os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        )
    except OSError:
        return None
    try:
        info = os.fstat(folder)
        if info.st_uid != uid or info.st_mode & 0o022:
            return None
        name = os.path.basename(path)
        try:
            sock = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISSOCK(sock.st_mode) or sock.st_uid != uid:
            return None
        address = os.fsencode(path)
        if len(address) > _PATH_MAX:  # reached through the directory's descriptor
            address = b"/proc/self/fd/%d/%s" % (folder, os.fsencode(name))
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            conn.settimeout(timeout_s)
            conn.connect(address)
            creds = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
            if int.from_bytes(creds[4:8], sys.byteorder, signed=True) == uid:  # pid, uid, gid
                return conn
        except OSError:
            pass
        conn.close()
        return None
    finally:
        os.close(folder)


def run_by_watcher(argv: list[str]) -> int | None:
    """Run ``argv`` by the repository's watcher: the command's exit status, or ``None`` to run
    it here (see the module docstring)."""
    try:
        asked = wanted(argv)
    except OSError:  # the working directory is gone: the command says so itself
        return None
    if asked is None:
        return None
    command, start = asked
    from ledger.bridge.session_env import bridge_env

    if not supported():
        return None
    found = find_repository(start)
    if found is None:
        return None
    root, git_dir = found
    umask = current_umask()
    if umask is None:
        return None
    conn = connect_private(os.path.join(git_dir, "pi-rewind", "bridge.sock"), _CONNECT_TIMEOUT_S)
    if conn is None:
        return None
    hello = {
        "v": HELLO_VERSION,
        "op": "command",
        "command": command,
        "root": root,
        "gitDir": git_dir,
        "env": bridge_env(os.environ),
        "argv": argv,
        "cwd": os.getcwd(),
        "umask": umask,
    }
    try:
        return _ask(conn, hello)
    finally:
        conn.close()


def _ask(conn: _socket.socket, hello: dict[str, object]) -> int | None:
    """Send ``hello``, say ``go`` once accepted, print the answer (see :func:`run_by_watcher`)."""
    reader = _Lines(conn)
    try:
        conn.sendall(json.dumps(hello).encode("utf-8", "surrogateescape") + b"\n")
        accepted = json.loads(reader.line(1 << 16) or b"null")
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(accepted, dict) or accepted.get("ok") is not True:
        return None  # declined: nothing ran
    # The watcher runs the command only once it has this line: a client that gave up
    # before it (a slow watcher, a timeout above) runs the command itself, never twice.
    try:
        conn.sendall(b"go\n")
    except OSError:
        return None
    conn.settimeout(_ANSWER_TIMEOUT_S)
    try:
        return _print_answer(reader)
    except KeyboardInterrupt:
        # The watcher runs the command to its end (a restore is never cut half-way by a
        # client that left); what it did is recorded as always.
        sys.stderr.write(
            "error: interrupted; the watcher finishes the command\n"
            "hint: 'rewind history @' shows whether it changed anything\n"
        )
        return 130


class _Lines:
    """The lines a socket receives (the answer's lines may arrive together), each received byte
    scanned once."""

    def __init__(self, conn: _socket.socket) -> None:
        self._conn = conn
        self._data = b""

    def line(self, limit: int) -> bytes | None:
        """One line without its newline; ``None`` at the end of input or past ``limit`` bytes.
        Raises :class:`OSError` (a timeout included)."""
        searched = 0
        while True:
            end = self._data.find(b"\n", searched)
            if end >= 0:
                line, self._data = self._data[:end], self._data[end + 1 :]
                return line if len(line) <= limit else None
            if len(self._data) > limit:
                return None
            searched = len(self._data)
            chunk = self._conn.recv(1 << 16)
            if not chunk:
                return None
            self._data += chunk


def _print_answer(reader: _Lines) -> int | None:
    """Print the served command's output as it was written; its exit status (``None``: run it
    here). Nothing is printed before the exit status is in: a command that turns out to run
    here (``local``) prints only once, from here."""
    chunks: list[tuple[str, str]] = []
    while True:
        try:
            line = reader.line(_MAX_LINE)
            answer = json.loads(line) if line else None
        except (OSError, ValueError, RecursionError):
            answer = None
        if not isinstance(answer, dict):
            # Accepted, then lost: the command may have run. Never run it twice.
            sys.stderr.write(
                "error: the watcher running this command went away before it answered\n"
                "hint: 'rewind history @' and 'rewind doctor' show whether it ran; "
                "run it again if it did not\n"
            )
            return 1
        if "local" in answer:
            return None  # it stopped before changing anything (it would have waited)
        if isinstance(answer.get("out"), str):
            chunks.append(("out", answer["out"]))
        elif isinstance(answer.get("err"), str):
            chunks.append(("err", answer["err"]))
        elif isinstance(answer.get("exit"), int):
            code: int = answer["exit"]
            try:
                for key, text in chunks:
                    _write(sys.stdout if key == "out" else sys.stderr, text)
            except BrokenPipeError:
                # The reader went away (``rewind diff … | head``), as a local run takes it:
                # not an error, and nothing more to print (the flush at exit stays silent).
                try:
                    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
                except OSError:
                    pass
                return 0
            return code


def _write(stream: TextIO, text: str) -> None:
    if not text:
        return
    # Raw bytes in paths are str with lone surrogates: written back as those bytes, as
    # ledger.cli.context.tolerate_raw_bytes lets a local run write them.
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and getattr(stream, "errors", None) != "surrogateescape":
        try:
            reconfigure(errors="surrogateescape")
        except (ValueError, OSError):
            pass
    stream.write(text)
    stream.flush()


__all__ = [
    "COMMANDS",
    "command_of",
    "connect_private",
    "current_umask",
    "find_repository",
    "run_by_watcher",
    "supported",
    "wanted",
]
