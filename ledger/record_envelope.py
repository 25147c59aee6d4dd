"""The rewind records' names and Pi's custom-entry envelope (re-exported by :mod:`ledger.records`).

Why it exists apart from :mod:`ledger.records`: the session store and the bridge's dispatcher
need only these, and they are imported before a spawned bridge answers Pi's ``session_start``
(issue 34), while reading records needs dataclasses (~1-1.5 ms each to create, besides
``dataclasses`` and ``inspect``). Invariants: no I/O; imports nothing of ``ledger``.
"""

from __future__ import annotations

from typing import Any

TURN = "rewind-turn"
OP = "rewind-op"
FORK_PENDING = "rewind-fork-pending"
RECORD_TYPES = (TURN, OP, FORK_PENDING)
RECORD_VERSION = 2


def serialize_entry(entry: dict[str, Any]) -> bytes:
    """One JSONL line as Pi writes it: compact JSON, raw UTF-8, ``\\n``-terminated."""
    import orjson  # here: a spawned bridge's first answer writes no record (issue 34)

    return orjson.dumps(entry) + b"\n"


def custom_entry(
    custom_type: str, data: dict[str, Any], entry_id: str, parent_id: str | None, timestamp: str
) -> dict[str, Any]:
    """The envelope dict in Pi's key order (``type, customType, data, id, parentId, timestamp``)."""
    return {
        "type": "custom",
        "customType": custom_type,
        "data": data,
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": timestamp,
    }
