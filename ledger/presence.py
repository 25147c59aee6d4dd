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
non-blocking shared ``flock`` on a new descriptor (:mod:`ledger.git.liveness`). Where the file
system has no ``flock`` the entry says ``"lock": false`` and the identity (pid + start time on
this host and boot) decides.

A CLI restore (``rewind restore/undo/fork``) is not a session here: while it runs its restore
journal already proves it (``rewind status``/``doctor`` list the running restores beside the
sessions), and it lasts seconds, so the footer counts Pi sessions only.

Invariants:
- The pure part (:class:`Presence`, :func:`parse_presence`: :mod:`ledger.presence_entry`; the
  wording: :mod:`ledger.session_words`) touches no file; the adapter below it
  (:class:`Announcement`, :func:`live_sessions`, :func:`clean_registry`) only touches files in
  the registry directory, never the work tree or anything of git's.
- An entry exists only while its lock is (or was) held: written after the lock is taken (and the
  owner has checked that the lock's name is still its file), removed before the lock file.
  Writes are whole or absent: a temporary file written in full (a short write is continued, a
  full disk fails the write, the old entry stays) and renamed; unsynced: the registry describes
  running processes, so a crash makes it stale, never wrong.
- Nothing is removed by age (issue 32), only once its owner is provably gone: an entry and its
  lock when the ``flock`` is free, or the identity is gone (a reused pid has another start
  time), also where the lock is held by a descriptor the owner left to another process; a lock
  without an entry when its ``flock`` is free (the remover holds it while it removes: an owner
  that had not locked it yet finds its name gone and takes another); an unreadable entry when
  its lock is free; a temporary when its session is gone; any other file once no live lock
  claims its name (:func:`clean_registry`, run by ``rewind sweep``). What cannot be judged
  (another host, no ``flock`` and no process table) is kept and named.
- A live session is never hidden by a damaged entry: a listing that finds an unreadable or
  missing entry whose lock is held lists the session from its lock and file name, and the owner
  writes its entry again when it finds it damaged (at its next listing or turn).
- Reads are bounded: at most :data:`MAX_ENTRIES` names per listing, :data:`MAX_ENTRY_BYTES` per
  entry. Nothing here runs on the capture path: the bridge lists the registry when a session
  starts and for the footer (at most once a second unless the directory changed).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path

from ledger.git.liveness import (
    Owner,
    boot_id,
    host_name,
    lock_held,
    pid_exists,
    proc_start,
    remove_if_unlocked,
    same_file,
    take_lock,
)
from ledger.git.private import make_private_dir, private_dir
from ledger.plain import Plain

# The pure part (an entry and its JSON) and the wording live apart (re-exported: callers import
# them from here).
from ledger.presence_entry import PRESENCE_VERSION, Kind, Presence, entry_stem, parse_presence
from ledger.session_names import title_of

# The wording of the listings lives with the names (re-exported: callers import it from here).
from ledger.session_words import describe, footer_mark, others_notice, status_line

SESSIONS_DIR_NAME = "sessions"
MAX_ENTRIES = 512
"""Names looked at per listing: far more sessions than one directory ever has."""
MAX_ENTRY_BYTES = 1 << 14
MAX_SWEEP_NAMES = 1 << 16
"""Names :func:`clean_registry` looks at (it removes stray files, so it sees past
:data:`MAX_ENTRIES`)."""
_STEM = r"(\d+)-([A-Za-z0-9_-]{1,64})-([0-9a-f]{6})"
_ENTRY = re.compile(_STEM + r"\.json")
_LOCK = re.compile(_STEM + r"\.lock")
_TEMP = re.compile(r"\." + _STEM + r"\.json\.[0-9a-f]{6}\.tmp")

# --- the file adapter ----------------------------------------------------------------------


def registry_dir(git_dir: Path) -> Path:
    return private_dir(git_dir) / SESSIONS_DIR_NAME


class Announcement:
    """This process's entry for one session: holds the lock until :meth:`withdraw` (or death)."""

    def __init__(self, directory: Path, presence: Presence, lock_fd: int | None) -> None:
        self.directory = directory
        self.presence = presence
        self._lock_fd = lock_fd
        if self.live:
            _OWN[presence.stem] = self

    @property
    def path(self) -> Path:
        return self.directory / f"{self.presence.stem}.json"

    @property
    def lock_path(self) -> Path:
        return self.directory / f"{self.presence.stem}.lock"

    @property
    def live(self) -> bool:
        return self._lock_fd is not None or not self.presence.lock

    def set_busy(self, busy: bool, title: str | None = None) -> None:
        """A turn started or ended (``title``: the session's title now, when known): one atomic
        rewrite on a change, else a repair if damaged."""
        if not self.live:
            return
        title = title_of(title, None) or self.presence.title
        if busy == self.presence.busy and title == self.presence.title:
            self.repair()
            return
        self.presence = self.presence.with_turn(busy, title)
        with contextlib.suppress(OSError):  # stale "busy" is only a word in a listing
            _write(self.path, self.presence)

    def repair(self) -> bool:
        """Write the entry again when it is missing or unreadable (a full disk, a damaged file):
        a live session is never hidden from the listings for good. Whether it is whole now."""
        if not self.live:
            return False
        if _read(self.path, self.presence.stem) is not None:
            return True
        try:
            _write(self.path, self.presence)
        except OSError:
            return False
        return True

    def withdraw(self) -> None:
        """The session is over: the entry goes before its lock file (as a journal's)."""
        _OWN.pop(self.presence.stem, None)
        owned = self._lock_fd is not None and same_file(self._lock_fd, self.lock_path)
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        if owned or self._lock_fd is None:
            with contextlib.suppress(OSError):
                os.unlink(self.lock_path)
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # drops the flock
        self.presence = self.presence.with_lock()  # no longer live (identity too)


_OWN: dict[str, Announcement] = {}
"""This process's live announcements by stem: a listing that finds one of them damaged repairs it."""


def announce(
    git_dir: Path,
    session_id: str,
    session_file: str | None,
    *,
    kind: Kind = "bridge",
    now_ms: int | None = None,
    title: str | None = None,
    pi_pid: int | None = None,
) -> Announcement | None:
    """Announce a session of this process; ``None`` when the registry cannot be written at all
    (a read-only git dir: the session works as before, only unannounced). When only the entry
    cannot be written (a full disk), the lock stays: listings find the session by it, and the
    entry is written again at the next turn or listing (:meth:`Announcement.repair`)."""
    pid = os.getpid()
    try:
        directory = make_private_dir(git_dir, SESSIONS_DIR_NAME)
        # The lock before the entry: no reader ever sees this entry without a live owner.
        stem, fd = _take_own_lock(directory, pid, session_id)
    except OSError:
        return None
    presence = Presence(
        session_id,
        session_file,
        pid,
        proc_start(pid),
        boot_id(),
        host_name(),
        now_ms if now_ms is not None else int(time.time() * 1000),
        kind,
        lock=fd is not None,
        stem=stem,
        title=title_of(title, None),
        pi_pid=pi_pid if pi_pid is not None and pi_pid > 0 else None,
    )
    announcement = Announcement(directory, presence, fd)
    try:
        _write(announcement.path, presence)
    except OSError:
        if fd is None:  # no lock and no entry: nothing could show this session
            announcement.withdraw()
            return None
    return announcement


def _take_own_lock(directory: Path, pid: int, session_id: str) -> tuple[str, int | None]:
    """A new stem and its lock (``None``: no ``flock`` here). Safety: the lock is checked to
    still be at its name once held: a remover that judged it abandoned in the moment between
    its creation and its ``flock`` removed the name, and a lock without a name proves nothing."""
    for _ in range(8):  # os.urandom(n).hex() is secrets.token_hex(n), without its imports
        stem = entry_stem(pid, session_id, os.urandom(3).hex())
        path = directory / f"{stem}.lock"
        fd = take_lock(path)
        if fd is None or same_file(fd, path):
            return stem, fd
        os.close(fd)
    raise OSError(f"cannot keep a lock in {directory}")


def _judge(
    directory: Path, stem: str, has_entry: bool, has_lock: bool
) -> tuple[bool | None, Presence | None, bool]:
    """``(alive, entry, by_identity)`` for one stem. ``alive``: ``True`` (its owner runs),
    ``False`` (provably gone), ``None`` (cannot tell). ``entry``: the entry, or for a live
    session whose entry is unreadable or missing one made from its lock and name (this process's
    own is written again first). ``by_identity``: gone although its lock is held (by a
    descriptor the owner left to another process): its lock's name goes without the ``flock``."""
    json_path, lock_path = directory / f"{stem}.json", directory / f"{stem}.lock"
    entry = _read(json_path, stem) if has_entry else None
    held = lock_held(lock_path) if has_lock else False
    if entry is None and held and stem in _OWN and _OWN[stem].repair():
        entry = _read(json_path, stem)  # ours, damaged: written again
    if entry is not None:
        owner = Owner(entry.pid, entry.pid_start, entry.boot_id, entry.host)
    else:
        owner = Owner(int(stem.split("-", 1)[0]), None, None, host_name())
    # Where no flock can tell (or the entry has none), the identity decides: a reused pid has
    # another start time, another boot's process is gone.
    identity = owner.alive()
    if held is True:
        if identity is False:
            return False, entry, True
        return True, entry or _from_stem(stem, lock_path), False
    if held is False and (entry is None or entry.lock):
        return False, entry, False
    if identity and entry is None:
        entry = _from_stem(stem, lock_path)
    return identity, entry, False


class _Survey(Plain):
    """One look at the registry: the live sessions, and every other file with its verdict."""

    __slots__ = ("gone", "kept", "live", "orphaned", "stray")
    live: list[Presence]
    gone: list[tuple[Path, str]]
    """Removable: owner provably gone, or unreadable with a free lock."""
    stray: list[tuple[Path, str]]
    """Names that are none of ours; removable by the sweep unless a live lock claims them."""
    kept: list[tuple[Path, str]]
    """Cannot be judged: kept, named."""
    orphaned: set[Path]
    """Lock files of owners proven gone by identity whose ``flock`` another process holds:
    removed by name."""

    def __init__(
        self,
        live: list[Presence],
        gone: list[tuple[Path, str]],
        stray: list[tuple[Path, str]],
        kept: list[tuple[Path, str]],
        orphaned: set[Path] | None = None,
    ) -> None:
        self.live = live
        self.gone = gone
        self.stray = stray
        self.kept = kept
        self.orphaned = set() if orphaned is None else orphaned


def _listing(directory: Path, limit: int) -> list[str] | None:
    names: list[str] = []
    try:
        with os.scandir(directory) as listing:
            for item in listing:
                names.append(item.name)
                if len(names) >= limit:
                    break
    except OSError:
        return None
    return names


def _survey(directory: Path, names: list[str]) -> _Survey:
    survey = _Survey([], [], [], [])
    entries = {n[: -len(".json")] for n in names if _ENTRY.fullmatch(n)}
    locks = {n[: -len(".lock")] for n in names if _LOCK.fullmatch(n)}
    verdict: dict[str, bool | None] = {}
    for stem in sorted(entries | locks):
        json_path, lock_path = directory / f"{stem}.json", directory / f"{stem}.lock"
        alive, entry, by_identity = _judge(directory, stem, stem in entries, stem in locks)
        verdict[stem] = alive
        if alive and entry is not None:
            survey.live.append(entry)
        elif alive is None:
            what = "session entry whose owner rewind cannot check here"
            survey.kept += [(p, what) for p in (json_path, lock_path) if p.name in names]
        else:
            what = "session entry of a process that is gone"
            if stem in entries and entry is None:
                what = "unreadable session entry whose lock is free"
            elif stem not in entries:
                what = "session lock without an entry, free"
            survey.gone += [(p, what) for p in (json_path, lock_path) if p.name in names]
            if by_identity and stem in locks:
                survey.orphaned.add(lock_path)
    for name in names:
        if _ENTRY.fullmatch(name) or _LOCK.fullmatch(name):
            continue
        temp = _TEMP.fullmatch(name)
        claimed = name[1:].split(".json.", 1)[0] if temp else _claimed_stem(name)
        alive = verdict[claimed] if claimed in verdict else _stem_held(directory, claimed)
        if alive is False and temp:
            survey.gone.append((directory / name, "temporary of a gone session's entry"))
        elif alive is False and not os.path.isdir(directory / name):
            survey.stray.append((directory / name, "file in the session registry that is not one"))
        elif not alive:  # a directory, or a file of a session that cannot be checked: named
            survey.kept.append((directory / name, "not removed by rewind"))
    survey.live.sort(key=lambda e: (e.started_ms, e.stem))
    return survey


def _claimed_stem(name: str) -> str | None:
    """The stem a stray name may belong to (``<stem>.<anything>``, perhaps with a leading dot)."""
    match = re.match(_STEM, name.lstrip("."))
    return match.group(0) if match else None


def _stem_held(directory: Path, stem: str | None) -> bool | None:
    """Whether the session ``stem`` names runs, for a file of it with no entry beside: its lock
    decides, else (no lock file: a file system without ``flock``) its pid, if gone."""
    if stem is None:
        return False
    lock = directory / f"{stem}.lock"
    if os.path.lexists(lock):
        return lock_held(lock)
    return pid_exists(int(stem.split("-", 1)[0]))


def _from_stem(stem: str, lock_path: Path) -> Presence:
    """A live session whose entry cannot be read, from what its file names say."""
    match = re.fullmatch(_STEM, stem)
    pid, sid = (int(match.group(1)), match.group(2)) if match else (0, stem)
    try:
        started_ms = int(os.lstat(lock_path).st_mtime * 1000)
    except OSError:
        started_ms = 0
    return Presence(sid, None, pid, None, None, host_name(), started_ms, stem=stem, whole=False)


def live_sessions(git_dir: Path, *, clean: bool = True) -> list[Presence]:
    """The live sessions of this work tree, oldest first; dead entries are skipped and, with
    ``clean``, removed (with their lock file and any temporary file of theirs)."""
    directory = registry_dir(git_dir)
    names = _listing(directory, MAX_ENTRIES)
    if names is None:
        return []
    survey = _survey(directory, names)
    if clean:
        _remove(survey.gone, survey.orphaned)
    return survey.live


def registry_leftovers(git_dir: Path) -> list[tuple[Path, str, bool]]:
    """What is in the registry that is no live session: ``(path, what, removable)``, removable
    meaning :func:`clean_registry` removes it (``rewind doctor`` names them)."""
    directory = registry_dir(git_dir)
    survey = _survey(directory, _listing(directory, MAX_SWEEP_NAMES) or [])
    return [
        *((p, w, True) for p, w in survey.gone + survey.stray),
        *((p, w, False) for p, w in survey.kept),
    ]


def clean_registry(git_dir: Path) -> list[tuple[Path, str]]:
    """Remove dead and unreadable entries, free orphan locks, dead temporaries and stray files
    (``rewind sweep``); what was removed."""
    directory = registry_dir(git_dir)
    names = _listing(directory, MAX_SWEEP_NAMES)
    if not names:
        return []
    survey = _survey(directory, names)
    return _remove(survey.gone + survey.stray, survey.orphaned)


def _remove(items: list[tuple[Path, str]], orphaned: set[Path]) -> list[tuple[Path, str]]:
    removed = []
    # Entries before lock files: a reader that finds no lock re-reads no entry.
    for path, what in sorted(items, key=lambda item: item[0].suffix == ".lock"):
        try:
            if path in orphaned:
                os.unlink(path)
            elif path.suffix == ".lock":
                if not remove_if_unlocked(path):
                    continue
            elif os.path.isdir(path) and not os.path.islink(path):
                continue  # a directory is only named
            else:
                os.unlink(path)
        except FileNotFoundError:
            continue
        except OSError:
            continue
        removed.append((path, what))
    return removed


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
    """Whole or not at all: every byte written (a short write, as on a nearly full disk, is
    continued until it fails) and the size checked before the rename."""
    data = json.dumps(presence.to_json(), ensure_ascii=False, sort_keys=True).encode("utf-8")
    tmp = path.with_name(f".{path.name}.{os.urandom(3).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            done = 0
            while done < len(data):
                done += os.write(fd, data[done:])
            if os.fstat(fd).st_size != len(data):
                raise OSError(f"{tmp}: written {os.fstat(fd).st_size} of {len(data)} bytes")
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
    "PRESENCE_VERSION",
    "Announcement",
    "Presence",
    "PresenceView",
    "announce",
    "clean_registry",
    "describe",
    "entry_stem",
    "footer_mark",
    "live_sessions",
    "others_notice",
    "parse_presence",
    "registry_dir",
    "registry_leftovers",
    "status_line",
]
