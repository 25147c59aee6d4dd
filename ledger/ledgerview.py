"""The ledger of one session: which snapshot belongs to which entry, and the state of a branch.

Why it exists: the records are scattered through a session file (all branches, in file order).
This module folds them into the answers every command needs, once, from values:

- ``entry_to_commit``: entry id → snapshot commit, from the bindings of every ``rewind-turn`` and
  ``rewind-op`` in **file order**, a later binding winning (the reference's rule);
- ``references``: every snapshot a record mentions, with the record's own timestamp (what the
  retention sweep and ``rewind log`` need);
- ``latest_current`` / ``latest_undo``: the last op carrying them in file order (retention pins);
- ``fork_pending``: the last valid ``rewind-fork-pending`` record;
- :meth:`LedgerView.branch_state`: ``current`` and ``undo`` along one branch walked root → leaf
  **in branch order**, each record overwriting the previous one (defect D3 fixed: a later turn's
  last binding beats an earlier op's ``current``).

Invariants: pure (no I/O, no git); invalid records are ignored and listed in ``invalid``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from ledger.clock import ms_from_iso
from ledger.plain import FrozenPlain, Plain
from ledger.records import (
    FORK_PENDING,
    OP,
    RECORD_TYPES,
    TURN,
    DecodedRecord,
    InvalidRecord,
    decode_record,
)
from ledger.session.model import Session, is_restorable
from ledger.session.parse import Entry

ReferenceKind = Literal["binding", "current", "undo", "fork-pending"]


_CACHE = "_ledger_view"
"""Where :meth:`LedgerView.of` keeps a session's folded ledger (with its entry count)."""


class Reference(FrozenPlain):
    """One snapshot named by one record.

    ``entry_id`` is the bound entry for a binding, and the entry the record hangs under (its
    ``parentId``) for ``current``, ``undo`` and ``fork-pending``.
    """

    __slots__ = (
        "entry_id",
        "kind",
        "record_id",
        "record_type",
        "snapshot",
        "timestamp",
        "timestamp_ms",
    )
    entry_id: str | None
    kind: ReferenceKind
    snapshot: str
    record_id: str
    record_type: str
    timestamp: str | None
    timestamp_ms: int

    def __init__(
        self,
        entry_id: str | None,
        kind: ReferenceKind,
        snapshot: str,
        record_id: str,
        record_type: str,
        timestamp: str | None,
        timestamp_ms: int,
    ) -> None:
        object.__setattr__(self, "entry_id", entry_id)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "snapshot", snapshot)
        object.__setattr__(self, "record_id", record_id)
        object.__setattr__(self, "record_type", record_type)
        object.__setattr__(self, "timestamp", timestamp)
        object.__setattr__(self, "timestamp_ms", timestamp_ms)

    def _fields(self) -> tuple[object, ...]:
        return (
            self.entry_id,
            self.kind,
            self.snapshot,
            self.record_id,
            self.record_type,
            self.timestamp,
            self.timestamp_ms,
        )

    @property
    def is_retention_reference(self) -> bool:
        """Fork-pending records are a hand-off, not a reference that keeps a snapshot
        (docs/design.md#retention-references)."""
        return self.kind != "fork-pending"


class BranchState(FrozenPlain):
    """The file state recorded along one branch: what the files are, and what Undo returns to."""

    __slots__ = ("current", "current_from", "undo", "undo_from")
    current: str | None
    current_from: str | None
    undo: str | None
    undo_from: str | None

    def __init__(
        self, current: str | None, current_from: str | None, undo: str | None, undo_from: str | None
    ) -> None:
        self._init(current=current, current_from=current_from, undo=undo, undo_from=undo_from)


class LedgerView(Plain):
    __slots__ = (
        "_by_record",
        "entry_to_commit",
        "fork_pending",
        "invalid",
        "labeled_entries",
        "latest_current",
        "latest_undo",
        "parent_session",
        "records",
        "references",
        "session_id",
    )
    session_id: str
    parent_session: str | None
    records: list[DecodedRecord]
    invalid: list[InvalidRecord]
    entry_to_commit: dict[str, str]
    references: list[Reference]
    latest_current: str | None
    latest_undo: str | None
    fork_pending: DecodedRecord | None
    labeled_entries: frozenset[str]
    _by_record: dict[str, DecodedRecord]

    def __init__(
        self,
        session_id: str,
        parent_session: str | None,
        records: list[DecodedRecord] | None = None,
        invalid: list[InvalidRecord] | None = None,
        entry_to_commit: dict[str, str] | None = None,
        references: list[Reference] | None = None,
        latest_current: str | None = None,
        latest_undo: str | None = None,
        fork_pending: DecodedRecord | None = None,
        labeled_entries: frozenset[str] = frozenset(),
        _by_record: dict[str, DecodedRecord] | None = None,
    ) -> None:
        self.session_id = session_id
        self.parent_session = parent_session
        self.records = [] if records is None else records
        self.invalid = [] if invalid is None else invalid
        self.entry_to_commit = {} if entry_to_commit is None else entry_to_commit
        self.references = [] if references is None else references
        self.latest_current = latest_current
        self.latest_undo = latest_undo
        self.fork_pending = fork_pending
        self.labeled_entries = labeled_entries
        self._by_record = {} if _by_record is None else _by_record

    def __repr__(self) -> str:
        # As the dataclass's ``repr=False``: the index by entry id is left out (it is compared).
        shown = (name for name in self._names() if name != "_by_record")
        return f"LedgerView({', '.join(f'{name}={getattr(self, name)!r}' for name in shown)})"

    @classmethod
    def of(cls, session: Session) -> LedgerView:
        """The ledger of ``session``, folded once per session object: a Session is a value (a
        host makes a new one when the file or the mirror grows), and one command asks for its
        ledger many times (plans, branch state, lineage, history). Callers never change it."""
        cached = session.__dict__.get(_CACHE)
        if cached is not None and cached[0] == len(session.entries):
            return cached[1]
        view = cls(session.id, session.parent_session)
        view.labeled_entries = frozenset(k for k, v in session.labels.items() if v.strip())
        view._fold(session.iter_custom(*RECORD_TYPES))
        session.__dict__[_CACHE] = (len(session.entries), view)
        return view

    @classmethod
    def empty(cls, session_id: str, parent_session: str | None) -> LedgerView:
        return cls(session_id, parent_session)

    def _fold(self, entries: Iterable[Entry]) -> None:
        for entry in entries:
            custom_type = entry.custom_type or ""
            decoded = decode_record(
                custom_type, entry.raw.get("data"), entry.id, entry.parent_id, entry.timestamp
            )
            if isinstance(decoded, InvalidRecord):
                self.invalid.append(decoded)
                continue
            self.records.append(decoded)
            self._by_record.setdefault(entry.id, decoded)
            stamp = entry.timestamp if isinstance(entry.timestamp, str) else None
            ms = ms_from_iso(entry.timestamp)

            def ref(
                entry_id: str | None,
                kind: ReferenceKind,
                sha: str,
                _by: tuple[str, str, str | None, int] = (entry.id, custom_type, stamp, ms),
            ) -> None:
                self.references.append(Reference(entry_id, kind, sha, *_by))

            if custom_type == FORK_PENDING:
                self.fork_pending = decoded
                assert decoded.current is not None
                ref(entry.parent_id, "fork-pending", decoded.current)
                if decoded.undo:
                    ref(entry.parent_id, "fork-pending", decoded.undo)
                continue
            for bound_id, sha in decoded.bindings:
                self.entry_to_commit[bound_id] = sha
                ref(bound_id, "binding", sha)
            if decoded.current:
                self.latest_current = decoded.current
                ref(entry.parent_id, "current", decoded.current)
            if decoded.undo:
                self.latest_undo = decoded.undo
                ref(entry.parent_id, "undo", decoded.undo)

    # --- questions ------------------------------------------------------------------------

    @property
    def snapshots(self) -> list[str]:
        """Every distinct snapshot referenced (retention references only), first mention first."""
        seen: dict[str, None] = {}
        for reference in self.references:
            if reference.is_retention_reference:
                seen.setdefault(reference.snapshot, None)
        return list(seen)

    def branch_state(self, session: Session, leaf_id: str | None = None) -> BranchState:
        """``current`` and ``undo`` along the branch ending at ``leaf_id`` (default: the leaf).

        Walked root → leaf; every step that records a file state overwrites ``current``: a bound
        restorable entry, an op's ``current``, and any other record's last binding (a turn's
        post-turn state, a compaction alias, a checkpoint). An op's ``undo`` overwrites ``undo``.
        """
        current = current_from = undo = undo_from = None
        for entry in session.branch(leaf_id):
            record = self._by_record.get(entry.id) if entry.type == "custom" else None
            if record is not None and record.custom_type in (TURN, OP):
                if record.current:
                    current, current_from = record.current, entry.id
                elif record.last_binding_sha:
                    current, current_from = record.last_binding_sha, entry.id
                if record.undo:
                    undo, undo_from = record.undo, entry.id
                continue
            sha = self.entry_to_commit.get(entry.id)
            if sha is not None and is_restorable(entry):
                current, current_from = sha, entry.id
        return BranchState(current, current_from, undo, undo_from)

    @property
    def bound_entry_count(self) -> int:
        """How many entries of this file a binding names (``rewind sessions``' ``points``)."""
        return len(self.entry_to_commit)


__all__ = ["FORK_PENDING", "OP", "TURN", "BranchState", "LedgerView", "Reference"]
