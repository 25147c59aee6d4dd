"""Never mid-turn: a restore never writes files while another session's agent is in a turn
(docs/design.md#never-mid-turn).

Why it exists: two sessions in one work tree. When session A restores while session B's agent is
running tools, A's restore and B's tools write the same files at once, and B's next turn snapshot
records a mix of both. The presence registry (:mod:`ledger.presence`) says who is busy, but a
word in a file read before acting is a race. This module is the proof: one readers-writer lock
per git directory, ``<git-dir>/pi-rewind/turns.gate``, held through ``flock``:

- a session's **turn** holds it *shared* from the prompt's start (before its pre-prompt
  capture, so that capture also waits for a restore in progress and records what it changed as
  outside its agent) to ``agent_end``: any number of turns run side by side;
- a **restore** (every one goes through ``Engine.restore_files``) holds it *exclusive* while it
  writes files: it waits for every other turn to end, visibly and cancellably on the command line
  (``timeout_s``, Ctrl-C) or not at all inside Pi (a clear refusal, since a menu cannot wait),
  and then raises :class:`~ledger.gate_errors.OtherTurnRunningError` with nothing changed (or
  :class:`~ledger.errors.OtherRestoreRunningError` when another restore holds it);
- a turn that starts while a restore writes waits for it (bounded, then runs anyway: a turn is
  never refused).

**Nested work trees** (docs/shadow.md#nested-directories): shadows of ``scratch`` and
``scratch/sub`` share the files under ``sub/``. Turns and restores alike hold the gates of their
whole scope (:mod:`ledger.work_tree_scope`: this git directory and every overlapping shadow's),
shared or exclusive, so a turn and a restore of overlapping trees always meet on at least one
gate: whichever of the two listed the shadows later saw the other's (a shadow exists before its
first turn or restore). Gates are taken in one global order (sorted by path), each attempt
all-or-nothing and polled: nobody holds part of a scope while waiting for the rest, so two
restores never deadlock and a waiting restore never blocks other sessions' turns.

A session's own turn does not block its own restore: the same descriptors convert its shared
holds to exclusive and back (``flock`` converts in place on one open file description).

A restore writes who it is (pid, process start time, session) into each gate file it holds and
clears it before letting go: a process that finds the gate held exclusively names that restore
instead of an unknown turn. The record is words only; the lock is the proof.

Invariants: the kernel drops a dead holder's lock (``kill -9`` included), so a crash never leaves
the gate shut (a record it leaves names a dead process and is ignored); the gate file is created
once, 0600, in the private dir, never removed (removing a lock file others may hold would split
them onto two inodes) and never a lock-file name that a leftover scan would take for stale.
Where the file system has no ``flock`` the gate is open (as the registry then falls back to
identities): rewind behaves as before, no worse. Polling, never a blocking ``flock``: every wait
is bounded and interruptible.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ledger.gate_errors import OtherRestoreRunningError, OtherTurnRunningError
from ledger.git.private import make_private_dir, private_dir
from ledger.plain import FrozenPlain, Plain
from ledger.session_names import session_label
from ledger.work_tree_scope import Member, gate_order, live_here, root_of, scope, where

GATE_NAME = "turns.gate"
TURN_WAIT_S = 120.0
"""How long a turn's start waits for a restore in progress (restores take seconds)."""
POLL_MAX_S = 0.1
MAX_HOLDER_BYTES = 4096


# --- who holds a gate ---------------------------------------------------------------------------


class BusySession(FrozenPlain):
    """Another live session whose turn is in flight (the registry's word)."""

    __slots__ = ("pid", "session_id", "title", "where")
    session_id: str
    pid: int
    """The Pi process's (as its presence entry records it; older entries: its bridge's)."""
    where: str | None
    """Its directory when it works in a nested or enclosing one (not this work tree's own)."""
    title: str | None
    """Its name or first prompt's words (:mod:`ledger.session_names`), from its entry."""

    def __init__(
        self, session_id: str, pid: int, where: str | None = None, title: str | None = None
    ) -> None:
        self._init(session_id=session_id, pid=pid, where=where, title=title)


class GateHolder(FrozenPlain):
    """The restore that holds a gate exclusively, as it wrote itself into the gate file."""

    __slots__ = ("boot_id", "host", "pid", "pid_start", "root", "session_id", "started_ms")
    pid: int
    pid_start: int | None
    boot_id: str | None
    host: str
    session_id: str | None
    started_ms: int
    root: str | None
    """The work tree it restores (a gate of a nested scope may be another directory's)."""

    def __init__(
        self,
        pid: int,
        pid_start: int | None,
        boot_id: str | None,
        host: str,
        session_id: str | None,
        started_ms: int,
        root: str | None = None,
    ) -> None:
        self._init(
            pid=pid,
            pid_start=pid_start,
            boot_id=boot_id,
            host=host,
            session_id=session_id,
            started_ms=started_ms,
            root=root,
        )

    @classmethod
    def this_process(cls, session_id: str | None, root: Path | None) -> GateHolder:
        from ledger.git.restore.journal import boot_id, proc_start

        pid = os.getpid()
        return cls(
            pid,
            proc_start(pid),
            boot_id(),
            socket.gethostname(),
            session_id,
            int(time.time() * 1000),
            str(root) if root is not None else None,
        )

    def to_bytes(self) -> bytes:
        data = {
            "pid": self.pid,
            "pidStart": self.pid_start,
            "bootId": self.boot_id,
            "host": self.host,
            "sessionId": self.session_id,
            "startedMs": self.started_ms,
            "root": self.root,
        }
        return json.dumps(data, sort_keys=True).encode("utf-8")

    @classmethod
    def parse(cls, raw: bytes) -> GateHolder | None:
        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(data, dict):
            return None
        pid, start, boot = data.get("pid"), data.get("pidStart"), data.get("bootId")
        host, sid, started = data.get("host"), data.get("sessionId"), data.get("startedMs")
        root = data.get("root")
        # The pid picks a /proc file to read: a plain integer, or nothing.
        if type(pid) is not int or pid <= 0 or type(started) is not int:
            return None
        if not isinstance(host, str) or (start is not None and type(start) is not int):
            return None
        if any(v is not None and not isinstance(v, str) for v in (boot, sid, root)):
            return None
        return cls(pid, start, boot, host, sid, started, root)

    def alive(self) -> bool:
        """Whether the process that wrote this still runs (a ``kill -9`` leaves its record)."""
        from ledger.git.restore.journal import boot_id, proc_start

        if self.pid_start is None or self.boot_id is None:
            return True  # no process table where it ran: the exclusive hold is the only proof
        if self.host != socket.gethostname() or self.boot_id != boot_id():
            return False
        return proc_start(self.pid) == self.pid_start  # a reused pid has another start time

    @property
    def started(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_ms / 1000))

    def words(self) -> str:
        """``pid N, session …7f3a9c2e, started …`` (the id's random tail, never its prefix)."""
        session = f", session {session_label(self.session_id)}" if self.session_id else ""
        return f"pid {self.pid}{session}, started {self.started}"


def _open_gate(git_dir: Path) -> int | None:
    """A new read-only descriptor on ``git_dir``'s gate (never through a symlink, never
    blocking on a FIFO put there), or None when there is none."""
    try:
        return os.open(
            private_dir(git_dir) / GATE_NAME,
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
        )
    except OSError:
        return None


def read_holder(git_dir: Path) -> GateHolder | None:
    """The live restore recorded in ``git_dir``'s gate, if any (bounded read, no lock taken)."""
    fd = _open_gate(git_dir)
    if fd is None:
        return None
    try:
        raw = os.pread(fd, MAX_HOLDER_BYTES, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    holder = GateHolder.parse(raw) if raw else None
    if holder is None or not holder.alive():
        return None
    # The exclusive flock is the proof: a restore writes its record after taking it and clears
    # it before letting go, so a record on a gate nobody holds exclusively is a killed
    # restore's (also where no process table can judge the identity: REWIND_PORTABLE=1, macOS).
    return holder if held_exclusive(git_dir) else None


def held_exclusive(git_dir: Path) -> bool:
    """Whether some process holds ``git_dir``'s gate exclusively (a restore), not only shared
    (turns): one non-blocking shared ``flock`` on a new descriptor, released at once."""
    fd = _open_gate(git_dir)
    if fd is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)  # drops the probe's hold
    return False


class Blocker(FrozenPlain):
    """What a failed attempt on the gates met: a restore (by its record), or turns (by the
    registry's words, which may name nobody: the hold is proof enough)."""

    __slots__ = ("member", "restore", "turns")
    member: Member
    restore: GateHolder | None
    turns: tuple[BusySession, ...]

    def __init__(
        self, member: Member, restore: GateHolder | None, turns: tuple[BusySession, ...] = ()
    ) -> None:
        self._init(member=member, restore=restore, turns=turns)

    def who(self) -> str:
        """``a turn of session 01a2… (pid N)`` / ``another restore (pid N, …)``."""
        if self.restore is not None:
            return f"another restore ({self.restore.words()})"
        if self.turns:
            return f"a turn of {named(self.turns)}"
        return "another session's turn"


def named(sessions: Sequence[BusySession]) -> str:
    return ", ".join(
        f"session {session_label(s.session_id, s.title)} "
        f"(pid {s.pid}{f', working in {s.where}' if s.where else ''})"
        for s in sessions
    )


def busy_here(git_dir: Path, own_session_id: str | None) -> list[BusySession]:
    """The other live sessions of this work tree's scope (nested shadows included) that the
    registries say are in a turn."""
    return [
        BusySession(entry.session_id, entry.shown_pid, where(member), entry.title)
        for entry, member in live_here(git_dir)
        if entry.busy and entry.session_id != own_session_id
    ]


def busy_sessions(git_dir: Path, own_session_id: str | None) -> list[tuple[str, int]]:
    """``(session id, pid)`` of the other live sessions the registries of this work tree's
    scope say are in a turn."""
    return [(s.session_id, s.pid) for s in busy_here(git_dir, own_session_id)]


# --- one gate file ------------------------------------------------------------------------------


class _Lock:
    """One git directory's gate file as this holder sees it: one descriptor, opened on use."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self.fd: int | None = None
        self.usable = True

    def open(self) -> int | None:
        if self.fd is not None or not self.usable:
            return self.fd
        try:
            # Never creates a git directory (a shadow removed meanwhile): only our private dir.
            directory = make_private_dir(self.git_dir)
            self.fd = os.open(
                directory / GATE_NAME,
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
        except OSError:
            self.usable = False  # a read-only git dir: no gate, as before it existed
        return self.fd

    def attempt(self, mode: int) -> bool | None:
        """One non-blocking attempt: ``True`` taken, ``False`` held by another, ``None`` no
        ``flock`` here (the gate is open)."""
        fd = self.open()
        if fd is None:
            return None
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            self.usable = False
            return None
        return True

    def wait(self, mode: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + max(0.0, timeout_s)
        delay = 0.005
        while True:
            taken = self.attempt(mode)
            if taken is None or taken:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, POLL_MAX_S)

    def unlock(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)

    def record(self, holder: GateHolder | None) -> None:
        """Write (or, with None, clear) who holds this gate exclusively: words only."""
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
            if holder is not None:
                os.pwrite(self.fd, holder.to_bytes(), 0)

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


# --- the gate of a work tree --------------------------------------------------------------------


class TurnGate:
    """The turn gate of a work tree (all the gates of its scope) as one holder sees it: a turn
    (shared) or a restore (exclusive); one descriptor per gate file, opened on first use."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = Path(git_dir)
        self._locks: dict[Path, _Lock] = {}
        self._shared: list[Path] = []
        """The gates this session's turn holds shared."""
        self.blocker: Blocker | None = None
        """What the last attempt that had to wait met (the words of the wait and the error)."""

    @property
    def in_turn(self) -> bool:
        return bool(self._shared)

    def _lock(self, git_dir: Path) -> _Lock:
        found = self._locks.get(git_dir)
        if found is None:
            found = self._locks[git_dir] = _Lock(git_dir)
        return found

    def _back(self, git_dir: Path, shared: bool) -> None:
        """After an exclusive hold (or a failed attempt at one): back to this session's turn's
        shared hold, or let go."""
        lock = self._lock(git_dir)
        if shared:
            lock.wait(fcntl.LOCK_SH, TURN_WAIT_S)  # back to this session's own turn
        else:
            lock.unlock()

    def _take_all(
        self,
        mode: int,
        timeout_s: float,
        notify: Callable[[float], None] | None,
        busy: Callable[[], Sequence[BusySession]],
    ) -> list[Path] | None:
        """Hold every gate of the scope in ``mode`` within ``timeout_s`` (all or nothing, in
        the global order); the gates actually held (where ``flock`` works), or None when one
        stayed held by another (:attr:`blocker` says by whom). ``notify(timeout_s)`` once when
        there is something to wait for."""
        members = gate_order(scope(self.git_dir))
        shared = set(self._shared)
        deadline = time.monotonic() + max(0.0, timeout_s)
        delay = 0.005
        told = False
        while True:
            taken: list[Path] = []
            failed: Member | None = None
            for member in members:
                result = self._lock(member.git_dir).attempt(mode)
                if result is False:
                    failed = member
                    break
                if result:
                    taken.append(member.git_dir)
            if failed is None:
                self.blocker = None
                return taken
            # All or nothing: nothing of the scope stays held while waiting for the rest (a
            # waiting restore must not shut out other turns), except this session's own turn's
            # shared holds (a failed conversion may have dropped one: Linux converts by
            # unlocking first).
            for git_dir in [*taken, failed.git_dir]:
                self._back(git_dir, git_dir in shared)
            last = time.monotonic() >= deadline
            if last or (not told and notify is not None):
                self.blocker = self._describe(failed, busy)
            if last:
                return None
            if not told and notify is not None:
                notify(timeout_s)
                told = True
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, POLL_MAX_S)

    def _describe(self, member: Member, busy: Callable[[], Sequence[BusySession]]) -> Blocker:
        restore: GateHolder | None = None
        if held_exclusive(member.git_dir):
            restore = read_holder(member.git_dir)
            if restore is None:
                time.sleep(0.05)  # it may have taken the gate a moment ago: its record follows
                restore = read_holder(member.git_dir)
        if restore is not None:
            return Blocker(member, restore)
        return Blocker(member, None, tuple(busy()))

    def words(self) -> str:
        """What the gate waits for, in words (``another session's turn`` when unknown)."""
        return self.blocker.who() if self.blocker is not None else "another session's turn"

    # --- a turn ----------------------------------------------------------------------------

    def begin_turn(self, *, timeout_s: float = TURN_WAIT_S) -> bool:
        """A turn starts: hold the gates shared (waiting for a restore in progress, bounded).
        ``False`` when a restore still held one after ``timeout_s`` (the turn runs anyway)."""
        if self._shared:
            return True
        taken = self._take_all(fcntl.LOCK_SH, timeout_s, None, list)
        self._shared = taken or []
        return taken is not None

    def end_turn(self) -> None:
        """The turn ended (``agent_end``, shutdown, or the session's end)."""
        shared, self._shared = self._shared, []
        for git_dir in shared:
            self._lock(git_dir).unlock()

    # --- a restore -------------------------------------------------------------------------

    @contextlib.contextmanager
    def restoring(
        self,
        *,
        timeout_s: float = 0.0,
        notify: Callable[[float], None] | None = None,
        busy: Callable[[], Sequence[BusySession]] = list,
        session_id: str | None = None,
    ) -> Iterator[None]:
        """Hold the gates exclusive for a restore: wait up to ``timeout_s`` for other sessions'
        turns and restores to end (``notify`` once if it has to wait), else raise
        :class:`OtherRestoreRunningError` (another restore holds one) or
        :class:`OtherTurnRunningError` naming ``busy()`` (the registries' busy sessions).
        ``session_id``: this restore's session, for the record others read."""
        taken = self._take_all(fcntl.LOCK_EX, timeout_s, notify, busy)
        if taken is None:
            raise self._refusal(timeout_s)
        holder = GateHolder.this_process(session_id, root_of(self.git_dir))
        shared = set(self._shared)
        for git_dir in taken:
            self._lock(git_dir).record(holder)
        try:
            yield
        finally:
            for git_dir in taken:
                self._lock(git_dir).record(None)  # cleared before letting go
                self._back(git_dir, git_dir in shared)

    def _refusal(self, waited_s: float) -> OtherTurnRunningError:
        blocker = self.blocker
        here = root_of(self.git_dir) or self.git_dir
        if blocker is not None and blocker.restore is not None:
            r = blocker.restore
            return OtherRestoreRunningError(
                here,
                r.pid,
                session_id=r.session_id,
                started=r.started,
                where=r.root if r.root is not None and r.root != str(here) else None,
                waited_s=waited_s,
            )
        turns = blocker.turns if blocker is not None else ()
        return OtherTurnRunningError(
            here,
            [(s.session_id, s.pid) for s in turns],
            waited_s=waited_s,
            places={s.session_id: s.where for s in turns if s.where},
            titles={s.session_id: s.title for s in turns if s.title},
        )

    def close(self) -> None:
        """Let go of everything (the session ended)."""
        self._shared = []
        locks, self._locks = self._locks, {}
        for lock in locks.values():
            lock.close()


class TurnPolicy(Plain):
    """How one engine's restores meet other sessions' turns: through its session's own
    :class:`TurnGate` (a Pi session, whose turns hold it) or a gate per restore (the command
    line); waiting ``wait_s`` (0 inside Pi: a refusal; the CLI waits, telling ``notify`` how
    long and what it waits for, e.g. ``a turn of session 01a2… (pid N)``)."""

    __slots__ = ("gate", "notify", "wait_s")
    gate: TurnGate | None
    wait_s: float
    notify: Callable[[float, str], None] | None

    def __init__(
        self,
        gate: TurnGate | None = None,
        wait_s: float = 0.0,
        notify: Callable[[float, str], None] | None = None,
    ) -> None:
        self.gate = gate
        self.wait_s = wait_s
        self.notify = notify

    @contextlib.contextmanager
    def restoring(self, git_dir: Path, own_session_id: str | None) -> Iterator[None]:
        gate = self.gate if self.gate is not None else TurnGate(git_dir)
        tell = self.notify

        def told(timeout_s: float) -> None:
            if tell is not None:
                tell(timeout_s, gate.words())

        try:
            with gate.restoring(
                timeout_s=self.wait_s,
                notify=told if tell is not None else None,
                busy=lambda: busy_here(git_dir, own_session_id),
                session_id=own_session_id,
            ):
                yield
        finally:
            if gate is not self.gate:
                gate.close()


__all__ = [
    "GATE_NAME",
    "TURN_WAIT_S",
    "Blocker",
    "BusySession",
    "GateHolder",
    "TurnGate",
    "TurnPolicy",
    "busy_here",
    "busy_sessions",
    "held_exclusive",
    "read_holder",
]
