"""Pydantic models of the three rewind records: how records are written, and their schemas.

Why it exists: written records must match pi-rewind-hook v2 byte for byte: ``v`` first, fields
in declaration order, absent optional fields omitted (never ``null``), ``bindings`` last
(docs/formats.md#ledger-records, docs/formats.md#rewind-op). The models enforce the shapes the reference writes; ``to_data()`` gives the
``data`` object in the reference key order. They are the definition and generate ``schemas/``;
the engine writes with :mod:`ledger.record_fast` (the same bytes, no pydantic import; held to
these models by tests). Reading does not go through these models (see
:func:`ledger.records.decode_record`, the reference's lenient validators).

Invariants: a model instance is always a record the reference would accept; pure, no I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.json_schema import SkipJsonSchema

from ledger.records import RECORD_VERSION

Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]
EntryId = Annotated[str, StringConstraints(min_length=1)]
Binding = tuple[EntryId, Annotated[int, Field(ge=0)]]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_data(self) -> dict[str, Any]:
        """The record's ``data`` object in the reference key order."""
        return self.model_dump(mode="json", exclude_none=True)


class RewindTurnData(_Record):
    """``rewind-turn``: one per prompt; bindings in capture order (user entry first)."""

    v: Literal[2]
    snapshots: list[Sha]
    bindings: list[Binding]

    @model_validator(mode="after")
    def _positions_exist(self) -> RewindTurnData:
        _check_positions(self.snapshots, self.bindings)
        return self


class RewindOpData(_Record):
    """``rewind-op``: tree/fork/undo operations, compaction aliases and checkpoints."""

    v: Literal[2]
    snapshots: list[Sha]
    # Optional keys are omitted from the wire, never written as null: the schema says so.
    current: Literal[0] | SkipJsonSchema[None] = None
    undo: Literal[1] | SkipJsonSchema[None] = None
    bindings: list[Binding] | SkipJsonSchema[None] = None

    @model_validator(mode="after")
    def _meaningful(self) -> RewindOpData:
        if self.current is None and self.undo is None and not self.bindings:
            raise ValueError("a rewind-op needs bindings, current or undo")
        needed = max([self.current or 0, self.undo or 0])
        if len(self.snapshots) <= needed:
            raise ValueError("current/undo point past the end of snapshots")
        _check_positions(self.snapshots, self.bindings or [])
        return self


class ForkPendingData(_Record):
    """``rewind-fork-pending``: the parent's hand-off to the child fork (full SHAs)."""

    v: Literal[2]
    current: Sha
    undo: Sha | SkipJsonSchema[None] = None


class CustomEntry(BaseModel):
    """The Pi ``custom`` entry that carries a record (key order as ``pi.appendEntry`` writes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["custom"]
    customType: str
    data: Any = None
    id: str
    parentId: str | None
    timestamp: str


def _check_positions(snapshots: list[str], bindings: list[tuple[str, int]]) -> None:
    for entry_id, index in bindings:
        if index >= len(snapshots):
            raise ValueError(f"binding {entry_id!r} points at snapshot {index}, past the end")


def build_turn(snapshot_per_binding: list[tuple[str, str]]) -> RewindTurnData:
    """A turn record from ``(entryId, sha)`` pairs in capture order, snapshots de-duplicated."""
    snapshots, bindings = _positions(snapshot_per_binding)
    return RewindTurnData(v=RECORD_VERSION, snapshots=snapshots, bindings=bindings)


def build_op(
    *,
    current: str | None = None,
    undo: str | None = None,
    bindings: list[tuple[str, str]] | None = None,
) -> RewindOpData:
    """An op record; ``current`` takes position 0 and ``undo`` position 1, as the reference writes."""
    snapshots: list[str] = []
    if current is not None:
        snapshots.append(current)
    if undo is not None:
        if current is None:
            raise ValueError("an undo needs a current")
        snapshots.append(undo)
    pairs: list[tuple[str, int]] | None = None
    if bindings:
        pairs = []
        for entry_id, sha in bindings:
            if sha not in snapshots:
                snapshots.append(sha)
            pairs.append((entry_id, snapshots.index(sha)))
    return RewindOpData(
        v=RECORD_VERSION,
        snapshots=snapshots,
        current=0 if current is not None else None,
        undo=1 if undo is not None else None,
        bindings=pairs,
    )


def _positions(pairs: list[tuple[str, str]]) -> tuple[list[str], list[tuple[str, int]]]:
    snapshots: list[str] = []
    bindings: list[tuple[str, int]] = []
    for entry_id, sha in pairs:
        if sha not in snapshots:
            snapshots.append(sha)
        bindings.append((entry_id, snapshots.index(sha)))
    return snapshots, bindings
