"""Injectable time and identifiers.

Why it exists: records carry timestamps and fresh ids, and tests must be able to pin both. Every
component that stamps or names something takes a :class:`Clock` and an :class:`IdSource`
instead of calling ``time`` or ``uuid`` itself.

Formats follow Pi 0.73.1: entry timestamps are ISO 8601 UTC with milliseconds and a ``Z``
(``new Date().toISOString()``); entry ids are 8 lowercase hex characters unique within one file
(a full UUID after 100 collisions, as Pi does); session ids are UUIDv7.
"""

from __future__ import annotations

import os
import time
from collections.abc import Container
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import uuid


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FixedClock:
    """A clock for tests: starts at ``start_ms`` and advances ``step_ms`` per reading."""

    def __init__(self, start_ms: int, step_ms: int = 1) -> None:
        self._next = start_ms
        self._step = step_ms

    def now_ms(self) -> int:
        value = self._next
        self._next += self._step
        return value


def iso_from_ms(ms: int) -> str:
    """``2026-11-22T03:52:47.822Z`` for an epoch-milliseconds value, like JS ``toISOString``."""
    dt = datetime.fromtimestamp(ms // 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def ms_from_iso(value: object) -> int:
    """Epoch milliseconds of an ISO timestamp; 0 when it cannot be parsed (the reference's rule)."""
    if not isinstance(value, str) or not value:
        return 0
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return 0
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


class IdSource(Protocol):
    def entry_id(self, taken: Container[str]) -> str: ...

    def session_id(self, now_ms: int) -> str: ...


def _uuid4() -> uuid.UUID:
    import uuid  # here: the module loads ``platform`` (~5 ms), and most commands make no id

    return uuid.uuid4()


class RandomIds:
    """Pi's id rules: ``randomUUID().slice(0, 8)`` checked against the file, up to 100 tries."""

    def entry_id(self, taken: Container[str]) -> str:
        for _ in range(100):
            candidate = _uuid4().hex[:8]
            if candidate not in taken:
                return candidate
        return str(_uuid4())

    def session_id(self, now_ms: int) -> str:
        return uuid7(now_ms)


class SequentialIds:
    """Deterministic ids for tests: ``00000001``, ``00000002``, … skipping taken ones."""

    def __init__(self, start: int = 1) -> None:
        self._n = start

    def entry_id(self, taken: Container[str]) -> str:
        while True:
            candidate = f"{self._n:08x}"
            self._n += 1
            if candidate not in taken:
                return candidate

    def session_id(self, now_ms: int) -> str:
        value = f"{self._n:032x}"
        self._n += 1
        return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"


def uuid7(now_ms: int) -> str:
    """An RFC 9562 UUIDv7 string for the given time."""
    rand = int.from_bytes(os.urandom(10), "big")
    value = (now_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    import uuid

    return str(uuid.UUID(int=value))
