"""From recorded points to authorship records: one rule for the live writer and for a rebuild
(docs/authorship.md#rebuild).

Why it exists: the index is written as work happens (each capture appends a record), and must be
rebuilt from the ledgers and the store when it is missing or damaged. Both go through the same
:class:`Chain`, so that the rebuilt records equal those written live whenever the points come in
the same order with the same trees:

- a **capture** point (a pre-prompt snapshot, a restore's or undo's pre-restore capture, the
  ``current`` of "Keep current files", a checkpoint) is compared with the **work tree's** latest
  point, whichever session took it: what changed since was found, not made, so it is the user's;
- an **agent** point (a turn's post-turn snapshot) is compared with the **same session's**
  previous point (its pre-prompt snapshot, or its previous turn of the prompt): the agent step of
  :mod:`ledger.engine.ownership`;
- a **rewind** point (the ``current`` of a restore, undo or fork restore) is compared with the
  same session's previous point, the op's pre-restore capture.

Each point becomes exactly one :class:`~ledger.authorship.model.Record` (possibly without paths:
it still moves the work tree's latest point). A fork child's imported hand-off repeats its
parent's points and is not a point of its own (the adapter leaves it out).

Invariants: pure; the tree comparison is the caller's (``changes(base, snapshot)``: the keys whose
state differs, every path of ``snapshot`` when ``base`` is ``None``), so that an adapter feeds it
from git and a test from dictionaries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal

from ledger.authorship.model import Author, Key, Record
from ledger.plain import FrozenPlain, Plain

PointKind = Literal["capture", "agent", "rewind"]
Changes = Callable[[str | None, str], Iterable[Key]]
"""``changes(base snapshot or None, snapshot)``: the keys a capture of ``snapshot`` records."""


class Point(FrozenPlain):
    """One recorded file state of one session, as its ledger (or the live engine) knows it."""

    __slots__ = ("at", "entry", "kind", "op", "session", "snapshot")
    snapshot: str
    kind: PointKind
    session: str
    entry: str | None
    """The assistant entry of an agent point; the op record of a rewind; the entry or record a
    capture belongs to, when known."""
    op: str | None
    """A rewind's operation: ``restore``, ``undo`` or ``fork-restore``."""
    at: float
    """When it was recorded (seconds): the order of a rebuild across sessions."""

    def __init__(
        self,
        snapshot: str,
        kind: PointKind,
        session: str,
        entry: str | None = None,
        op: str | None = None,
        at: float = 0.0,
    ) -> None:
        object.__setattr__(self, "snapshot", snapshot)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "session", session)
        object.__setattr__(self, "entry", entry)
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "at", at)

    def _fields(self) -> tuple[object, ...]:
        return (self.snapshot, self.kind, self.session, self.entry, self.op, self.at)

    def author(self) -> Author:
        kind = "user" if self.kind == "capture" else self.kind
        return Author(kind, self.session, self.entry, self.op if self.kind == "rewind" else None)


class Chain(Plain):
    """The bases of the next comparisons: the work tree's latest point and each session's.

    Seed it with the index's :attr:`~ledger.authorship.model.AuthorshipIndex.last_snapshot` in a
    process that appends to an existing index (and the session's own latest point, which its
    engine holds)."""

    __slots__ = ("last", "sessions")
    last: str | None
    sessions: dict[str, str]

    def __init__(self, last: str | None = None, sessions: dict[str, str] | None = None) -> None:
        self.last = last
        self.sessions = {} if sessions is None else sessions

    def base_of(self, point: Point) -> str | None:
        if point.kind == "capture":
            return self.last
        # An agent or rewind point without an earlier point of its session (not expected: a
        # turn starts with a capture, a restore takes one first) compares with the work tree's.
        return self.sessions.get(point.session, self.last)

    def record(self, point: Point, changes: Changes) -> Record:
        """The record of ``point`` (compared with its base), and the chain moved past it."""
        entries = tuple(changes(self.base_of(point), point.snapshot))
        self.advance(point)
        return Record(point.snapshot, point.author(), entries)

    def advance(self, point: Point) -> None:
        self.last = point.snapshot
        self.sessions[point.session] = point.snapshot


def ordered(ledgers: Mapping[str, Sequence[Point]]) -> list[Point]:
    """Every session's points in one sequence, by ``at``; points of one session keep their
    order, and equal times keep the order of ``ledgers``. The rebuild equals the live index when
    this is the order the captures happened in (distinct, honest times)."""
    tagged = [
        (point.at, rank, position, point)
        for rank, points in enumerate(ledgers.values())
        for position, point in enumerate(points)
    ]
    # Within one session, a later point never sorts before an earlier one even if its time is
    # smaller (a clock step): clamp each time to the session's running maximum.
    clamped: list[tuple[float, int, int, Point]] = []
    running: dict[int, float] = {}
    for at, rank, position, point in tagged:
        at = max(at, running.get(rank, at))
        running[rank] = at
        clamped.append((at, rank, position, point))
    clamped.sort(key=lambda item: item[:3])
    return [item[3] for item in clamped]


def rebuild(
    points: Iterable[Point], changes: Changes, *, chain: Chain | None = None
) -> list[Record]:
    """The records of ``points`` in order, exactly as the live writer appends them."""
    chain = chain if chain is not None else Chain()
    return [chain.record(point, changes) for point in points]


__all__ = ["Chain", "Changes", "Point", "PointKind", "ordered", "rebuild"]
