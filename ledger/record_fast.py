"""The three rewind records built without pydantic: what the engine writes on every record.

Why it exists: importing the pydantic models of :mod:`ledger.record_models` costs 0.13–0.44 s
per process (pydantic, pydantic-core, the models' schema build), and every ``rewind
checkpoint``, ``restore`` or ``undo`` writes a record (issue 34: a process imports only what it
uses). The records are small and their rules few, so they are built here as plain dicts.

Invariants:
- Same bytes as the models: for every input, :func:`build_turn`, :func:`build_op` and
  :class:`ForkPendingData` give exactly ``record_models``'s ``to_data()`` (same keys, same key
  order, same values, absent optional keys omitted), or raise where the models raise. Held by
  tests/property/test_record_fast_properties.py (random inputs, valid and not, against the
  models and ``schemas/``) and a golden in tests/unit/test_record_fast.py.
- Valid inputs never import pydantic: the checks here accept only what the models accept
  unchanged (``str`` SHAs of 40 lowercase hex digits, non-empty ``str`` entry ids). Anything
  else is decided by the models themselves (imported then, on that path only), so a coercion or
  an error is exactly theirs; that happens only on a bug in a caller.
- Pure, no I/O; the same call names as ``record_models``, so the engine swaps one import line.
"""

from __future__ import annotations

from typing import Any

from ledger.records import RECORD_VERSION

_HEX = "0123456789abcdef"


def _sha_ok(value: object) -> bool:
    # The models' pattern ^[0-9a-f]{40}$ (pydantic-core's regex: $ is the end, no newline).
    return type(value) is str and len(value) == 40 and not value.strip(_HEX)


def _entry_ok(value: object) -> bool:
    return type(value) is str and len(value) > 0


class RecordData:
    """A built record: :meth:`to_data` gives its ``data`` object (a fresh dict each call, as
    ``model_dump`` does)."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def to_data(self) -> dict[str, Any]:
        """The record's ``data`` object in the reference key order."""
        return {
            key: ([list(b) for b in value] if key == "bindings" else list(value))
            if isinstance(value, list)
            else value
            for key, value in self._data.items()
        }


def build_turn(snapshot_per_binding: list[tuple[str, str]]) -> RecordData:
    """A ``rewind-turn`` from ``(entryId, sha)`` pairs in capture order, snapshots de-duplicated
    (``record_models.build_turn``)."""
    snapshots, bindings = _positions(snapshot_per_binding)
    if all(map(_sha_ok, snapshots)) and all(_entry_ok(entry) for entry, _ in bindings):
        return RecordData(
            {
                "v": RECORD_VERSION,
                "snapshots": snapshots,
                "bindings": [[entry, index] for entry, index in bindings],
            }
        )
    from ledger.record_models import build_turn as checked  # the models decide (a caller's bug)

    return RecordData(checked(snapshot_per_binding).to_data())


def build_op(
    *,
    current: str | None = None,
    undo: str | None = None,
    bindings: list[tuple[str, str]] | None = None,
) -> RecordData:
    """A ``rewind-op``; ``current`` takes position 0 and ``undo`` position 1, as the reference
    writes (``record_models.build_op``)."""
    snapshots: list[str] = []
    if current is not None:
        snapshots.append(current)
    if undo is not None:
        if current is None:
            raise ValueError("an undo needs a current")
        snapshots.append(undo)
    pairs: list[list[Any]] = []
    for entry_id, sha in bindings or ():
        if sha not in snapshots:
            snapshots.append(sha)
        pairs.append([entry_id, snapshots.index(sha)])
    meaningful = current is not None or bool(pairs)  # an undo always has a current
    if meaningful and all(map(_sha_ok, snapshots)) and all(_entry_ok(entry) for entry, _ in pairs):
        data: dict[str, Any] = {"v": RECORD_VERSION, "snapshots": snapshots}
        if current is not None:
            data["current"] = 0
        if undo is not None:
            data["undo"] = 1
        if pairs:
            data["bindings"] = pairs
        return RecordData(data)
    from ledger.record_models import build_op as checked  # the models decide (a caller's bug)

    return RecordData(checked(current=current, undo=undo, bindings=bindings).to_data())


def ForkPendingData(*, v: int, current: str, undo: str | None = None) -> RecordData:
    """A ``rewind-fork-pending`` (called as ``record_models.ForkPendingData(...)`` is)."""
    if (
        v == RECORD_VERSION
        and type(v) is int
        and _sha_ok(current)
        and (undo is None or _sha_ok(undo))
    ):
        data: dict[str, Any] = {"v": RECORD_VERSION, "current": current}
        if undo is not None:
            data["undo"] = undo
        return RecordData(data)
    from ledger.record_models import ForkPendingData as Checked  # the models decide

    return RecordData(Checked(v=v, current=current, undo=undo).to_data())


def _positions(pairs: list[tuple[str, str]]) -> tuple[list[str], list[tuple[str, int]]]:
    snapshots: list[str] = []
    bindings: list[tuple[str, int]] = []
    for entry_id, sha in pairs:
        if sha not in snapshots:
            snapshots.append(sha)
        bindings.append((entry_id, snapshots.index(sha)))
    return snapshots, bindings
