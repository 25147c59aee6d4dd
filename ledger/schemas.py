"""JSON Schemas of the wire formats, generated from the pydantic models.

Why it exists: ``schemas/*.schema.json`` document the exact records for other implementations
(the TypeScript reference, a bridge client). They are generated here and checked in; a test
fails when the checked-in files drift from the models (``python tools/gen_schemas.py`` fixes it).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from ledger.record_models import CustomEntry, ForkPendingData, RewindOpData, RewindTurnData

BASE_ID = "https://rewind-ledger.invalid/schemas/"

_MODELS: dict[str, tuple[type[BaseModel], str]] = {
    "rewind-turn.schema.json": (
        RewindTurnData,
        "data of a rewind-turn custom entry (pi-rewind-hook v2): one per prompt; bindings in capture order",
    ),
    "rewind-op.schema.json": (
        RewindOpData,
        "data of a rewind-op custom entry (pi-rewind-hook v2): tree/fork/undo operations, compaction aliases, checkpoints",
    ),
    "rewind-fork-pending.schema.json": (
        ForkPendingData,
        "data of a rewind-fork-pending custom entry (pi-rewind-hook v2): the parent's hand-off to its fork, full SHAs",
    ),
    "custom-entry.schema.json": (
        CustomEntry,
        "a Pi custom entry as pi.appendEntry writes it; key order type, customType, data, id, parentId, timestamp",
    ),
}


def render_schemas() -> dict[str, str]:
    """File name → schema text (stable: same models, same bytes)."""
    rendered: dict[str, str] = {}
    for name, (model, description) in _MODELS.items():
        schema: dict[str, Any] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": BASE_ID + name,
            **model.model_json_schema(mode="serialization"),
        }
        schema["description"] = description
        rendered[name] = json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
    from ledger.bridge.protocol_models import bridge_schema

    bridge = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": BASE_ID + "bridge.schema.json",
        **{k: v for k, v in bridge_schema().items() if k != "$schema"},
    }
    rendered["bridge.schema.json"] = json.dumps(bridge, indent=2, ensure_ascii=False) + "\n"
    return rendered
