"""Whose work each file a rewind would change holds now: one lookup per path in the authorship
index (docs/authorship.md, docs/design.md#attribution).

Why it exists: a plan (a restore, an undo, a ``/rewind`` preview, a ``/tree`` or ``/fork`` menu)
names the user's own work and other sessions' agents' work among the files it would overwrite
or delete, and nothing else. The answer comes from :mod:`ledger.authorship` (written as work
happens by :mod:`ledger.engine.authorship_log`), asked with this conversation's lineage:

- **this conversation's agent** (any branch, and the turns a fork copied from its parent): not
  named;
- **a rewind** put the content there: not named;
- **another session's agent**: named with that session (:class:`~ledger.engine.neighbours.Neighbour`:
  its title and id tail, running / in a turn / ended; the session this one was forked from is
  named as such);
- **the user** (found by a capture, or not recorded at all: it appeared since the last
  capture): named, with ``since``, the prompt whose point first kept it.

A session recording into a nested or enclosing shadow (its own repository and index) is still
asked the old way, by its agent steps (:mod:`ledger.engine.neighbours`).

Invariants: read-only; one index read per :class:`Attribution` (sparse for a small plan in a
fresh process); the cost is O(changed paths), whatever the history's length or the number of
sessions.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ledger.authorship.model import Attribution as Verdict_
from ledger.authorship.model import AuthorshipIndex, Key, Lineage, Record, absent
from ledger.clock import ms_from_iso
from ledger.errors import LedgerError
from ledger.git.trees import Change
from ledger.plain import FrozenPlain, Plain

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext as Engine
    from ledger.engine.neighbours import Neighbour
    from ledger.lineage import LedgerFile
    from ledger.session.model import Session


def key_of(change: Change) -> Key:
    """The key of what the work tree holds now at ``change.path`` (its ``old`` side: a plan
    diffs from now to a target)."""
    path = os.fsencode(change.path)
    now = change.old
    return absent(path) if now is None else (path, now.mode, now.oid)


class Whose(FrozenPlain):
    """The answer for one changed file."""

    __slots__ = ("attribution", "neighbour", "producer", "since")
    attribution: Verdict_
    neighbour: Neighbour | None
    """The other session, for ``other-session``."""
    producer: Record | None
    """The record that decided (``None``: nothing recorded the content)."""
    since: str | None
    """For the user's content: the entry whose point first kept it (a prompt), if known."""

    def __init__(
        self,
        attribution: Verdict_,
        neighbour: Neighbour | None = None,
        producer: Record | None = None,
        since: str | None = None,
    ) -> None:
        object.__setattr__(self, "attribution", attribution)
        object.__setattr__(self, "neighbour", neighbour)
        object.__setattr__(self, "producer", producer)
        object.__setattr__(self, "since", since)

    def _fields(self) -> tuple[object, ...]:
        return (self.attribution, self.neighbour, self.producer, self.since)

    @property
    def warns(self) -> bool:
        return self.attribution in ("user", "other-session")


class Attribution(Plain):
    """Whose work the current side of each change is, for one plan or list (see the module)."""

    __slots__ = ("_live", "_named", "bound", "engine", "index", "lineage", "nested")
    engine: Engine
    index: AuthorshipIndex
    lineage: Lineage
    bound: dict[str, str]
    """Snapshot → the first entry of this conversation bound to it (for ``since``)."""
    nested: Sequence[Neighbour]
    """Sessions in nested or enclosing shadows, asked by their agent steps."""
    _named: dict[str, Neighbour]
    _live: dict[str, Neighbour] | None

    def __init__(
        self,
        engine: Engine,
        index: AuthorshipIndex,
        lineage: Lineage,
        bound: dict[str, str],
        nested: Sequence[Neighbour] = (),
        _named: dict[str, Neighbour] | None = None,
        _live: dict[str, Neighbour] | None = None,
    ) -> None:
        self.engine = engine
        self.index = index
        self.lineage = lineage
        self.bound = bound
        self.nested = nested
        self._named = {} if _named is None else _named
        self._live = _live

    @classmethod
    def of(cls, engine: Engine, changes: Iterable[Change] | None = None) -> Attribution:
        """Ready to answer for ``changes`` (``None``: for any path: the whole index)."""
        from ledger.engine.neighbours import nested_neighbours

        session = engine.session()
        links = engine.reader.lineage(session).links
        ancestors = tuple(link.session_id for link in links[1:])
        inherited = _same_conversation(engine, session, links) if ancestors else None
        bound: dict[str, str] = {}
        for link in links:
            for entry_id, sha in link.view.entry_to_commit.items():
                bound.setdefault(sha, entry_id)
        paths = None if changes is None else {os.fsencode(c.path) for c in changes}
        index = engine.authorship.index_for(paths)
        return cls(
            engine,
            index,
            Lineage(session.id, ancestors, inherited),
            bound,
            nested_neighbours(engine),
        )

    def whose(self, change: Change) -> Whose:
        verdict = self.index.attribute(key_of(change), self.lineage)
        kind = verdict.attribution
        producer = verdict.producer
        if kind == "other-session" and producer is not None:
            return Whose(kind, self.neighbour(producer.author.session), producer)
        if kind == "user" and self.nested:
            found = next((n for n in self.nested if n.work and n.work.wrote(change)), None)
            if found is not None:
                return Whose("other-session", found, None)
        if kind == "user":
            since = self.bound.get(producer.snapshot) if producer is not None else None
            return Whose(kind, None, producer, since)
        return Whose(kind, None, producer)

    def neighbour(self, session_id: str) -> Neighbour:
        """The other session ``session_id``, named (cached for this attribution)."""
        found = self._named.get(session_id)
        if found is None:
            from ledger.engine.neighbours import describe, live_neighbours

            if self._live is None:
                self._live = live_neighbours(self.engine)
            found = self._live.get(session_id) or describe(
                self.engine, session_id, forked_from=session_id in self.lineage.ancestors
            )
            self._named[session_id] = found
        return found


def _same_conversation(
    engine: Engine, session: Session, links: Sequence[LedgerFile]
) -> frozenset[str]:
    """The entries whose turns are this conversation's: its own, and each ancestor's entries
    written before the fork that made its child (the same Pi process did them: a fork made at
    the first prompt copies none of them, yet they are the conversation's past, named as the
    session it was forked from, never as another session). An ancestor's turns after the fork
    are another session's."""
    found = {e.id for e in session.entries}
    child_started = ms_from_iso(session.header.get("timestamp"))
    for link in links[1:]:
        try:
            parent = link.session or engine.reader.load(link.path, full=True).session
        except (OSError, LedgerError):
            parent = None
        if parent is None:
            continue
        for entry in parent.entries:
            if child_started and ms_from_iso(entry.timestamp) <= child_started:
                found.add(entry.id)
        child_started = ms_from_iso(parent.header.get("timestamp"))
    return frozenset(found)


__all__ = ["Attribution", "Whose", "key_of"]
