"""Who is here: the live Pi sessions of one work tree (docs/design.md#sessions-here).

Why it exists: two Pi sessions in one directory each record their own agent's files, but a
restore in one overwrites whatever the other's agent wrote meanwhile, and neither knew the other
existed. Each live session (a bridge of its own, or one hosted by the watcher) therefore
announces itself in the private directory, and every session, ``rewind status`` and ``rewind
doctor`` can list the others.

The registry: ``<git-dir>/pi-rewind/sessions/<pid>-<session-id>-<token>.json`` (session id,
session file, pid, the process's start time, the boot id, the host, when it started, whether a
turn is in flight) next to ``<same stem>.lock``. Liveness is proven exactly as a restore
journal's (:mod:`ledger.git.restore.journal`): the owner takes an exclusive ``flock`` on the lock file
*before* the entry is first written and holds it for the session's life; the kernel drops it
when the process dies (also on ``kill -9``), and a reused pid cannot hold it. A probe is one
non-blocking shared ``flock`` on a new descriptor. Where the file system has no ``flock`` the
entry says ``"lock": false`` and the identity (pid + start time on this host and boot) decides.

A CLI restore (``rewind restore/undo/fork``) is not a session here: while it runs its restore
journal already proves it (``rewind status``/``doctor`` list the running restores beside the
sessions), and it lasts seconds, so the footer counts Pi sessions only.

Invariants:
- The pure part (:class:`Presence`, :func:`parse_presence`, the wording) touches no file; the
  adapter below it (:class:`Announcement`, :func:`live_sessions`) only touches files in the
  registry directory, never the work tree or anything of git's.
- An entry exists only while its lock is (or was) held: written after the lock is taken,
  removed before the lock file. Rewrites are atomic (temporary file, rename) and unsynced: the
  registry describes running processes, so a crash makes it stale, never wrong (dead entries are
  ignored).
- Dead entries (lock free, or identity gone) are ignored and removed by whoever lists the
  registry; a lock file without an entry is removed only when old (its owner may be between
  taking the lock and writing the entry).
- Reads are bounded: at most :data:`MAX_ENTRIES` names per listing, :data:`MAX_ENTRY_BYTES` per
  entry. Nothing here runs on the capture path: the bridge lists the registry when a session
  starts and for the footer (at most once a second unless the directory changed).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ledger.git.private import make_private_dir, private_dir
from ledger.git.restore.journal import boot_id, lock_held, proc_start, take_lock

PRESENCE_VERSION = 1
SESSIONS_DIR_NAME = "sessions"
MAX_ENTRIES = 512
"""Names looked at per listing: far more sessions than one directory ever has."""
MAX_ENTRY_BYTES = 1 << 14
ORPHAN_LOCK_S = 60.0
"""A lock file with no entry is removed once this old and free (see the module docstring)."""

Kind = Literal["bridge", "hosted"]

# --- the pure part -------------------------------------------------------------------------


@dataclass(frozen=True)
class Presence:
    """One session's announcement, as written and read."""

    session_id: str
    session_file: str | None
    pid: int
    pid_start: int | None
    boot_id: str | None
    host: str
    started_ms: int
    kind: Kind = "bridge"
    busy: bool = False
    """A turn is in flight (set at ``turn_start``, cleared at ``agent_end``)."""
    lock: bool = True
    stem: str = ""
    """The file name without ``.json``: tells entries apart (not written into the file)."""

    @property
    def started(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_ms / 1000))

    @property
    def short_id(self) -> str:
        return self.session_id[:8] + ("…" if len(self.session_id) > 8 else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "version": PRESENCE_VERSION,
            "sessionId": self.session_id,
            "sessionFile": self.session_file,
            "pid": self.pid,
            "pidStart": self.pid_start,
            "bootId": self.boot_id,
            "host": self.host,
            "startedMs": self.started_ms,
            "started": self.started,
            "kind": self.kind,
            "busy": self.busy,
            "lock": self.lock,
        }


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_presence(raw: bytes, stem: str) -> Presence:
    """An entry's bytes as a :class:`Presence`; ``ValueError`` when it is not one."""
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict) or data.get("version") != PRESENCE_VERSION:
        raise ValueError("not a version-1 presence entry")
    sid, file, pid, start = (data.get(k) for k in ("sessionId", "sessionFile", "pid", "pidStart"))
    boot, host, started = data.get("bootId"), data.get("host"), data.get("startedMs")
    kind, busy, lock = data.get("kind", "bridge"), data.get("busy", False), data.get("lock", True)
    # The owner fields pick a /proc file to read: integers and plain strings, or nothing.
    if not isinstance(sid, str) or not isinstance(pid, int) or not isinstance(started, int):
        raise ValueError("the session id, pid or start time is missing")
    if isinstance(pid, bool) or isinstance(started, bool):
        raise ValueError("the pid or start time is not a number")
    if file is not None and not isinstance(file, str):
        raise ValueError("the session file is not a string")
    if start is not None and not _is_int(start):
        raise ValueError("the process start time is not a number")
    if (boot is not None and not isinstance(boot, str)) or not isinstance(host, str):
        raise ValueError("the boot id or host is not a string")
    if kind not in ("bridge", "hosted") or not isinstance(busy, bool) or not isinstance(lock, bool):
        raise ValueError("kind, busy or lock has the wrong type")
    return Presence(sid, file, pid, start, boot, host, started, kind, busy, lock, stem)


def entry_stem(pid: int, session_id: str, token: str) -> str:
    """``<pid>-<session id>-<token>``: the session id reduced to safe characters (a name, never
    a path), the token keeps two announcements of one pid and session apart."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", session_id)[:64] or "unknown"
    return f"{pid}-{safe}-{token}"


def footer_mark(count: int) -> str:
    """What the footer gains while ``count`` (this one included) sessions are live here."""
    return f" · {count} sessions here" if count >= 2 else ""


def describe(entry: Presence) -> str:
    """``session 01a2…, pid N, started …``"""
    return f"session {entry.short_id}, pid {entry.pid}, started {entry.started}"


def others_notice(others: list[Presence]) -> str:
    """The notice a session shows once per other live session it learns of."""
    if len(others) == 1:
        who = f"another Pi session works in this directory too ({describe(others[0])})"
    else:
        listed = "; ".join(describe(o) for o in others)
        who = f"{len(others)} other Pi sessions work in this directory too ({listed})"
    return f"Rewind: {who}; a restore in one overwrites what the other's agent writes"


def status_line(entry: Presence, *, own: bool = False) -> str:
    """One session in ``rewind status`` / ``rewind doctor``."""
    where = f" ({entry.session_file})" if entry.session_file else ""
    state = "in a turn" if entry.busy else "idle"
    hosted = ", hosted by the watcher" if entry.kind == "hosted" else ""
    return f"  {describe(entry)}{hosted}, {state}{' (this one)' if own else ''}{where}"


# --- the file adapter ----------------------------------------------------------------------


def registry_dir(git_dir: Path) -> Path:
    return private_dir(git_dir) / SESSIONS_DIR_NAME


class Announcement:
    """This process's entry for one session: holds the lock until :meth:`withdraw` (or death)."""

    def __init__(self, directory: Path, presence: Presence, lock_fd: int | None) -> None:
        self.directory = directory
        self.presence = presence
        self._lock_fd = lock_fd

    @property
    def path(self) -> Path:
        return self.directory / f"{self.presence.stem}.json"

    @property
    def lock_path(self) -> Path:
        return self.directory / f"{self.presence.stem}.lock"

    @property
    def live(self) -> bool:
        return self._lock_fd is not None or not self.presence.lock

    def set_busy(self, busy: bool) -> None:
        """A turn started or the agent ended: one small atomic rewrite, only on a change."""
        if busy == self.presence.busy or not self.live:
            return
        self.presence = replace(self.presence, busy=busy)
        with contextlib.suppress(OSError):  # stale "busy" is only a word in a listing
            _write(self.path, self.presence)

    def withdraw(self) -> None:
        """The session is over: the entry goes before its lock file (as a journal's)."""
        for path in (self.path, self.lock_path):
            with contextlib.suppress(OSError):
                os.unlink(path)
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # drops the flock
        self.presence = replace(self.presence, lock=True)  # no longer live (identity too)


def announce(
    git_dir: Path,
    session_id: str,
    session_file: str | None,
    *,
    kind: Kind = "bridge",
    now_ms: int | None = None,
) -> Announcement | None:
    """Announce a session of this process; ``None`` when the registry cannot be written (a full
    disk or a read-only git dir: the session works as before, only unannounced)."""
    pid = os.getpid()
    stem = entry_stem(pid, session_id, secrets.token_hex(3))
    presence = Presence(
        session_id,
        session_file,
        pid,
        proc_start(pid),
        boot_id(),
        socket.gethostname(),
        now_ms if now_ms is not None else int(time.time() * 1000),
        kind,
        stem=stem,
    )
    try:
        directory = make_private_dir(git_dir, SESSIONS_DIR_NAME)
        # The lock before the entry: no reader ever sees this entry without a live owner.
        fd = take_lock(directory / f"{stem}.lock")
        presence = replace(presence, lock=fd is not None)
        announcement = Announcement(directory, presence, fd)
    except OSError:
        return None
    try:
        _write(announcement.path, presence)
    except OSError:
        announcement.withdraw()
        return None
    return announcement


def _alive(entry: Presence, lock_path: Path) -> bool:
    if entry.lock:
        held = lock_held(lock_path)
        if held is not None:
            return held
    if entry.pid_start is None or entry.boot_id is None or entry.pid <= 0:
        return False
    # Another host's pids mean nothing here; another boot's process is gone.
    if entry.host != socket.gethostname() or entry.boot_id != boot_id():
        return False
    return proc_start(entry.pid) == entry.pid_start  # a reused pid has another start time


def live_sessions(git_dir: Path, *, clean: bool = True) -> list[Presence]:
    """The live sessions of this work tree, oldest first; dead entries are skipped and, with
    ``clean``, removed (with their lock file and any temporary file of theirs)."""
    directory = registry_dir(git_dir)
    names: list[str] = []
    try:
        with os.scandir(directory) as listing:
            for item in listing:
                names.append(item.name)
                if len(names) >= MAX_ENTRIES:
                    break
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError:
        return []
    entries = {n[: -len(".json")] for n in names if n.endswith(".json") and n[0] != "."}
    found: list[Presence] = []
    dead: set[str] = set()
    for stem in sorted(entries):
        entry = _read(directory / f"{stem}.json", stem)
        if entry is None:
            # Unreadable: dead if its lock is free (a live owner always wrote it whole).
            if lock_held(directory / f"{stem}.lock") is False:
                dead.add(stem)
            continue
        if _alive(entry, directory / f"{stem}.lock"):
            found.append(entry)
        else:
            dead.add(stem)
    if clean:
        _clean(directory, names, entries, dead)
    found.sort(key=lambda e: (e.started_ms, e.stem))
    return found


def _clean(directory: Path, names: list[str], entries: set[str], dead: set[str]) -> None:
    now = time.time()
    for stem in dead:
        # The entry before the lock file: a reader that finds no lock re-reads no entry.
        for suffix in (".json", ".lock"):
            with contextlib.suppress(OSError):
                os.unlink(directory / f"{stem}{suffix}")
    for name in names:
        path = directory / name
        if name.startswith(".") and name.endswith(".tmp"):
            if name[1:].split(".json.", 1)[0] in dead:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        elif name.endswith(".lock") and name[: -len(".lock")] not in entries:
            with contextlib.suppress(OSError):
                if now - os.lstat(path).st_mtime >= ORPHAN_LOCK_S and lock_held(path) is False:
                    os.unlink(path)


def _read(path: Path, stem: str) -> Presence | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.read(fd, MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(raw) > MAX_ENTRY_BYTES:
        return None
    try:
        return parse_presence(raw, stem)
    except (ValueError, UnicodeDecodeError):
        return None


def _write(path: Path, presence: Presence) -> None:
    data = json.dumps(presence.to_json(), ensure_ascii=False, sort_keys=True).encode("utf-8")
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(3)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class PresenceView:
    """The bridge's cached view of the registry for its footer: listed again when the
    directory changed (a session came or went) or after :data:`TTL_S` (a process died)."""

    TTL_S = 1.0

    def __init__(self) -> None:
        self._key: tuple[str, int] | None = None
        self._at = 0.0
        self._live: list[Presence] = []

    def live(self, git_dir: Path) -> list[Presence]:
        directory = registry_dir(git_dir)
        try:
            mtime = os.stat(directory).st_mtime_ns
        except OSError:
            mtime = 0
        key = (str(directory), mtime)
        now = time.monotonic()
        if key != self._key or now - self._at >= self.TTL_S:
            self._live = live_sessions(git_dir)
            # The listing may have removed dead entries: key on the directory as it is now.
            with contextlib.suppress(OSError):
                key = (str(directory), os.stat(directory).st_mtime_ns)
            self._key, self._at = key, now
        return self._live


__all__ = [
    "Announcement",
    "Presence",
    "PresenceView",
    "announce",
    "describe",
    "entry_stem",
    "footer_mark",
    "live_sessions",
    "others_notice",
    "parse_presence",
    "registry_dir",
    "status_line",
]
