"""One presence entry, the pure part of the session registry (docs/design.md#sessions-here): what
an entry says (:class:`Presence`), its JSON both ways, its file name's stem.

Why it exists apart from :mod:`ledger.presence`: the registry's file adapter is large on its own
(as :mod:`ledger.session_words`, the wording, is apart). :mod:`ledger.presence` re-exports
everything here; callers import it from there.

Invariants: pure (no file); :func:`parse_presence` refuses anything but a version-1 entry with
the owner fields typed (they pick a /proc file to read), and tolerates odd optional fields.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Literal

from ledger.plain import FrozenPlain
from ledger.session_names import session_label

PRESENCE_VERSION = 1

Kind = Literal["bridge", "hosted"]


class Presence(FrozenPlain):
    """One session's announcement, as written and read."""

    __slots__ = (
        "boot_id",
        "busy",
        "host",
        "kind",
        "lock",
        "pi_pid",
        "pid",
        "pid_start",
        "session_file",
        "session_id",
        "started_ms",
        "stem",
        "title",
        "whole",
    )
    session_id: str
    session_file: str | None
    pid: int
    pid_start: int | None
    boot_id: str | None
    host: str
    started_ms: int
    kind: Kind
    busy: bool
    """A turn is in flight (set at ``turn_start``, cleared at ``agent_end``)."""
    lock: bool
    stem: str
    """The file name without ``.json``: tells entries apart (not written into the file)."""
    whole: bool
    """False: listed from its held lock and file name, its entry being unreadable or missing
    (its owner writes it again); the session file, start time and state are then unknown."""
    title: str | None
    """Pi's session name, else its first prompt's first words (:mod:`ledger.session_names`),
    written by the live session (which knows its entries), so listings read no session file."""
    pi_pid: int | None
    """The Pi process's pid (the bridge's parent, or a hosted session's peer); ``pid`` is the
    process holding the lock (the bridge or the watcher), which liveness is judged by."""

    def __init__(
        self,
        session_id: str,
        session_file: str | None,
        pid: int,
        pid_start: int | None,
        boot_id: str | None,
        host: str,
        started_ms: int,
        kind: Kind = "bridge",
        busy: bool = False,
        lock: bool = True,
        stem: str = "",
        whole: bool = True,
        title: str | None = None,
        pi_pid: int | None = None,
    ) -> None:
        self._init(
            session_id=session_id,
            session_file=session_file,
            pid=pid,
            pid_start=pid_start,
            boot_id=boot_id,
            host=host,
            started_ms=started_ms,
            kind=kind,
            busy=busy,
            lock=lock,
            stem=stem,
            whole=whole,
            title=title,
            pi_pid=pi_pid,
        )

    def with_turn(self, busy: bool, title: str | None) -> Presence:
        """The same announcement, a turn in flight or not, titled ``title`` (what
        :meth:`ledger.presence.Announcement.set_busy` writes)."""
        return self._but(busy, title, self.lock)

    def with_lock(self) -> Presence:
        """The same announcement with ``lock`` true: a withdrawn one, no longer live by its
        identity either (:meth:`ledger.presence.Announcement.withdraw`)."""
        return self._but(self.busy, self.title, True)

    def _but(self, busy: bool, title: str | None, lock: bool) -> Presence:
        return Presence(
            self.session_id,
            self.session_file,
            self.pid,
            self.pid_start,
            self.boot_id,
            self.host,
            self.started_ms,
            self.kind,
            busy,
            lock,
            self.stem,
            self.whole,
            title,
            self.pi_pid,
        )

    @property
    def started(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_ms / 1000))

    @property
    def label(self) -> str:
        """``"fix the login bug" (…7f3a9c2e)`` (:func:`ledger.session_names.session_label`)."""
        return session_label(self.session_id, self.title)

    @property
    def shown_pid(self) -> int:
        """The pid the user knows: Pi's when recorded (entries before issue 33: the bridge's)."""
        return self.pi_pid if self.pi_pid is not None else self.pid

    def to_json(self) -> dict[str, Any]:
        # Compatibility: title and piPid are optional (issue 33); older readers read by key.
        added = {"title": self.title, "piPid": self.pi_pid, "entryUnreadable": not self.whole}
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
        } | {key: value for key, value in added.items() if value not in (None, False)}


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
    # Added later (issue 33), so tolerated when absent or odd: a wrong type is dropped, never fatal.
    title, pi_pid = data.get("title"), data.get("piPid")
    return Presence(
        sid, file, pid, start, boot, host, started, kind, busy, lock, stem,
        title=title if isinstance(title, str) and title else None,
        pi_pid=pi_pid if isinstance(pi_pid, int) and _is_int(pi_pid) and pi_pid > 0 else None,
    )  # fmt: skip


def entry_stem(pid: int, session_id: str, token: str) -> str:
    """``<pid>-<session id>-<token>``: the session id reduced to safe characters (a name, never
    a path), the token keeps two announcements of one pid and session apart."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", session_id)[:64] or "unknown"
    return f"{pid}-{safe}-{token}"


__all__ = ["PRESENCE_VERSION", "Kind", "Presence", "entry_stem", "parse_presence"]
