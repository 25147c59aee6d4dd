"""The consumer of :mod:`ledger.overwrite_notices`: this session is shown what another
session's restore did to its agent's files (docs/design.md#telling-the-other-session).

Why it exists: a restore in session A that overwrites files session B's agent wrote leaves B a
notice (:mod:`ledger.engine.tell_others`). B's bridge takes it at B's next event (the bridge
is never pushed to; Pi sends an event at every prompt, turn, menu and ``/rewind``) and shows it:

- a warning notice (Pi's notification) and the panel above the editor: who restored, which
  files, and the command that brings them back;
- the footer: the same line, kept from the event that took it until the next prompt starts
  (a notice taken at a prompt's start stays for that whole prompt);
- the prompt's status note: the files that restore changed are no longer counted as "your
  changed files" (they were not the user's): ``kept 2 files restored by session "…" (…) and
  your 1 changed file as a point before this prompt``.

Invariants: never fails an event (an unreadable store shows nothing); one directory listing per
event when nothing waits; nothing is shown twice (a notice is taken once, :func:`take`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ledger.git.private import private_dir

if TYPE_CHECKING:
    from ledger.bridge.state import BridgeState, Outcome
    from ledger.engine.engine import Engine

NOTICES_DIR = "notices"
"""``ledger.overwrite_notices.NOTICES_DIR_NAME`` (held equal by a unit test): while no session
was ever left a notice in this repository, that module (~10 ms of imports) is not loaded, and a
spawned bridge answers its first ``session_start`` sooner (ledger/bridge/quick_start.py)."""

MAX_REMEMBERED = 4096
"""Paths remembered for the next prompt's note (a bound, far beyond real restores)."""


def show_overwrites(state: BridgeState, outcome: Outcome) -> None:
    """Take this session's notices and put them into ``outcome`` (notices, panel) and the
    state (footer line, paths for the next prompt's note)."""
    git_dir, presence = state.git_dir, state.presence
    if git_dir is None or presence is None or state.passive:
        return
    try:
        if not os.path.isdir(private_dir(git_dir) / NOTICES_DIR):
            return  # no notice was ever left here (take would list nothing)
        from ledger.overwrite_notices import take

        taken = take(git_dir, presence.presence.session_id)
    except OSError:
        return  # a courtesy: never fail an event for it
    lines: list[str] = []
    for notice in taken.notices:
        outcome.notices.append({"level": "warning", "text": notice.line()})
        lines.extend(notice.panel())
        for path in (*notice.restored, *notice.theirs):
            if len(state.restored_by) < MAX_REMEMBERED:
                state.restored_by[path] = notice.by_label
        state.overwrite_note = notice.line()
    if taken.damaged:
        text = f"Rewind: {taken.damaged} notice(s) from other sessions could not be read"
        outcome.notices.append({"level": "warning", "text": text})
    if lines:
        # Above whatever this event showed itself (its own panel follows).
        outcome.panel = [*lines, *(outcome.panel or [])]


def prompt_note(engine: Engine, restored_by: Mapping[str, str]) -> str | None:
    """The prompt's status note when files another session restored are among the changes the
    pre-prompt snapshot keeps; None when none are (the engine's own note stands)."""
    from ledger.engine.changes_since import changed_since

    now = engine.last_exact
    if now is None or not restored_by:
        return None
    changes = changed_since(engine, now.tree).changes
    theirs = [c for c in changes if c.path in restored_by]
    if not theirs:
        return None
    mine = len(changes) - len(theirs)
    labels = sorted({restored_by[c.path] for c in theirs})
    who = f"session {labels[0]}" if len(labels) == 1 else f"{len(labels)} other sessions"
    parts = [f"{len(theirs)} file{'s' if len(theirs) != 1 else ''} restored by {who}"]
    if mine:
        parts.append(f"your {mine} changed file{'s' if mine != 1 else ''}")
    return f"rewind: kept {' and '.join(parts)} as a point before this prompt"


__all__ = ["MAX_REMEMBERED", "prompt_note", "show_overwrites"]
