"""The bridge protocol's names: its version, its events and its error codes.

Why it exists: both the plain message reader (:mod:`ledger.bridge.protocol`) and the pydantic
models that generate the schema (:mod:`ledger.bridge.protocol_models`) need them; kept here, the
models import no reader and the reader imports the models only on their own path (no import
circle).

Invariants: plain values only, standard library only.
"""

from __future__ import annotations

from typing import Literal

PROTOCOL_VERSION = 1

EventName = Literal[
    "session_start",
    "before_agent_start",
    "turn_start",
    "message_end",
    "turn_end",
    "agent_end",
    "session_compact",
    "session_before_tree",
    "session_tree",
    "session_before_fork",
    "session_shutdown",
    "checkpoint_entry",
    "fork_preference",
    "rewind_list",
    "rewind_preview",
    "rewind_diff",
    "rewind_apply",
    "rewind_intent",
    "rewind_tool",
    "ping",
]
EVENT_NAMES: frozenset[str] = frozenset(EventName.__args__)  # type: ignore[attr-defined]

ErrorCode = Literal["bad-json", "bad-message", "unknown-event", "failed", "internal"]
"""Why an event or message got an ``error``: unparsable JSON, a message of the wrong shape (or out
of turn), an unknown event, a refusal of the engine (a :class:`~ledger.errors.LedgerError`), or
an unexpected failure inside the bridge."""


__all__ = ["EVENT_NAMES", "PROTOCOL_VERSION", "ErrorCode", "EventName"]
