"""JSON on the bridge's wire: orjson once anything has loaded it, the standard library before.

Why it exists: a spawned bridge answers Pi's ``session_start`` before it loads the engine
(:mod:`ledger.bridge.quick_start`, issue 34: ≤ 100 ms at 100k files). Importing orjson costs
~7-10 ms of that answer (its init loads ``uuid`` with ``platform``, ``datetime``, ``json`` and
``dataclasses``), while the standard library's ``json`` is loaded anyway (settings, presence).
The engine, started right after the answer, loads orjson; from then on every line goes through
orjson, as before. A watcher's hosted sessions never take the standard library's path.

Invariants (what makes the two paths one codec):
- **orjson's verdicts.** The standard library decodes a line only where it reads it exactly as
  orjson does: UTF-8 (decoded strictly first: ``json`` would guess UTF-16/32), at most
  :data:`STDLIB_MAX_BYTES` (orjson is faster on a long session's reply, and its import is then
  worth it), no ``\\ud…`` escape (a lone surrogate: ``json`` takes it, orjson refuses it), no
  ``NaN``/``Infinity``, no integer outside 64 bits and no float overflowing to infinity (orjson
  refuses them). Anything ``json`` refuses or any of these is handed to orjson, so an error's
  text is orjson's. :class:`json.JSONDecodeError` is what a caller catches: orjson's error is a
  subclass of it.
- **The same JSON out.** Compact, raw UTF-8 (``ensure_ascii=False``), one line ending in
  ``\\n``. What ``json`` cannot write as orjson does (a lone surrogate, NaN, an object it does
  not know, such as a dataclass that orjson would write) goes to orjson, which writes it or
  raises as before. Dictionary keys in this protocol are always strings and its integers fit
  64 bits (``json`` would turn an integer key into a string, and write a larger integer, where
  orjson raises).
"""

from __future__ import annotations

import json
import sys

# Not `from typing import Any` (start-up cost; see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STDLIB_MAX_BYTES = 1 << 18
"""Longer lines go to orjson (a resumed session's reply: ~3x faster than ``json``)."""

_INT64_MIN = -(1 << 63)
_UINT64_MAX = (1 << 64) - 1


class _NotOrjsons(ValueError):
    """A value orjson reads differently or refuses: orjson decides."""


def _refuse_constant(name: str) -> Any:
    raise _NotOrjsons(name)


def _int(text: str) -> int:
    value = int(text)
    if not _INT64_MIN <= value <= _UINT64_MAX:
        raise _NotOrjsons(text)
    return value


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotOrjsons(text)
    return value


def loads(line: bytes) -> Any:
    """``orjson.loads(line)``, by the standard library while orjson is not loaded (module
    docstring). Raises :class:`json.JSONDecodeError` (orjson's) for what is not valid JSON."""
    if "orjson" not in sys.modules:
        read = stdlib_loads(line)
        if read is not None:
            return read[0]
    import orjson

    return orjson.loads(line)


def stdlib_loads(line: bytes) -> list[Any] | None:
    """``[value]`` when the standard library reads ``line`` as orjson does; None when orjson
    must decide (module docstring)."""
    if len(line) > STDLIB_MAX_BYTES or b"\\ud" in line or b"\\uD" in line:
        return None
    try:
        return [
            json.loads(
                line.decode("utf-8"),
                parse_constant=_refuse_constant,
                parse_int=_int,
                parse_float=_float,
            )
        ]
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError too
        return None  # orjson gives the verdict, and its message


def dumps_line(message: dict[str, Any]) -> bytes:
    """``orjson.dumps(message, option=OPT_APPEND_NEWLINE)``, by the standard library while
    orjson is not loaded (module docstring)."""
    if "orjson" not in sys.modules:
        written = stdlib_dumps_line(message)
        if written is not None:
            return written
    import orjson

    return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)


def stdlib_dumps_line(message: dict[str, Any]) -> bytes | None:
    """The line the standard library writes for ``message``, parsed back as orjson's would be;
    None when orjson must write it, or raise (module docstring)."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return (text + "\n").encode("utf-8")
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return None


__all__ = ["STDLIB_MAX_BYTES", "dumps_line", "loads", "stdlib_dumps_line", "stdlib_loads"]
