"""The three rewind records of pi-rewind-hook v2 on the wire: names, envelope and lenient reading.

Why it exists: the records are the ledger. They must be written byte-compatible with the
reference extension (custom-entry envelope ``type, customType, data, id, parentId, timestamp``)
and read the way the reference reads them, so that both tools can share a repository and its
sessions. The pydantic models that define records (exact ``data`` key orders) and generate the
schemas live in :mod:`ledger.record_models`; records are *written* by :mod:`ledger.record_fast`
(plain dicts held to those models by tests) and read here, so no command imports pydantic.

Invariants:
- Reading never raises: :func:`decode_record` applies the reference validators (``v === 2``,
  ``snapshots`` an array, …) and returns either a :class:`DecodedRecord` (with positions
  resolved to SHAs and any unusable binding listed in ``problems``) or an :class:`InvalidRecord`.
- Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from ledger.plain import FrozenPlain

# The names and the envelope live in ledger.record_envelope (no dataclasses: a spawned bridge
# imports them before its first answer, issue 34); re-exported here, where callers look.
from ledger.record_envelope import FORK_PENDING as FORK_PENDING
from ledger.record_envelope import OP as OP
from ledger.record_envelope import RECORD_TYPES as RECORD_TYPES
from ledger.record_envelope import RECORD_VERSION as RECORD_VERSION
from ledger.record_envelope import TURN as TURN
from ledger.record_envelope import custom_entry as custom_entry
from ledger.record_envelope import serialize_entry as serialize_entry

# --- reading ------------------------------------------------------------------------------


class DecodedRecord(FrozenPlain):
    """A valid record with positions resolved to SHAs (a fork-pending record has no bindings)."""

    __slots__ = (
        "bindings",
        "current",
        "custom_type",
        "parent_id",
        "problems",
        "record_id",
        "timestamp",
        "undo",
    )
    custom_type: str
    record_id: str
    parent_id: str | None
    timestamp: Any
    bindings: tuple[tuple[str, str], ...]
    current: str | None
    undo: str | None
    problems: tuple[str, ...]

    def __init__(
        self,
        custom_type: str,
        record_id: str,
        parent_id: str | None,
        timestamp: Any,
        bindings: tuple[tuple[str, str], ...],
        current: str | None,
        undo: str | None,
        problems: tuple[str, ...] = (),
    ) -> None:
        object.__setattr__(self, "custom_type", custom_type)
        object.__setattr__(self, "record_id", record_id)
        object.__setattr__(self, "parent_id", parent_id)
        object.__setattr__(self, "timestamp", timestamp)
        object.__setattr__(self, "bindings", bindings)
        object.__setattr__(self, "current", current)
        object.__setattr__(self, "undo", undo)
        object.__setattr__(self, "problems", problems)

    def _fields(self) -> tuple[object, ...]:
        return (
            self.custom_type,
            self.record_id,
            self.parent_id,
            self.timestamp,
            self.bindings,
            self.current,
            self.undo,
            self.problems,
        )

    @property
    def last_binding_sha(self) -> str | None:
        return self.bindings[-1][1] if self.bindings else None


class InvalidRecord(FrozenPlain):
    __slots__ = ("custom_type", "reason", "record_id")
    custom_type: str
    record_id: str
    reason: str

    def __init__(self, custom_type: str, record_id: str, reason: str) -> None:
        self._init(custom_type=custom_type, record_id=record_id, reason=reason)


def _is_v2(data: dict[str, Any]) -> bool:
    version = data.get("v")
    return (
        not isinstance(version, bool)
        and isinstance(version, (int, float))
        and version == RECORD_VERSION
    )


def _sha_at(snapshots: list[Any], index: Any) -> str | None:
    if (
        isinstance(index, bool)
        or not isinstance(index, int)
        or index < 0
        or index >= len(snapshots)
    ):
        return None
    value = snapshots[index]
    return value if isinstance(value, str) and value else None


def decode_record(
    custom_type: str, data: Any, record_id: str, parent_id: str | None, timestamp: Any
) -> DecodedRecord | InvalidRecord:
    """Read one record's ``data`` with the reference validators (docs/formats.md#reading-records)."""
    if not isinstance(data, dict):
        return InvalidRecord(custom_type, record_id, "data is not an object")
    if not _is_v2(data):
        return InvalidRecord(custom_type, record_id, f"v is {data.get('v')!r}, not 2")
    if custom_type == FORK_PENDING:
        current = data.get("current")
        if not isinstance(current, str) or not current:
            return InvalidRecord(custom_type, record_id, "current is not a non-empty string")
        undo = data.get("undo")
        return DecodedRecord(
            custom_type,
            record_id,
            parent_id,
            timestamp,
            (),
            current,
            undo if isinstance(undo, str) and undo else None,
        )
    snapshots = data.get("snapshots")
    if not isinstance(snapshots, list):
        return InvalidRecord(custom_type, record_id, "snapshots is not an array")
    raw_bindings = data.get("bindings")
    if custom_type == TURN and not isinstance(raw_bindings, list):
        return InvalidRecord(custom_type, record_id, "bindings is not an array")
    problems: list[str] = []
    bindings: list[tuple[str, str]] = []
    if isinstance(raw_bindings, list):
        for position, binding in enumerate(raw_bindings):
            if not isinstance(binding, list) or len(binding) < 2:
                problems.append(f"binding {position} is not an [entryId, index] pair")
                continue
            entry_id, index = binding[0], binding[1]
            sha = _sha_at(snapshots, index)
            if not isinstance(entry_id, str) or not entry_id:
                problems.append(f"binding {position} has no entry id")
            elif sha is None:
                problems.append(f"binding {position} ({entry_id}) points at no snapshot")
            else:
                bindings.append((entry_id, sha))
    current = _sha_at(snapshots, data.get("current")) if custom_type == OP else None
    undo = _sha_at(snapshots, data.get("undo")) if custom_type == OP else None
    return DecodedRecord(
        custom_type,
        record_id,
        parent_id,
        timestamp,
        tuple(bindings),
        current,
        undo,
        tuple(problems),
    )
