"""The session host of a running agent, reached through the bridge's calls.

Why it exists: while Pi runs, Pi owns the session file
(docs/formats.md#who-may-write-a-session-file): it keeps its entries in memory, writes the file
lazily (not before the first assistant message, docs/formats.md#when-pi-writes-the-file) and
never re-reads it. So the engine must see the session as Pi sees it and append through
``pi.appendEntry``. This host asks the extension for exactly that, and mirrors the entries
incrementally so that an event costs one small round trip, not a re-read of the session.

Invariants:
- The mirror is append-only, like Pi's ``getEntries()`` within one extension instance; a host
  that reports fewer entries than we hold (a new instance, a reload) resets the mirror.
- ``append_custom`` goes through the host and returns the id Pi gave the entry; a ``parent_id``
  request is ignored: Pi appends at its own leaf (after ``/tree`` that is the new position, which
  is where the engine asks for it).
- The host never creates session files: Pi's ``/fork`` does that itself.
- Facts sent by the host itself (with an event, or with an ``appendEntry`` result: issue 34,
  per prompt) are taken as a ``session`` call's answer only when they start exactly where the
  mirror ends (``from`` equal to the entries held) and are complete (``total`` equal to
  ``from`` plus the entries sent); anything else is ignored and the host is asked, as before.
  So an extension that sends facts never makes the mirror differ from one built by calls.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from ledger.errors import LedgerError
from ledger.session.model import Session
from ledger.session.parse import Entry, ParsedSession
from ledger.session.store import UNSET, ParentRequest

Call = Callable[[str, dict[str, Any]], Any]
"""Send a call to the extension and wait for its result (raises on an error reply)."""


class HostCallError(LedgerError):
    """The extension answered a call with an error, or with something we cannot use."""

    hint = "check the extension's version against the bridge protocol (rewind serve --help)"


class BridgeHost:
    """The engine's :class:`~ledger.engine.host.SessionHost` over the bridge's calls."""

    def __init__(self, call: Call) -> None:
        self._call = call
        self._header: dict[str, Any] = {}
        self._entries: list[Entry] = []
        self._session: Session | None = None
        self._leaf_id: str | None = None
        self._file: str | None = None
        self._fresh = False
        self._appended = False
        self._own: set[str] = set()
        self._watch_from: int | None = None
        self._foreign_seen = 0

    # --- per event --------------------------------------------------------------------------

    def begin_event(
        self,
        session_file: str | None,
        leaf_id: str | None,
        facts: dict[str, Any] | None = None,
    ) -> None:
        """A new event: the facts the host sent with it; entries are fetched on first use,
        unless ``facts`` (the event's ``session``) already bring them."""
        self._file = session_file or self._file
        self._leaf_id = leaf_id
        self._fresh = False
        if facts is not None:
            self.take_facts(facts)

    def take_facts(self, facts: object) -> bool:
        """Take ``facts`` (a ``session`` call's answer plus ``from``, sent without being asked)
        as the current session, if they continue the mirror exactly; True when taken."""
        if not isinstance(facts, dict) or not isinstance(facts.get("entries"), list):
            return False
        start, total = facts.get("from"), facts.get("total")
        held = len(self._entries)
        if type(start) is not int or start != held or type(total) is not int:
            return False
        if total != start + len(facts["entries"]):
            return False  # not the whole rest: ask
        self._take(facts)
        return True

    def _sync(self) -> None:
        if self._fresh:
            return
        answer = self._call("session", {"from": len(self._entries)})
        if not isinstance(answer, dict) or not isinstance(answer.get("entries"), list):
            raise HostCallError("the host's answer to 'session' has no entries list")
        total = answer.get("total")
        if isinstance(total, int) and total < len(self._entries):
            self._entries, self._session = [], None  # a new instance: fetch everything again
            self._watch_from = None
            answer = self._call("session", {"from": 0})
        self._take(answer)

    def _take(self, answer: dict[str, Any]) -> None:
        """Mirror a ``session`` answer (its entries continue the ones held)."""
        header = answer.get("header")
        if isinstance(header, dict):
            self._header = header
        new = [
            item
            for item in answer.get("entries", [])
            if isinstance(item, dict) and isinstance(item.get("id"), str)
        ]
        if new:
            base = len(self._entries)
            self._entries.extend(Entry(obj, base + i + 2) for i, obj in enumerate(new))
            self._session = None
        leaf = answer.get("leafId")
        self._leaf_id = leaf if isinstance(leaf, str) else None
        if isinstance(answer.get("sessionFile"), str):
            self._file = answer["sessionFile"]
        self._fresh = True

    # --- SessionHost ------------------------------------------------------------------------

    @property
    def session_file(self) -> Path | None:
        return Path(self._file) if self._file else None

    def session(self) -> Session:
        self._sync()
        if self._session is None:
            parsed = ParsedSession(
                self._header or {"type": "session", "id": "unknown"}, list(self._entries)
            )
            self._session = Session(parsed, self.session_file)
        return self._session

    def session_for_status(self) -> Session:
        """The mirrored session, fetched again only when it is missing or we appended to it."""
        if self._appended or self._session is None:
            self._appended = False
            return self.session()
        return self._session

    def mirrored(self) -> Session | None:
        """The session as last fetched, never asking the host (``None``: not fetched, or we
        appended to it since)."""
        return None if self._appended else self._session

    def leaf_id(self) -> str | None:
        self._sync()
        return self._leaf_id

    def known_leaf(self) -> str | None:
        """The leaf as last reported (by the event or the last sync), without asking the host."""
        return self._leaf_id

    # --- other writers ----------------------------------------------------------------------

    def watch_writers(self) -> None:
        """From now on, ledger records that we did not append come from another writer."""
        self._sync()
        self._watch_from = len(self._entries)

    def foreign_records(self, custom_types: frozenset[str]) -> list[Entry]:
        """Ledger records appended since :meth:`watch_writers` by someone else (another rewind
        extension in the same agent: pi-rewind-hook, or a second copy of ours)."""
        if self._watch_from is None:
            return []
        self._sync()
        return [
            entry
            for entry in self._entries[self._watch_from :]
            if entry.type == "custom"
            and entry.custom_type in custom_types
            and entry.id not in self._own
        ]

    def append_custom(
        self, custom_type: str, data: dict[str, Any], *, parent_id: ParentRequest = UNSET
    ) -> str:
        answer = self._call("appendEntry", {"customType": custom_type, "data": data})
        entry_id = answer.get("entryId") if isinstance(answer, dict) else None
        if not isinstance(entry_id, str):
            raise HostCallError(
                f"the host did not return the id of the appended {custom_type} entry"
            )
        self._fresh = False  # the entry (and Pi's timestamp for it) comes with the next sync
        self._appended = True
        self._own.add(entry_id)
        # A newer extension sends the session after the append with the answer: no sync then.
        assert isinstance(answer, dict)
        self.take_facts(answer.get("session"))
        return entry_id

    def create_fork(self, entries: list[dict[str, Any]], *, cwd: str) -> NoReturn:
        raise HostCallError("a running agent creates its own forks", hint="use /fork in the agent")

    def select(self, title: str, options: list[str]) -> str | None:
        answer = self._call("select", {"title": title, "options": options})
        choice = answer.get("choice") if isinstance(answer, dict) else None
        return choice if isinstance(choice, str) and choice in options else None
