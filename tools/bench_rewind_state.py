"""The built repository and session of ``tools/bench_rewind.py --dir``, kept for later runs.

Why it exists: building a 100k-file repository and a 200-prompt session through a real bridge
takes minutes; ``/rewind``'s list and previews are read-only, so later runs reuse them. The
state file names the session (its header and entries as Pi held them) and which prompts are the
points; a state built for other sizes is ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bridgekit import FakePi

STATE = "bench-rewind-state.json"


def save_state(parent: Path, pi: FakePi, users: list[str], key: str, touched: int) -> None:
    state = {
        "key": key,
        "header": pi.header,
        "entries": pi.entries,
        "ids": pi._ids,
        "users": users,
        "session": str(pi.session_file),
        "touched": touched,
    }
    (parent / STATE).write_text(json.dumps(state))


def load_state(parent: Path, key: str) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads((parent / STATE).read_text())
    except (OSError, ValueError):
        return None
    return state if state.get("key") == key else None
