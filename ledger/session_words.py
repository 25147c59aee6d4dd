"""The words the presence registry's listings use (docs/design.md#sessions-here): the notice a
session shows of another, a line of ``rewind status`` / ``rewind doctor``, the footer's mark.

Why it exists apart from :mod:`ledger.presence`: the registry's file adapter is large on its own;
the wording is pure and names sessions through :mod:`ledger.session_names` (title + id tail, and
the pid of the Pi process, not of the helper serving it). :mod:`ledger.presence` re-exports it.

Invariants: pure (no file, no clock); one line per session.
"""

from __future__ import annotations

# Only ledger.presence imports this module, and it imports typing already: no start-up cost.
from collections.abc import Sequence
from typing import Protocol


class Listed(Protocol):
    """A session as the listings name it: :class:`ledger.presence.Presence` satisfies it. A
    protocol, not the class, so that this module (which presence imports) imports nothing of
    presence back, not even a type (issue 33: no import circles, type-only imports included)."""

    @property
    def label(self) -> str: ...
    @property
    def shown_pid(self) -> int: ...
    @property
    def started(self) -> str: ...
    @property
    def session_file(self) -> str | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def busy(self) -> bool: ...
    @property
    def whole(self) -> bool: ...


def footer_mark(count: int) -> str:
    """What the footer gains while ``count`` (this one included) sessions are live here."""
    return f" · {count} sessions here" if count >= 2 else ""


def describe(entry: Listed) -> str:
    """``session "fix the login bug" (…7f3a9c2e), pid N, started …`` (Pi's pid)."""
    return f"session {entry.label}, pid {entry.shown_pid}, started {entry.started}"


def others_notice(others: Sequence[Listed]) -> str:
    """The notice a session shows once per other live session it learns of."""
    if len(others) == 1:
        who = f"another Pi session works in this directory too ({describe(others[0])})"
    else:
        listed = "; ".join(describe(o) for o in others)
        who = f"{len(others)} other Pi sessions work in this directory too ({listed})"
    return f"Rewind: {who}; a restore in one overwrites what the other's agent writes"


def status_line(entry: Listed, *, own: bool = False) -> str:
    """One session in ``rewind status`` / ``rewind doctor``."""
    where = f" ({entry.session_file})" if entry.session_file else ""
    state = "in a turn" if entry.busy else "idle"
    hosted = ", hosted by the watcher" if entry.kind == "hosted" else ""
    if not entry.whole:
        state = "its entry unreadable (shown from its lock; its owner writes it again)"
    return f"  {describe(entry)}{hosted}, {state}{' (this one)' if own else ''}{where}"


__all__ = ["describe", "footer_mark", "others_notice", "status_line"]
