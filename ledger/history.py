"""The operation history of a session: every file operation, newest first (jj's operation log).

Why it exists: ``rewind undo`` swaps with the state before the *last* file rewind only. Every
earlier state is already in the ledger: each ``rewind-op`` carries ``current`` (the files after
the operation) and ``undo`` (the snapshot of the files it replaced, i.e. the state just before
it). This module reads them back as a list of :class:`Operation` values, for ``rewind history``
and for ``rewind undo --to OP`` (docs/design.md#operation-history).

What counts as an operation (records that are not one are left out):

- a ``rewind-op`` with ``current``: restores (``restore-files`` at the leaf, ``restore-both``
  where the conversation moved too), undos and recoveries (``undo``: its ``current`` is the undo
  point the branch had just before), a fork's first record in the child (``fork-import``), and
  the moves that kept the files (``keep-files`` at the leaf, ``move`` elsewhere);
- a ``rewind-fork-pending`` with ``undo``: a ``/fork`` that restored files in the parent
  (``fork-restore``); one without ``undo`` changed no file and is left out;
- checkpoints and compaction aliases (bindings only) change no file: left out.

The kind is read from the record's fields and position only (the records do not name their
command): "moved" means the record's ``parentId`` is not the entry just before it in the file.
A recovery of an interrupted restore reads as a ``restore-files`` (its ``current`` is the
journal's snapshot, which no record names).

Invariants: pure (no I/O, no git); newest first, by file order within one session and by record
timestamp across the sessions of a lineage; an operation id is its record's entry id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ledger.clock import ms_from_iso
from ledger.errors import NameResolutionError
from ledger.ledgerview import LedgerView
from ledger.records import FORK_PENDING, OP, DecodedRecord
from ledger.session.model import Session

OperationKind = Literal[
    "restore-files", "restore-both", "undo", "fork-restore", "fork-import", "keep-files", "move"
]


@dataclass(frozen=True)
class Operation:
    """One file operation of one session: what the files were before (``before``, the record's
    ``undo``; None when it changed nothing) and after (``after``, its ``current``)."""

    record: str
    session: str
    kind: OperationKind
    before: str | None
    after: str
    parent: str | None
    """The entry the record hangs under (its ``parentId``)."""
    timestamp: str | None
    timestamp_ms: int
    record_type: str

    @property
    def changed_files(self) -> bool:
        return self.before is not None


def _previous_ids(session: Session | None) -> dict[str, str | None]:
    """Record id → the id of the entry just before it in file order (None: the first entry)."""
    if session is None:
        return {}
    previous: dict[str, str | None] = {}
    before: str | None = None
    for entry in session.entries:
        previous.setdefault(entry.id, before)
        before = entry.id
    return previous


def _kind(
    record: DecodedRecord,
    *,
    moved: bool,
    first: bool,
    forked: bool,
    undo_point: str | None,
) -> OperationKind:
    if record.custom_type == FORK_PENDING:
        return "fork-restore"
    if first and forked:
        return "fork-import"
    if record.undo is None:
        return "move" if moved else "keep-files"
    if undo_point is not None and record.current == undo_point:
        return "undo"
    return "restore-both" if moved else "restore-files"


def session_operations(view: LedgerView, session: Session | None = None) -> list[Operation]:
    """The file operations of one session, newest first. ``session`` (the parsed file the view
    was folded from) tells a conversation move from an op at the leaf; without it every op reads
    as at the leaf."""
    previous = _previous_ids(session)
    found: list[Operation] = []
    undo_point: str | None = None  # the undo the branch had before each record (file order)
    for index, record in enumerate(view.records):
        is_fork = record.custom_type == FORK_PENDING
        if not (record.custom_type == OP and record.current) and not (is_fork and record.undo):
            continue
        assert record.current is not None
        moved = (
            record.record_id in previous and previous[record.record_id] != record.parent_id
        ) and not is_fork
        kind = _kind(
            record,
            moved=moved,
            first=index == 0,
            forked=view.parent_session is not None,
            undo_point=undo_point,
        )
        stamp = record.timestamp if isinstance(record.timestamp, str) else None
        found.append(
            Operation(
                record.record_id,
                view.session_id,
                kind,
                record.undo,
                record.current,
                record.parent_id,
                stamp,
                ms_from_iso(record.timestamp),
                record.custom_type,
            )
        )
        if record.undo and not is_fork:
            undo_point = record.undo
    found.reverse()
    return found


def lineage_operations(
    links: Iterable[tuple[LedgerView, Session | None]],
) -> list[Operation]:
    """The operations of a session and its ancestors (nearest first in ``links``), newest first
    by record timestamp; a session's own order is kept for equal timestamps."""
    merged: list[tuple[int, int, int, Operation]] = []
    for depth, (view, session) in enumerate(links):
        ops = session_operations(view, session)
        for position, op in enumerate(ops):
            merged.append((-op.timestamp_ms, depth, position, op))
    merged.sort(key=lambda item: item[:3])
    return [op for *_, op in merged]


def resolve_operation(ops: Sequence[Operation], name: str, *, scope: str) -> Operation:
    """OP → the operation: an exact record id, else a unique prefix of one;
    :class:`~ledger.errors.NameResolutionError` listing the candidates otherwise."""
    for op in ops:
        if op.record == name:
            return op
    matches = [op for op in ops if name and op.record.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise NameResolutionError(
            "operation", name, [op.record for op in ops], ambiguous=False, scope=scope
        )
    raise NameResolutionError(
        "operation", name, [op.record for op in matches], ambiguous=True, scope=scope
    )


__all__ = [
    "Operation",
    "OperationKind",
    "lineage_operations",
    "resolve_operation",
    "session_operations",
]
