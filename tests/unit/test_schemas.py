"""The checked-in schemas are exactly what the models generate, and they accept real records."""

from __future__ import annotations

import json

from ledger.record_models import build_op, build_turn
from ledger.schemas import render_schemas
from tests.gitkit import ROOT


def test_checked_in_schemas_match_the_models() -> None:
    rendered = render_schemas()
    on_disk = {p.name: p.read_text() for p in (ROOT / "schemas").glob("*.schema.json")}
    assert on_disk == rendered, "run: python tools/gen_schemas.py"


def test_schemas_describe_the_reference_key_order() -> None:
    op = json.loads(render_schemas()["rewind-op.schema.json"])
    assert list(op["properties"]) == ["v", "snapshots", "current", "undo", "bindings"]
    assert list(op["properties"]) == list(
        build_op(current="a" * 40, undo="b" * 40, bindings=[("e", "a" * 40)]).to_data()
    )
    turn = json.loads(render_schemas()["rewind-turn.schema.json"])
    assert list(turn["properties"]) == list(build_turn([("e", "a" * 40)]).to_data())
    entry = json.loads(render_schemas()["custom-entry.schema.json"])
    assert list(entry["properties"]) == [
        "type",
        "customType",
        "data",
        "id",
        "parentId",
        "timestamp",
    ]


def test_the_bridge_schema_covers_every_message_and_event() -> None:
    from ledger.bridge.protocol import EVENT_NAMES

    bridge = json.loads(render_schemas()["bridge.schema.json"])
    assert set(bridge["$defs"]) >= {
        "EventMessage",
        "ReplyMessage",
        "CallMessage",
        "ResultMessage",
        "ErrorMessage",
    }
    assert set(bridge["$defs"]["EventMessage"]["properties"]["event"]["enum"]) == EVENT_NAMES
