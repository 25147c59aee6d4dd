"""Parsing Pi session JSONL into values, the way Pi 0.73.1 reads it, plus a report of what was skipped.

Why it exists: every command starts from a session file, and real files are messy (torn last
lines after a crash, a repeated header after Pi's duplicate flush, orphans after /fork, legacy
v1/v2 files). This module turns bytes into a :class:`ParsedSession` and never raises on a bad
line: it skips the line and says why. It raises only when the file has no valid header, which
Pi itself treats as an empty file.

Invariants (the "compatible reader" rules, docs/formats.md#reading-rules and
docs/formats.md#line-format):
- lines are split on ``\\n``; blank lines are ignored; unparseable lines are skipped and reported;
- the first parsed line must be ``{"type":"session","id":<string>}``; later headers are skipped;
- every entry keeps its raw dict, unknown types and fields included;
- a header without ``version`` is v1, and v1/v2 content is migrated to v3 **in memory** with
  Pi's rules; the file is never rewritten here;
- pure: no I/O. Callers pass bytes;
- linear: each byte is split and parsed once (one ``split``, one ``loads`` per line); the
  header-only path looks at the first lines only, however long ``data`` is.
"""

from __future__ import annotations

import _thread
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ledger.plain import FrozenPlain, Plain

# Plain classes, not dataclasses: a spawned bridge imports this module before its first answer.
# orjson (and hashlib) are imported where used: importing orjson loads ``uuid``, ``platform``
# and its own init (~7-10 ms), and a spawned bridge answers Pi's session_start without parsing
# any file (issue 34, ledger/bridge/quick_start.py). Once loaded, an import is a dict look-up.

CURRENT_VERSION = 3


class Entry:
    """One non-header line of a session file.

    The fields the tree needs (id, parentId, type, timestamp, customType) are extracted at parse
    time; the full object (``raw``) is decoded again from the line's bytes on first use and then
    kept. Holding 100k parsed objects alive costs more than the parse (memory, and the cyclic
    collector walking a million containers); most commands only need the tree fields.
    """

    __slots__ = ("_bytes", "_raw", "custom_type", "id", "line", "parent_id", "timestamp", "type")

    def __init__(self, obj: dict[str, Any], line: int, source: bytes | None = None) -> None:
        self.id: str = obj["id"]
        parent = obj.get("parentId")
        self.parent_id: str | None = parent if isinstance(parent, str) else None
        kind = obj.get("type")
        self.type: str = kind if isinstance(kind, str) else ""
        self.timestamp: Any = obj.get("timestamp")
        custom_type = obj.get("customType")
        self.custom_type: str | None = custom_type if isinstance(custom_type, str) else None
        self.line = line
        # Keep either the bytes (re-decoded on demand) or, when there are none, the object.
        self._bytes = source
        self._raw: dict[str, Any] | None = None if source is not None else obj

    @property
    def raw(self) -> dict[str, Any]:
        """The parsed JSON object of the line, untouched (unknown fields included)."""
        if self._raw is None:
            import orjson

            assert self._bytes is not None
            self._raw = orjson.loads(self._bytes)
        return self._raw

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    def may_hold(self, needle: bytes) -> bool:
        """Whether the line may hold ``needle``: False only when its bytes are kept and lack
        it (a cheap filter before :attr:`raw` decodes the line and keeps the object)."""
        return self._bytes is None or needle in self._bytes

    @property
    def role(self) -> str | None:
        """The message role for ``message`` entries, else ``None``."""
        if self.type != "message":
            return None
        message = self.raw.get("message")
        if isinstance(message, dict):
            role = message.get("role")
            return role if isinstance(role, str) else None
        return None

    def __repr__(self) -> str:
        return f"Entry(id={self.id!r}, type={self.type!r}, parent={self.parent_id!r}, line={self.line})"


class SkippedLine(FrozenPlain):
    """A line the reader did not use, with its 1-based line number and the reason."""

    __slots__ = ("excerpt", "line", "reason")
    line: int
    reason: str
    excerpt: str

    def __init__(self, line: int, reason: str, excerpt: str = "") -> None:
        self._init(line=line, reason=reason, excerpt=excerpt)


class ParsedSession(Plain):
    __slots__ = ("ends_with_newline", "entries", "header", "migrated_from", "size", "skipped")

    def __init__(
        self,
        header: dict[str, Any],
        entries: list[Entry],
        skipped: list[SkippedLine] | None = None,
        migrated_from: int | None = None,
        ends_with_newline: bool = True,
        size: int = 0,
    ) -> None:
        self.header = header
        self.entries = entries
        self.skipped: list[SkippedLine] = [] if skipped is None else skipped
        self.migrated_from = migrated_from
        self.ends_with_newline = ends_with_newline
        self.size = size


class NoHeaderError(ValueError):
    """The first parsed line is not a session header: Pi treats such a file as empty."""


# Concurrency: the collector's switch is process-wide, and a bridge parses on several threads
# at once (the startup sweep's session scan beside the events; a watcher's hosted sessions and
# served commands). One pause for all of them: the first thread in remembers whether the
# collector was on and turns it off, the last one out turns it back on, both under this lock.
# A per-thread "was it on?" could leave it off for good: a thread that read "off" (another's
# pause) and disabled it just after that other thread re-enabled it never re-enabled it
# (tests/unit/test_no_cyclic_gc_threads.py). `_thread`, not `threading`: this module is imported
# before a spawned bridge's first answer, and `threading` costs ~1.7 ms to import.
_pause_lock = _thread.allocate_lock()
_pausing = 0
"""Threads inside :func:`no_cyclic_gc` (nested uses count each)."""
_resume = False
"""Whether the collector was on when the first of them came in."""


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic collector while allocating many small dicts; on again once no thread of
    this process is inside (if it was on when the first came in).

    Parsing creates no reference cycles, but 100k fresh containers trigger repeated full
    collections that cost more than the parse itself (measured: 2.3 s → 0.6 s at 100k entries).
    """
    global _pausing, _resume
    with _pause_lock:
        if _pausing == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pausing += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pausing -= 1
            if _pausing == 0 and _resume:
                gc.enable()


def parse_session_bytes(data: bytes) -> ParsedSession:
    """Parse a whole session file's bytes. Raises :class:`NoHeaderError` without a header."""
    with no_cyclic_gc():
        return _parse(data)


def _parse(data: bytes) -> ParsedSession:
    import orjson

    header: dict[str, Any] | None = None
    migrate = False
    entries: list[Entry] = []
    legacy: list[_RawLine] = []
    skipped: list[SkippedLine] = []
    ends_with_newline = data.endswith(b"\n")
    lines = data.split(b"\n")
    last_index = len(lines) - 1
    loads = orjson.loads
    for index, line in enumerate(lines):
        number = index + 1
        if not line.strip():
            continue
        source: bytes | None = line
        try:
            obj = loads(line)
        except orjson.JSONDecodeError:
            obj = _parse_lenient(line)
            if obj is _UNPARSEABLE:
                torn = index == last_index and not ends_with_newline
                skipped.append(
                    SkippedLine(
                        number, "torn last line" if torn else "not valid JSON", _excerpt(line)
                    )
                )
                continue
            source = None  # the bytes would not decode again: keep the repaired object
            skipped.append(
                SkippedLine(number, "invalid UTF-8 replaced with U+FFFD", _excerpt(line))
            )
        if header is None:
            if (
                isinstance(obj, dict)
                and obj.get("type") == "session"
                and isinstance(obj.get("id"), str)
            ):
                header = obj
                version = header.get("version")
                migrate = (
                    not isinstance(version, (int, float))
                    or isinstance(version, bool)
                    or version < CURRENT_VERSION
                )
                continue
            raise NoHeaderError(f"line {number} is not a session header")
        if not isinstance(obj, dict):
            skipped.append(SkippedLine(number, "not a JSON object", _excerpt(line)))
            continue
        if obj.get("type") == "session":
            skipped.append(SkippedLine(number, "repeated session header"))
            continue
        if migrate:
            legacy.append(_RawLine(obj, number))
        elif isinstance(obj.get("id"), str):
            entries.append(Entry(obj, number, source))
        else:
            skipped.append(SkippedLine(number, "entry without a string id"))
    if header is None:
        raise NoHeaderError("the file has no session header")

    migrated_from: int | None = None
    if migrate:
        version = header.get("version")
        if not isinstance(version, (int, float)) or isinstance(version, bool) or version < 2:
            header = _migrate_v1_to_v2(header, legacy)
            migrated_from = 1
        header = _migrate_v2_to_v3(header, legacy)
        migrated_from = migrated_from or 2
        for raw_line in legacy:
            if isinstance(raw_line.obj.get("id"), str):
                entries.append(Entry(raw_line.obj, raw_line.line))
            else:
                skipped.append(SkippedLine(raw_line.line, "entry without a string id"))
        skipped.sort(key=lambda s: s.line)
    return ParsedSession(header, entries, skipped, migrated_from, ends_with_newline, len(data))


def parse_header_only(data: bytes, max_lines: int = 5) -> dict[str, Any]:
    """The header from the first ``max_lines`` non-empty lines (the reference's fast path).

    Only those lines are looked at: ``data`` may be a whole file, and splitting all of it to
    read five lines would copy every byte."""
    import orjson

    seen = 0
    for line in _first_lines(data):
        if not line.strip():
            continue
        seen += 1
        if seen > max_lines:
            break
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            obj = _parse_lenient(line)
            if obj is _UNPARSEABLE:
                continue
        if (
            isinstance(obj, dict)
            and obj.get("type") == "session"
            and isinstance(obj.get("id"), str)
        ):
            return obj
        raise NoHeaderError(f"line {seen} is not a session header")
    raise NoHeaderError("the file has no session header")


# --- internals ----------------------------------------------------------------------------

_UNPARSEABLE = object()


def _first_lines(data: bytes) -> Iterator[bytes]:
    """The lines of ``data`` (split on ``\\n``) one at a time, each byte searched once."""
    start = 0
    while True:
        end = data.find(b"\n", start)
        if end < 0:
            yield data[start:]
            return
        yield data[start:end]
        start = end + 1


class _RawLine:
    __slots__ = ("line", "obj")

    def __init__(self, obj: dict[str, Any], line: int) -> None:
        self.obj = obj
        self.line = line


def _parse_lenient(line: bytes) -> Any:
    """Pi reads files as UTF-8 with replacement; a line whose only fault is bad bytes still parses."""
    import orjson

    try:
        text = line.decode("utf-8", errors="replace")
        if "\ufffd" not in text:
            return _UNPARSEABLE
        return orjson.loads(text)
    except (orjson.JSONDecodeError, UnicodeError):
        return _UNPARSEABLE


def _excerpt(line: bytes, limit: int = 60) -> str:
    text = line[: limit * 4].decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _migrate_v1_to_v2(header: dict[str, Any], lines: list[_RawLine]) -> dict[str, Any]:
    """Pi's ``migrateV1ToV2``, with deterministic ids instead of random ones.

    Pi assigns random ids when it rewrites the file; we never rewrite on read, so ids are derived
    from the session id and position to stay stable across reads of the same file.
    """
    header = {**header, "version": 2}
    session_id = str(header.get("id"))
    taken: set[str] = set()
    previous: str | None = None
    # Pi indexes firstKeptEntryIndex into the parsed lines with the header at position 0.
    positional: list[dict[str, Any] | None] = [None] + [raw.obj for raw in lines]
    for position, raw in enumerate(lines, start=1):
        obj = dict(raw.obj)
        obj.pop("id", None)
        obj.pop("parentId", None)
        obj["id"] = _stable_id(session_id, position, taken)
        obj["parentId"] = previous
        previous = obj["id"]
        if obj.get("type") == "compaction" and "firstKeptEntryIndex" in obj:
            index = obj.pop("firstKeptEntryIndex")
            if isinstance(index, int) and not isinstance(index, bool) and 0 < index < position:
                target = positional[index]
                if target is not None and target.get("type") != "session":
                    obj["firstKeptEntryId"] = target["id"]
        positional[position] = obj
        raw.obj = obj
    return header


def _migrate_v2_to_v3(header: dict[str, Any], lines: list[_RawLine]) -> dict[str, Any]:
    header = {**header, "version": CURRENT_VERSION}
    for raw in lines:
        message = raw.obj.get("message")
        if (
            raw.obj.get("type") == "message"
            and isinstance(message, dict)
            and message.get("role") == "hookMessage"
        ):
            raw.obj = {**raw.obj, "message": {**message, "role": "custom"}}
    return header


def _stable_id(session_id: str, position: int, taken: set[str]) -> str:
    from ledger.digests import sha1

    salt = 0
    while True:
        digest = sha1(f"{session_id}\0{position}\0{salt}".encode()).hexdigest()[:8]
        if digest not in taken:
            taken.add(digest)
            return digest
        salt += 1
