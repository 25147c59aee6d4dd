"""The words the presence registry's listings use (docs/design.md#sessions-here): the notice a
session shows of another, a line of ``rewind status`` / ``rewind doctor``, the footer's mark.

Why it exists apart from :mod:`ledger.presence`: the registry's file adapter is large on its own;
the wording is pure and names sessions through :mod:`ledger.session_names` (title + id tail, and
the pid of the Pi process, not of the helper serving it). :mod:`ledger.presence` re-exports it.

Invariants: pure (no file, no clock); one line per session.
"""

from __future__ import annotations

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.presence import Presence


def footer_mark(count: int) -> str:
    """What the footer gains while ``count`` (this one included) sessions are live here."""
    return f" · {count} sessions here" if count >= 2 else ""


def describe(entry: Presence) -> str:
    """``session "fix the login bug" (…7f3a9c2e), pid N, started …`` (Pi's pid)."""
    return f"session {entry.label}, pid {entry.shown_pid}, started {entry.started}"


def others_notice(others: list[Presence]) -> str:
    """The notice a session shows once per other live session it learns of."""
    if len(others) == 1:
        who = f"another Pi session works in this directory too ({describe(others[0])})"
    else:
        listed = "; ".join(describe(o) for o in others)
        who = f"{len(others)} other Pi sessions work in this directory too ({listed})"
    return f"Rewind: {who}; a restore in one overwrites what the other's agent writes"


def status_line(entry: Presence, *, own: bool = False) -> str:
    """One session in ``rewind status`` / ``rewind doctor``."""
    where = f" ({entry.session_file})" if entry.session_file else ""
    state = "in a turn" if entry.busy else "idle"
    hosted = ", hosted by the watcher" if entry.kind == "hosted" else ""
    if not entry.whole:
        state = "its entry unreadable (shown from its lock; its owner writes it again)"
    return f"  {describe(entry)}{hosted}, {state}{' (this one)' if own else ''}{where}"


__all__ = ["describe", "footer_mark", "others_notice", "status_line"]
