"""Who produced each file's content in a work tree: the records and the one rule (docs/authorship.md).

Why it exists: before a restore, undo or fork overwrites files, the plan says whose work each
file holds now. Recomputing that from every session's ledger at each use
(:mod:`ledger.engine.ownership`, :mod:`ledger.engine.neighbours`) costs a walk of every recorded
point of every session. Here the answer is kept as it happens: each capture appends one
:class:`Record` (snapshot, author, the ``(path, mode, blob)`` it found changed), and an
:class:`AuthorshipIndex` answers "who produced exactly this content at this path" with one dict
lookup per changed path, whatever the length of the history and the number of sessions.

The rule (:meth:`AuthorshipIndex.attribute`), the same in every flow. For the content a file holds
now, its key ``(path, mode, blob)`` (``(path, 0, "")`` for a file that is absent):

1. **this conversation's agent**: an agent record of the asking session (any branch), or of a
   session it was forked from for a turn the fork copied (:class:`Lineage`), produced exactly
   this content. Checked first: nothing this conversation's agent wrote is ever named.
2. otherwise the **latest** record producing it decides: **another session's agent**, **the
   user** (changes found by a capture, not made by an agent or a rewind), or a **rewind**
   (restore, undo, fork restore) that put it there last: never a warning (what it wrote is in
   the snapshot it came from, and the user made nothing since).
3. otherwise nothing recorded it: the content appeared after the last capture, i.e. the user's.

Content identity: the key is the content, so a file changed by hand back to content some record
produced is answered by that record.

Invariants: pure (values in, values out; paths are bytes, modes ints, blob ids hex strings); the
index only grows by :meth:`AuthorshipIndex.add` in record order, so "latest" is file order;
:func:`compact` keeps every answer for the keys it is told are still referenced.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

from ledger.plain import FrozenPlain, Plain

AuthorKind = Literal["agent", "user", "rewind"]
Attribution = Literal["this-session", "fork-parent", "other-session", "rewind", "user"]

ABSENT_MODE = 0
"""The mode of a key that says "no file at this path" (a deletion's result)."""

Key = tuple[bytes, int, str]
"""``(path, mode, blob)`` of one file's content; ``(path, 0, "")`` for an absence."""

WARNING_ATTRIBUTIONS: frozenset[Attribution] = frozenset({"other-session", "user"})


def absent(path: bytes) -> Key:
    """The key of "no file at ``path``"."""
    return (path, ABSENT_MODE, "")


class Author(FrozenPlain):
    """Who produced a record's changes.

    ``agent``: the agent of ``session`` in the turn whose assistant entry is ``entry``;
    ``user``: changes a capture of ``session`` found, made by nobody it knows (``entry``: the
    entry or record the capture belongs to, when known); ``rewind``: a restore, undo or fork
    restore (``op``) of ``session``, recorded by the op record ``entry``."""

    __slots__ = ("entry", "kind", "op", "session")
    kind: AuthorKind
    session: str
    entry: str | None
    op: str | None

    def __init__(
        self, kind: AuthorKind, session: str, entry: str | None = None, op: str | None = None
    ) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "session", session)
        object.__setattr__(self, "entry", entry)
        object.__setattr__(self, "op", op)

    def _fields(self) -> tuple[object, ...]:
        return (self.kind, self.session, self.entry, self.op)


class Record(FrozenPlain):
    """One capture: the snapshot it made, who produced its changes, and the changed paths'
    new states (an absence for a deleted path). A record may list no path: it still says the
    work tree was captured as ``snapshot`` (the base of the next capture's comparison)."""

    __slots__ = ("author", "entries", "snapshot")
    snapshot: str
    author: Author
    entries: tuple[Key, ...]

    def __init__(self, snapshot: str, author: Author, entries: tuple[Key, ...] = ()) -> None:
        object.__setattr__(self, "snapshot", snapshot)
        object.__setattr__(self, "author", author)
        object.__setattr__(self, "entries", entries)

    def _fields(self) -> tuple[object, ...]:
        return (self.snapshot, self.author, self.entries)


class Lineage(FrozenPlain):
    """The asking conversation, as values: its own session id, the sessions it was forked from
    (parent first) and, when known, the entry ids its file holds (a fork copies the parent's
    branch with its ids). A parent's agent record counts as this conversation's when its entry
    was copied (``inherited`` ``None``: every record of the ancestors counts); a parent's turn
    after the fork, or on a branch the fork did not copy, is another session's work."""

    __slots__ = ("ancestors", "inherited", "session")
    session: str
    ancestors: tuple[str, ...]
    inherited: frozenset[str] | None

    def __init__(
        self, session: str, ancestors: tuple[str, ...] = (), inherited: frozenset[str] | None = None
    ) -> None:
        object.__setattr__(self, "session", session)
        object.__setattr__(self, "ancestors", ancestors)
        object.__setattr__(self, "inherited", inherited)

    def _fields(self) -> tuple[object, ...]:
        return (self.session, self.ancestors, self.inherited)

    def owns(self, record: Record) -> Attribution | None:
        author = record.author
        if author.kind != "agent":
            return None
        if author.session == self.session:
            return "this-session"
        if author.session in self.ancestors and (
            self.inherited is None or (author.entry is not None and author.entry in self.inherited)
        ):
            return "fork-parent"
        return None


class Verdict(FrozenPlain):
    """Whose work one key is: the attribution and the record that decided it (``None``: nothing
    recorded the content, the user's)."""

    __slots__ = ("attribution", "producer")
    attribution: Attribution
    producer: Record | None

    def __init__(self, attribution: Attribution, producer: Record | None = None) -> None:
        object.__setattr__(self, "attribution", attribution)
        object.__setattr__(self, "producer", producer)

    def _fields(self) -> tuple[object, ...]:
        return (self.attribution, self.producer)

    @property
    def warns(self) -> bool:
        """Only the user's and other sessions' content is named before it is overwritten."""
        return self.attribution in WARNING_ATTRIBUTIONS


UNRECORDED = Verdict("user", None)


# What the rule needs about one key, updated in record order: a list (a load makes one per key,
# and a list is several times cheaper to make than an object):
_LATEST = 0
"""The latest agent or user record producing the key."""
_REWIND = 1
"""The latest rewind record producing it."""
_AGENTS = 2
"""Per session, every agent record producing it (usually one), oldest first; or ``None``."""
_LATEST_AT = 3
_REWIND_AT = 4
"""The positions (record numbers) of ``_LATEST`` and ``_REWIND``: which came last."""


class AuthorshipIndex(Plain):
    """The rule over a sequence of records (see the module); O(1) per lookup."""

    __slots__ = ("_slots", "entries", "last_snapshot", "records")
    _slots: dict[Key, list[Any]]
    records: int
    """How many records were added."""
    entries: int
    """How many ``(record, key)`` pairs were added (the size of what a load parses)."""
    last_snapshot: str | None
    """The snapshot of the latest record: the work tree as last captured by anyone."""

    def __init__(
        self,
        _slots: dict[Key, list[Any]] | None = None,
        records: int = 0,
        entries: int = 0,
        last_snapshot: str | None = None,
    ) -> None:
        self._slots = {} if _slots is None else _slots
        self.records = records
        self.entries = entries
        self.last_snapshot = last_snapshot

    @classmethod
    def of(cls, records: Iterable[Record]) -> AuthorshipIndex:
        index = cls()
        index.extend(records)
        return index

    def extend(self, records: Iterable[Record]) -> None:
        for record in records:
            self.add(record)

    def add(self, record: Record) -> None:
        """Take one record, later than every record added before."""
        self.records += 1
        at = self.records
        self.entries += len(record.entries)
        self.last_snapshot = record.snapshot
        slots = self._slots
        get = slots.get
        kind = record.author.kind
        # One loop per kind: a load adds every entry of the file, so this is its hot path.
        if kind == "rewind":
            for key in record.entries:
                slot = get(key)
                if slot is None:
                    slots[key] = [None, record, None, 0, at]
                else:
                    slot[_REWIND] = record
                    slot[_REWIND_AT] = at
        elif kind == "user":
            for key in record.entries:
                slot = get(key)
                if slot is None:
                    slots[key] = [record, None, None, at, 0]
                else:
                    slot[_LATEST] = record
                    slot[_LATEST_AT] = at
        else:
            session = record.author.session
            for key in record.entries:
                slot = get(key)
                if slot is None:
                    slots[key] = [record, None, {session: [record]}, at, 0]
                    continue
                slot[_LATEST] = record
                slot[_LATEST_AT] = at
                agents = slot[_AGENTS]
                if agents is None:
                    slot[_AGENTS] = {session: [record]}
                else:
                    agents.setdefault(session, []).append(record)

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, key: object) -> bool:
        return key in self._slots

    def keys(self) -> Iterator[Key]:
        return iter(self._slots)

    def __iter__(self) -> Iterator[Key]:
        return iter(self._slots)

    def attribute(self, key: Key, lineage: Lineage) -> Verdict:
        """Whose work the content ``key`` is, asked by the conversation ``lineage``."""
        slot = self._slots.get(key)
        if slot is None:
            return UNRECORDED
        latest, rewind, agents, latest_at, rewind_at = slot
        if agents is not None:
            own = _own(agents, lineage)
            if own is not None:
                return own
        if rewind is not None and rewind_at > latest_at:
            return Verdict("rewind", rewind)
        if latest is not None:
            if latest.author.kind == "user":
                return Verdict("user", latest)
            return Verdict("other-session", latest)
        if rewind is not None:
            return Verdict("rewind", rewind)
        return UNRECORDED

    def attribute_all(self, keys: Iterable[Key], lineage: Lineage) -> dict[Key, Verdict]:
        """:meth:`attribute` for each key (a plan's changed paths): O(len(keys))."""
        return {key: self.attribute(key, lineage) for key in keys}

    def answers(self, key: Key) -> tuple[Record | None, Record | None, tuple[Record, ...]]:
        """What decides every lookup of ``key``: the latest agent-or-user record, the latest
        rewind record and every agent record (tests compare indexes with this)."""
        slot = self._slots.get(key)
        if slot is None:
            return (None, None, ())
        latest, rewind, agents, _, _ = slot
        return (latest, rewind, tuple(r for rs in (agents or {}).values() for r in rs))


def _own(agents: dict[str, list[Record]], lineage: Lineage) -> Verdict | None:
    records = agents.get(lineage.session)
    if records:
        return Verdict("this-session", records[-1])
    for ancestor in lineage.ancestors:
        for record in reversed(agents.get(ancestor, ())):
            if lineage.owns(record) == "fork-parent":
                return Verdict("fork-parent", record)
    return None


def diff_entries(
    old: dict[bytes, tuple[int, str]] | None, new: dict[bytes, tuple[int, str]]
) -> list[Key]:
    """The keys a capture records between two trees given as ``path → (mode, blob)``: every
    path whose state changed, with its new state (an absence for a deleted path), by path."""
    old = old or {}
    found: list[Key] = []
    for path, state in new.items():
        if old.get(path) != state:
            found.append((path, state[0], state[1]))
    found.extend(absent(path) for path in old if path not in new)
    found.sort()
    return found


def _identity(author: Author) -> tuple[str, ...]:
    """Records of one identity answer alike for a key, so compaction keeps the latest of each:
    the user, a rewind, each session's agent per turn (a fork's inheritance is per turn)."""
    if author.kind == "agent":
        return ("agent", author.session, author.entry or "")
    return (author.kind,)


def compact(records: Sequence[Record], referenced: Iterable[Key] | None = None) -> list[Record]:
    """The records that give the same answer as ``records`` for every key of ``referenced``
    (every key when ``None``), in their order: for each key, only the latest record of each
    identity (user, rewind, each agent turn) is kept; keys not referenced are dropped; records
    left without keys are dropped, except the last record (its snapshot is the base of the
    next capture's comparison)."""
    keep_keys = None if referenced is None else set(referenced)
    newest: dict[tuple[Key, tuple[str, ...]], int] = {}
    for position, record in enumerate(records):
        identity = _identity(record.author)
        for key in record.entries:
            if keep_keys is None or key in keep_keys:
                newest[(key, identity)] = position
    kept: list[Record] = []
    last = len(records) - 1
    for position, record in enumerate(records):
        identity = _identity(record.author)
        entries = tuple(k for k in record.entries if newest.get((k, identity)) == position)
        if entries or position == last:
            kept.append(
                record
                if entries == record.entries
                else Record(record.snapshot, record.author, entries)
            )
    return kept


__all__ = [
    "ABSENT_MODE",
    "UNRECORDED",
    "WARNING_ATTRIBUTIONS",
    "Attribution",
    "Author",
    "AuthorKind",
    "AuthorshipIndex",
    "Key",
    "Lineage",
    "Record",
    "Verdict",
    "absent",
    "compact",
    "diff_entries",
]
