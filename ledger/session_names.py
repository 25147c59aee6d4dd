"""Names people can tell apart: how a session is named to the user (issue 33).

Why it exists: Pi's session ids are UUIDv7, whose first 48 bits are the clock, so two sessions
started seconds apart share their first eight characters (``01a22016…``) and a prefix names
nobody. A session is therefore named by what the user gave it: Pi's session name (its latest
``session_info`` entry with a ``name``), else the first words of its first prompt, plus the last
eight characters of its id (the random tail of a UUIDv7), e.g. ``"fix the login bug"
(…7f3a9c2e)``; with neither a name nor a prompt yet, the tail alone (``…7f3a9c2e``). Callers
write ``session {label}`` where a sentence needs the noun.

The listings (``rewind status``, ``rewind doctor``, the notice of another session, the turn
gate's refusals) never read another session's file for this: each live session writes its title
into its presence entry (:mod:`ledger.presence`), and the wording here composes it with the id.

Invariants:
- Pure: no file, no clock; the same inputs give the same label.
- A label is one line of printable text, bounded (:data:`MAX_TITLE_CHARS` of title plus the
  tail): whitespace runs (newlines included) collapse to one space, control and format
  characters (``\\x1b`` of a terminal escape, bidi overrides) are removed, so a title taken from a
  file or a prompt can neither break a line nor rewrite the terminal.
- Never the time-ordered prefix alone: the id part is always the tail.
"""

from __future__ import annotations

import itertools
import os
import re
import unicodedata
from pathlib import Path

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.session.model import Session

MAX_TITLE_CHARS = 40
"""Characters of a title shown (a word cut at the end gets ``…``)."""
TAIL_CHARS = 8
"""The id's last characters shown: a UUIDv7's random part (its first 12 hex digits are time)."""
_SPACE = re.compile(r"\s+")
_ID_CHARS = re.compile(r"[^0-9A-Za-z]")


def clean_line(text: str) -> str:
    """``text`` as one line of printable characters: whitespace runs become one space, control
    (``Cc``), format (``Cf``: bidi overrides, zero-width), separator-like and unassigned
    characters are dropped."""
    collapsed = _SPACE.sub(" ", text)
    kept = "".join(
        ch for ch in collapsed if ch == " " or unicodedata.category(ch) not in _DROPPED_CATEGORIES
    )
    return _SPACE.sub(" ", kept).strip()


_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})


def title_of(
    name: str | None, first_prompt: str | None, limit: int = MAX_TITLE_CHARS
) -> str | None:
    """The session's name when set, else its first prompt's first words; one line, at most
    ``limit`` characters (cut at a word when one ends in the last third, ``…`` when cut);
    ``None`` when neither has any printable text."""
    for text in (name, first_prompt):
        if not text:
            continue
        line = clean_line(text)
        if not line:
            continue
        if len(line) <= limit:
            return line
        cut = line[:limit]
        space = cut.rfind(" ")
        if space >= limit * 2 // 3:
            cut = cut[:space]
        return cut.rstrip() + "…"
    return None


def id_tail(session_id: str) -> str:
    """``…7f3a9c2e``: the last :data:`TAIL_CHARS` letters and digits of the id (a UUIDv7's
    random part); a short id whole, without ``…``."""
    compact = _ID_CHARS.sub("", session_id)
    if not compact:
        return "?"
    if len(compact) <= TAIL_CHARS:
        return compact
    return "…" + compact[-TAIL_CHARS:]


def session_label(session_id: str, title: str | None = None) -> str:
    """``"fix the login bug" (…7f3a9c2e)``, or ``…7f3a9c2e`` without a title. ``title`` is
    cleaned and bounded again (it may come from another process's presence entry)."""
    shown = title_of(title, None)
    tail = id_tail(session_id)
    return f'"{shown}" ({tail})' if shown else tail


def label_from(session_id: str, name: str | None, first_prompt: str | None) -> str:
    """:func:`session_label` from a session's name and first prompt (the name wins)."""
    return session_label(session_id, title_of(name, first_prompt))


def session_title(session: Session) -> str | None:
    """The title of a parsed session: its name (latest ``session_info``), else the text of its
    first user message; ``None`` when it has neither."""
    from ledger.session.model import content_text

    name = session.name
    if name:
        return title_of(name, None)
    for entry in session.entries:
        if entry.type == "message" and entry.role == "user":
            message = entry.raw.get("message")
            text = content_text(message.get("content")) if isinstance(message, dict) else ""
            title = title_of(None, text)
            if title:
                return title
    return None


HEAD_TITLE_BYTES = 64 * 1024
"""What :func:`head_title` reads of a session file at most."""
HEAD_TITLE_LINES = 200


def head_title(path: Path | str) -> str | None:
    """A session file's title from its first lines only (at most :data:`HEAD_TITLE_BYTES`):
    the latest name set there, else the first prompt's words. For naming a session that is not
    live in a warning without reading its whole file (a name set later is missed; a live
    session announces its current title itself). ``None`` when unreadable or untitled."""
    import orjson

    from ledger.safe_read import open_regular, read_head
    from ledger.session.model import content_text

    try:
        fd, _ = open_regular(path)
    except OSError:
        return None
    try:
        head, _cut = read_head(fd, HEAD_TITLE_LINES, HEAD_TITLE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    name: str | None = None
    prompt: str | None = None
    for line in head.splitlines():
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(entry, dict):
            continue
        if entry.get("type") == "session_info":
            value = entry.get("name")
            name = value.strip() or None if isinstance(value, str) else None
        message = entry.get("message") if entry.get("type") == "message" else None
        if prompt is None and isinstance(message, dict) and message.get("role") == "user":
            prompt = content_text(message.get("content")) or None
    return title_of(name, prompt)


class TitleTracker:
    """:func:`session_title` kept up to date as a live session grows: each :meth:`update` reads
    only the entries appended since the last one (a session file is append-only), so a bridge
    asking after every prompt pays for the new entries, not for the whole history."""

    def __init__(self) -> None:
        self._seen = 0
        self._name: str | None = None
        self._prompt: str | None = None

    def _reset(self) -> None:
        self._seen, self._name, self._prompt = 0, None, None

    def update(self, session: Session) -> str | None:
        from ledger.session.model import content_text

        entries = session.entries
        if len(entries) < self._seen:  # another session, or one read anew: start over
            self._reset()
        for entry in itertools.islice(entries, self._seen, None):
            if entry.type == "session_info":
                value = entry.raw.get("name")  # the latest one wins, as Session.name
                self._name = value.strip() if isinstance(value, str) and value.strip() else None
            elif self._prompt is None and entry.type == "message" and entry.role == "user":
                message = entry.raw.get("message")
                text = content_text(message.get("content")) if isinstance(message, dict) else ""
                self._prompt = title_of(None, text)
        self._seen = len(entries)
        return title_of(self._name, None) if self._name else self._prompt


__all__ = [
    "MAX_TITLE_CHARS",
    "TAIL_CHARS",
    "TitleTracker",
    "clean_line",
    "id_tail",
    "label_from",
    "session_label",
    "session_title",
    "title_of",
]
