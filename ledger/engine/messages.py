"""The reference extension's exact menu labels, titles and messages
(docs/design.md#menus-and-messages).

Why it exists: users of pi-rewind-hook know these words, and hosts (Pi's UI, our CLI) show them
verbatim. Keeping them in one place pins them for golden tests and for the bridge.
"""

from __future__ import annotations

from typing import Literal

from ledger.outside_rules import plan_counts, plan_files
from ledger.plain import FrozenPlain

MENU_TITLE = "Restore Options"

# /tree
TREE_KEEP = "Keep current files"
TREE_RESTORE = "Restore files to that point"
UNDO = "Undo last file rewind"
TREE_CANCEL = "Cancel navigation"

# /fork
FORK_CONVERSATION_ONLY = "Conversation only (keep current files)"
FORK_RESTORE_ALL = "Restore all (files + conversation)"
FORK_CODE_ONLY = "Code only (restore files, keep conversation)"

# notices
NAVIGATION_CANCELLED = "Navigation cancelled"
REWIND_CANCELLED = "Rewind cancelled"
FILES_RESTORED_TO_POINT = "Files restored to rewind point"
FILES_RESTORED_FROM_POINT = "Files restored from rewind point"
FILES_RESTORED_BEFORE_REWIND = "Files restored to before last rewind"
NO_EXACT_POINT = "No exact rewind point available for that entry"
TREE_NOT_RESTORABLE = "Exact file rewind is only available for user, assistant, custom message, compaction, and summary nodes"
TREE_FAILED = "Rewind failed before tree navigation: {error}"
FORK_FAILED = "Rewind failed before fork: {error}"
FORCED_CONVERSATION_ONLY = "Rewind: using conversation-only fork (keep current files) ({source})"

Level = Literal["info", "warning", "error"]

# The panel: what a rewind action did, kept on screen until the next prompt (our addition; the
# reference only sends notices, which Pi's redraw after /tree and /fork hides).
UNDO_HINT = 'Undo: /tree (select any entry) or /fork → "Undo last file rewind"'
UNDO_HINT_AGAIN = 'Choose "Undo last file rewind" again to swap back'
PROMPT_NOT_FOUND = (
    "Rewind: this prompt's user entry was not found; its pre-prompt snapshot is not bound"
)
NOTHING_TO_UNDO = "No file changed, so there is nothing to undo"
# The same, on /rewind's surface: its own row first (where the user is), the menus after.
REWIND_UNDO_HINT = (
    'Undo: /rewind → "↶ Undo the last file rewind" (or /tree, /fork → "Undo last file rewind")'
)
REWIND_UNDO_HINT_AGAIN = 'Swap back: /rewind → the "↶" row again'
PANEL_KEPT = "Rewind: kept the current files"
PRUNED_POINT = (
    "Rewind: that entry's snapshot was pruned by retention, so its files cannot be restored "
    "(no Restore option)"
)
PANEL_FORK_RESTORED = (
    "Rewind: this fork starts with the files of its rewind point (restored before the fork)"
)
MOVED_TREE = "the conversation moved there"
STAY_TREE = "the conversation stays where it was (navigation cancelled)"
STAY_FORK = "no fork made, the conversation is unchanged"
STAY_CODE_ONLY = "no fork made, the conversation is unchanged"


def changes(plan: object) -> str:
    """``1 added, 2 modified, 1 deleted`` (or ``no file changes``) for a restore plan: the one
    wording and order of counts (:func:`ledger.outside_rules.plan_counts`)."""
    return plan_counts(plan.added, plan.modified, plan.deleted)  # type: ignore[attr-defined]


def named(plan: object) -> list[str]:
    """The panel line naming the files a restore changed (``A new.txt  M a.txt (+2 more)``),
    or nothing when none changed."""
    line = plan_files(plan.added, plan.modified, plan.deleted)  # type: ignore[attr-defined]
    return [f"  {line}"] if line else []


def panel_restored(plan: object, point: str, *, after: str) -> list[str]:
    return [f"Rewind: files restored to {point}: {changes(plan)}; {after}", *named(plan)]


def panel_undone(
    plan: object, *, stay: str, head: str = "last file rewind undone", state: str | None = None
) -> list[str]:
    """What an undo did: ``head`` says whether it undid the last file rewind or redid it (an
    undo of an undo; :func:`ledger.engine.past_states.undo_words`) and ``state`` which files
    are back (``the files before "edit a"``)."""
    back = [f"  back to {state}"] if state else []
    return [f"Rewind: {head}: {changes(plan)}; {stay}", *named(plan), *back]


def panel_fork_restored(plan: object) -> list[str]:
    """What the fork's restore did, in the child session: the counts and the files, as every
    other panel gives them (issue 35)."""
    return [f"{PANEL_FORK_RESTORED}: {changes(plan)}", *named(plan)]


def panel_state(plan: object, state: str, *, stay: str) -> list[str]:
    """What restoring the state before a past operation did (``/rewind``'s earlier file states,
    ``rewind undo --to OP``); ``state``: ``Files before rewinding to "edit a" (10:42)``."""
    return [
        f"Rewind: files restored to the state before a past operation: {changes(plan)}; {stay}",
        *named(plan),
        f"  back to: {state}",
    ]


class Notice(FrozenPlain):
    """Something the host should show the user (``ctx.ui.notify`` in Pi)."""

    __slots__ = ("level", "text")
    level: Level
    text: str

    def __init__(self, level: Level, text: str) -> None:
        self._init(level=level, text=text)


def tree_options(*, has_target: bool, has_undo: bool) -> list[str]:
    options = [TREE_KEEP]
    if has_target:
        options.append(TREE_RESTORE)
    if has_undo:
        options.append(UNDO)
    options.append(TREE_CANCEL)
    return options


def fork_options(*, has_target: bool, has_undo: bool) -> list[str]:
    options = [FORK_CONVERSATION_ONLY]
    if has_target:
        options += [FORK_RESTORE_ALL, FORK_CODE_ONLY]
    if has_undo:
        options.append(UNDO)
    return options
