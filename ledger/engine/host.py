"""The engine's view of a session: a small host interface, and the session-file host.

Why it exists: the same engine serves our CLI, which owns the session file while it runs, and a
running agent (Pi through the bridge, or a Python agent), which owns its session and must do
every write itself. The engine only ever asks a host for the session's entries and live leaf,
to append a custom entry, and to create a forked session (a new file, with its own host).

Invariants:
- ``append_custom`` returns the new entry's id, and the entry becomes the host's leaf.
- ``parent_id`` is a request: a running agent appends at its own leaf and may refuse a
  different parent; the file host honours it (that is how ``rewind restore --mode
  conversation`` moves the leaf durably: docs/formats.md#appending-rules,
  docs/design.md#conversation-moves).
- ``session()`` reflects every append made through the host.
- ``create_fork`` returns a :class:`FileHost`: the child file is new, written by us, and open in
  no agent, so the file host is the one that may append to it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from ledger.clock import Clock, IdSource, RandomIds, SystemClock
from ledger.session.model import Session
from ledger.session.store import (
    UNSET,
    ParentRequest,
    SessionAppender,
    create_session_file,
    read_session,
    unreadable_session_error,
)


class SessionHost(Protocol):
    @property
    def session_file(self) -> Path | None:
        """The session's file, when it has one (lineage starts there)."""
        ...

    def session(self) -> Session:
        """All entries of the session, current."""
        ...

    def leaf_id(self) -> str | None:
        """The live leaf (a running agent may have moved it without writing anything)."""
        ...

    def append_custom(
        self, custom_type: str, data: dict[str, Any], *, parent_id: ParentRequest = UNSET
    ) -> str:
        """Append a ``custom`` entry; returns its id."""
        ...

    def create_fork(self, entries: list[dict[str, Any]], *, cwd: str) -> FileHost:
        """Write a new session file whose ``parentSession`` is this session's file, holding
        ``entries``; returns the host of the new session."""
        ...


class FileHost:
    """A session file that we own for the duration of a command (the CLI's host).

    Never use it on a file that a running Pi process has open: Pi keeps its entries in memory
    and would chain its next append off its own leaf (docs/formats.md#who-may-write-a-session-file).
    """

    def __init__(
        self,
        path: Path | str,
        sessions_dir: Path,
        *,
        clock: Clock | None = None,
        ids: IdSource | None = None,
    ) -> None:
        self.path = Path(path)
        self.sessions_dir = sessions_dir
        self.clock = clock or SystemClock()
        self.ids = ids or RandomIds()
        self._appender = SessionAppender(self.path, clock=self.clock, ids=self.ids)
        self._session: Session | None = None
        self._key: tuple[int, int, int] | None = None

    @property
    def session_file(self) -> Path:
        return self.path

    def session(self) -> Session:
        try:
            stat = os.stat(self.path)
        except OSError as exc:  # a deleted or unreadable file: the store's words for it
            raise unreadable_session_error(self.path, exc) from exc
        key = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if self._session is None or key != self._key:
            self._session = read_session(self.path)
            self._key = key
        return self._session

    def leaf_id(self) -> str | None:
        return self.session().leaf_id

    def append_custom(
        self, custom_type: str, data: dict[str, Any], *, parent_id: ParentRequest = UNSET
    ) -> str:
        entry = self._appender.append_custom(custom_type, data, parent_id=parent_id)
        self._session = None
        return str(entry["id"])

    def create_fork(self, entries: list[dict[str, Any]], *, cwd: str) -> FileHost:
        path = create_session_file(
            self.sessions_dir,
            cwd,
            entries,
            parent_session=os.path.realpath(self.path),
            clock=self.clock,
            ids=self.ids,
        )
        return FileHost(path, self.sessions_dir, clock=self.clock, ids=self.ids)
