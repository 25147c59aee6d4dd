"""The reference extension's exact menu labels, titles and messages (rewind-v2.md §9–§12).

Why it exists: users of pi-rewind-hook know these words, and hosts (Pi's UI, our CLI) show them
verbatim. Keeping them in one place pins them for golden tests and for the bridge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
TREE_NOT_RESTORABLE = (
    "Exact file rewind is only available for user, assistant, custom message, compaction, and summary nodes"
)
TREE_FAILED = "Rewind failed before tree navigation: {error}"
FORK_FAILED = "Rewind failed before fork: {error}"
FORCED_CONVERSATION_ONLY = "Rewind: using conversation-only fork (keep current files) ({source})"
RETENTION_STARTUP_FAILED = "Rewind retention startup sweep failed: {error}"
RETENTION_BUDGET_EXCEEDED = "Rewind retention startup sweep skipped after exceeding {budget}ms budget"

Level = Literal["info", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    """Something the host should show the user (``ctx.ui.notify`` in Pi)."""

    level: Level
    text: str


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
