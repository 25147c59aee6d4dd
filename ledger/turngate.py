"""Never mid-turn: a restore never writes files while another session's agent is in a turn
(docs/design.md#never-mid-turn).

Why it exists: two sessions in one work tree. When session A restores while session B's agent is
running tools, A's restore and B's tools write the same files at once, and B's next turn snapshot
records a mix of both. The presence registry (:mod:`ledger.presence`) says who is busy, but a
word in a file read before acting is a race. This module is the proof: one readers-writer lock
for the work tree, ``<git-dir>/pi-rewind/turns.gate``, held through ``flock``:

- a session's **turn** holds it *shared* from the prompt's start (before its pre-prompt
  capture, so that capture also waits for a restore in progress and records what it changed as
  outside its agent) to ``agent_end``: any number of turns run side by side;
- a **restore** (every one goes through ``Engine.restore_files``) holds it *exclusive* while it
  writes files: it waits for every other turn to end, visibly and cancellably on the command line
  (``timeout_s``, Ctrl-C) or not at all inside Pi (a clear refusal, since a menu cannot wait),
  and then raises :class:`~ledger.errors.OtherTurnRunningError` with nothing changed;
- a turn that starts while a restore writes waits for it (bounded, then runs anyway: a turn is
  never refused).

A session's own turn does not block its own restore: the same descriptor converts its shared
hold to exclusive and back (``flock`` converts in place on one open file description).

Invariants: the kernel drops a dead holder's lock (``kill -9`` included), so a crash never leaves
the gate shut; the gate file is created once, 0600, in the private dir, never removed (removing a
lock file others may hold would split them onto two inodes) and never a lock-file name that a
leftover scan would take for stale. Where the file system has no ``flock`` the gate is open
(as the registry then falls back to identities): rewind behaves as before, no worse. Polling,
never a blocking ``flock``: every wait is bounded and interruptible.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import OtherTurnRunningError
from ledger.git.private import make_private_dir

GATE_NAME = "turns.gate"
TURN_WAIT_S = 120.0
"""How long a turn's start waits for a restore in progress (restores take seconds)."""
POLL_MAX_S = 0.1


class TurnGate:
    """The work tree's turn gate as one holder sees it: a turn (shared) or a restore
    (exclusive); one descriptor per holder, opened on first use."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = Path(git_dir)
        self._fd: int | None = None
        self._shared = False
        self._usable = True

    @property
    def in_turn(self) -> bool:
        return self._shared

    def _open(self) -> int | None:
        if self._fd is not None or not self._usable:
            return self._fd
        try:
            directory = make_private_dir(self.git_dir)
            self._fd = os.open(
                directory / GATE_NAME,
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
        except OSError:
            self._usable = False  # a read-only git dir: no gate, as before it existed
        return self._fd

    def _try(self, mode: int) -> bool | None:
        """One non-blocking attempt: ``True`` taken, ``False`` held by another, ``None`` no
        ``flock`` here (the gate is open)."""
        fd = self._open()
        if fd is None:
            return None
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            self._usable = False
            return None
        return True

    def _wait(
        self, mode: int, timeout_s: float, notify: Callable[[float], None] | None = None
    ) -> bool:
        """Take the gate in ``mode`` within ``timeout_s``; ``notify(timeout_s)`` once when there
        is something to wait for. ``False`` when it stayed held."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        delay = 0.005
        told = False
        while True:
            taken = self._try(mode)
            if taken is None or taken:
                return True
            if time.monotonic() >= deadline:
                return False
            if not told and notify is not None:
                notify(timeout_s)
                told = True
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, POLL_MAX_S)

    # --- a turn ----------------------------------------------------------------------------

    def begin_turn(self, *, timeout_s: float = TURN_WAIT_S) -> bool:
        """A turn starts: hold the gate shared (waiting for a restore in progress, bounded).
        ``False`` when a restore still held it after ``timeout_s`` (the turn runs anyway)."""
        if self._shared:
            return True
        taken = self._wait(fcntl.LOCK_SH, timeout_s)
        self._shared = taken and self._fd is not None
        return taken

    def end_turn(self) -> None:
        """The turn ended (``agent_end``, shutdown, or the session's end)."""
        if self._shared and self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._shared = False

    # --- a restore -------------------------------------------------------------------------

    @contextlib.contextmanager
    def restoring(
        self,
        *,
        timeout_s: float = 0.0,
        notify: Callable[[float], None] | None = None,
        busy: Callable[[], list[tuple[str, int]]] = list,
    ) -> Iterator[None]:
        """Hold the gate exclusive for a restore: wait up to ``timeout_s`` for other sessions'
        turns to end (``notify`` once if it has to wait), else raise
        :class:`OtherTurnRunningError` naming ``busy()`` (the registry's busy sessions)."""
        was_shared = self._shared
        if not self._wait(fcntl.LOCK_EX, timeout_s, notify):
            # A failed conversion may have dropped this session's own shared hold (Linux
            # converts by unlocking first): take it back before saying no.
            if was_shared:
                self._wait(fcntl.LOCK_SH, TURN_WAIT_S)
            raise OtherTurnRunningError(self.git_dir, busy(), waited_s=timeout_s)
        try:
            yield
        finally:
            if was_shared:
                self._wait(fcntl.LOCK_SH, TURN_WAIT_S)  # back to this session's own turn
            elif self._fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Let go of everything (the session ended)."""
        fd, self._fd = self._fd, None
        self._shared = False
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def busy_sessions(git_dir: Path, own_session_id: str | None) -> list[tuple[str, int]]:
    """``(session id, pid)`` of the other live sessions the registry says are in a turn."""
    from ledger.presence import live_sessions

    return [
        (entry.session_id, entry.pid)
        for entry in live_sessions(git_dir)
        if entry.busy and entry.session_id != own_session_id
    ]


@dataclass
class TurnPolicy:
    """How one engine's restores meet other sessions' turns: through its session's own
    :class:`TurnGate` (a Pi session, whose turns hold it) or a gate per restore (the command
    line); waiting ``wait_s`` (0 inside Pi: a refusal; the CLI waits, telling ``notify``)."""

    gate: TurnGate | None = None
    wait_s: float = 0.0
    notify: Callable[[float], None] | None = None

    @contextlib.contextmanager
    def restoring(self, git_dir: Path, own_session_id: str | None) -> Iterator[None]:
        gate = self.gate if self.gate is not None else TurnGate(git_dir)
        try:
            with gate.restoring(
                timeout_s=self.wait_s,
                notify=self.notify,
                busy=lambda: busy_sessions(git_dir, own_session_id),
            ):
                yield
        finally:
            if gate is not self.gate:
                gate.close()


__all__ = ["GATE_NAME", "TURN_WAIT_S", "TurnGate", "TurnPolicy", "busy_sessions"]
