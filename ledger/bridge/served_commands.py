"""One-shot commands run by the repository's watcher: ``rewind restore``, ``undo``, ``diff`` and
``status`` without a process of their own.

Why it exists: a one-shot ``rewind restore`` pays for an interpreter, ~150 modules (pygit2,
the engine) and a stat scan of the whole work tree before it changes one file: most of a second
at 100k files, 0.3–0.6 s even at 300 files (docs/capture.md#served-commands). The repository's
watcher (``rewind serve --watch``, or the one a Pi session started) has all of that warm: its
imports are done, its change feed knows what changed. So the command line asks it to run the
command (:mod:`ledger.cli.served`, the client, standard library only) and prints what it
answers; a command the watcher does not take runs in its own process as before.

Invariants:
- The same command, the same result. The watcher runs the very ``main`` of the command line
  (``ledger.cli.run_served_command``) with the client's arguments and working directory, in an
  environment equal to the client's on everything a command reads (checked with the hello, as
  for hosted sessions: :func:`ledger.bridge.hosted.bridge_env`), with the client's ``umask``
  (files a restore creates get the client's permissions; another umask: declined). Output is
  collected and sent when the command ends, stdout and stderr in the order they were written
  (lines of at most :data:`CHUNK` characters), then the exit status: the client prints it as
  the command would have.
- Run once at most: only after the client's ``go``, which it sends once it has read the
  acceptance (a client that gave up before runs the command itself).
- Never a wait the user cannot cancel. A served command never waits: where it would wait for
  another session's turn or a running restore, it stops before changing anything
  (:class:`ledger.cli.context.RunLocally`) and the client runs it in its own process, where the
  wait is shown and Ctrl-C cancels it. Nothing the served run printed is shown then.
- Only the commands of :data:`ledger.cli.served.COMMANDS`, never one that asks a question: the client runs a
  restore or undo that would ask for confirmation (no ``--yes``/``--dry-run``, a terminal on
  stdin and stderr) itself, and ``--help`` too.
- One command at a time: they share the process's parsers and its loaded authorship index
  (tailed, never read whole again: :meth:`ledger.engine.authorship_log.AuthorshipLog.share_loaded`).
- The watcher's own process state is left as it was: no ``gc`` switch, no signal handlers (the
  command runs on a session thread of :class:`~ledger.bridge.hosted.HostedSessions`), no
  process-wide capture delegation (:func:`ledger.bridge.delegate.for_command` declines inside
  the watcher, whose feed captures directly).
"""

from __future__ import annotations

import io
import json
import os
import socket
import threading
from collections.abc import Mapping

from ledger.cli.served import COMMANDS, current_umask

_ONE_AT_A_TIME = threading.Lock()
GO_TIMEOUT_S = 5.0
"""How long the watcher waits for the client's ``go`` after accepting its command."""
CHUNK = 1 << 18
"""Output is sent in lines of at most this many characters (the client bounds each line)."""


def refusal(hello: Mapping[str, object]) -> str | None:
    """Why the command of ``hello`` is not run here (``None``: run it): an unknown command, an
    argument list or directory of the wrong shape, another umask."""
    argv, cwd, umask = hello.get("argv"), hello.get("cwd"), hello.get("umask")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return "unknown hello"
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        return "unknown hello"
    if hello.get("command") not in COMMANDS:
        return "not served"
    mine = current_umask()
    if mine is None or umask != mine:
        return "another umask"
    return None


class _Recorded(io.StringIO):
    """One of the command's two streams: every write is also kept, in order, with the other
    stream's, so that the client prints warnings and output interleaved as they were written."""

    def __init__(self, key: str, order: list[tuple[str, str]]) -> None:
        super().__init__()
        self._key = key
        self._order = order

    def write(self, text: str) -> int:
        if text:
            self._order.append((self._key, text))
        return len(text)


def serve_command(conn: socket.socket, hello: Mapping[str, object]) -> str:
    """Run the command of an accepted ``hello`` on this (session) thread and send its result:
    its output as JSON lines ``{"out": …}`` / ``{"err": …}`` in the order it was written, then
    ``{"exit": N}``; or ``{"local": why}`` when the client must run it itself. Returns what
    happened (``"served"`` or the reason), for the counts."""
    from pathlib import Path

    from ledger.cli.app import run_served_command
    from ledger.cli.context import RunLocally

    given = hello["argv"]
    assert isinstance(given, list)  # checked by refusal()
    argv = [str(a) for a in given]
    # The client says "go" once it has read the acceptance; a client that gave up before (and
    # runs the command itself) never does, and the command is not run here.
    conn.settimeout(GO_TIMEOUT_S)
    go = b""
    try:
        while len(go) < 3:
            chunk = conn.recv(3 - len(go))
            if not chunk:
                break
            go += chunk
    except OSError:
        go = b""
    if go != b"go\n":
        return "no go"
    conn.settimeout(None)
    order: list[tuple[str, str]] = []
    try:
        # One at a time: the commands share this process's loaded indexes and parsers. They
        # are short, and none of them waits (RunLocally).
        with _ONE_AT_A_TIME:
            code = run_served_command(
                argv, Path(str(hello["cwd"])), _Recorded("out", order), _Recorded("err", order)
            )
    except RunLocally as exc:
        conn.sendall(_line({"local": exc.reason}))
        return exc.reason
    for key, text in order:
        for start in range(0, len(text), CHUNK):
            conn.sendall(_line({key: text[start : start + CHUNK]}))
    conn.sendall(_line({"exit": code}))
    return "served"


def _line(value: dict[str, object]) -> bytes:
    # Paths holding raw bytes are str with lone surrogates: json escapes them (\udcxx), and
    # the client writes them back as those bytes.
    return json.dumps(value).encode("ascii") + b"\n"


__all__ = ["CHUNK", "GO_TIMEOUT_S", "refusal", "serve_command"]
