"""What the first event starts (the bridge's own change feed) starts after that event's answer.

Pi awaits ``session_start``'s answer before its first prompt; the feed's walk of the tree, run by
a thread, holds the GIL in turns and slowed that answer by ~20 ms at 100k files (issue 34).
"""

from __future__ import annotations

import io

import orjson

from ledger.bridge.protocol import EventMessage
from ledger.bridge.server import BridgeServer


def test_the_first_event_hook_runs_once_the_event_is_answered() -> None:
    lines = b"".join(
        orjson.dumps({"type": "event", "id": n, "event": "ping", "ctx": {"hasUI": True}}) + b"\n"
        for n in (1, 2)
    )
    writer = io.BytesIO()
    seen: list[tuple[int | str, bool, int]] = []

    def first(message: EventMessage) -> None:
        answered = [orjson.loads(line) for line in writer.getvalue().splitlines()]
        seen.append((message.id, message.ctx.has_ui, len(answered)))

    BridgeServer(io.BytesIO(lines), writer, on_first_event=first).serve()
    assert seen == [(1, True, 1)], "called once, for event 1, after its result was written"
    assert [orjson.loads(line)["id"] for line in writer.getvalue().splitlines()] == [1, 2]
