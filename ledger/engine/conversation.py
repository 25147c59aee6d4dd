"""Conversation-side rules the engine needs, as pure functions of a Session.

Why it exists: which entry a pre-prompt snapshot belongs to (defect D1), which assistant entry a
``turn_end`` refers to, where a durable conversation rewind hangs, and what a fork copies — all
follow Pi's conventions, and all are decided from values, without I/O.

Invariants:
- :func:`prompt_user_entry` only ever returns a user message that was appended **after** the
  leaf seen at ``turn_start``; it never falls back to an older user entry (D1).
- :func:`rewind_parent` follows Pi's ``/tree`` rule: a user message or custom message is re-asked,
  so the new position is its parent; any other entry is itself the new position.
- :func:`fork_path` copies the path with ids preserved like Pi's ``createBranchedSession``, but
  re-parents children of dropped label entries so the child file has no orphans (Pi issue #5669),
  and re-creates the labels at the end with their original timestamps, as Pi does.
"""

from __future__ import annotations

from typing import Any, Literal

from ledger.session.model import Session, content_text, entry_text
from ledger.session.parse import Entry

ForkPosition = Literal["before", "at"]


def prompt_user_entry(
    session: Session, leaf_at_turn_start: str | None, leaf_id: str | None = None
) -> Entry | None:
    """The user message of the prompt that started when the leaf was ``leaf_at_turn_start``.

    Walks the current branch back from the leaf to ``leaf_at_turn_start`` and returns the first
    user message after it. ``None`` when the branch does not descend from that leaf or holds no
    new user message.
    """
    branch = session.branch(leaf_id)
    ids = [entry.id for entry in branch]
    if leaf_at_turn_start is None:
        start = 0
    elif leaf_at_turn_start in ids:
        start = ids.index(leaf_at_turn_start) + 1
    else:
        return None
    for entry in branch[start:]:
        if entry.type == "message" and entry.role == "user":
            return entry
    return None


def assistant_entry(
    session: Session, message: dict[str, Any], leaf_id: str | None = None
) -> Entry | None:
    """The branch entry of a ``turn_end`` assistant message (the reference's matching rule).

    Scans the branch backwards for a message with the same ``timestamp``; else one with the
    same non-empty text.
    """
    branch = session.branch(leaf_id)
    stamp = message.get("timestamp")
    if stamp is not None:
        for entry in reversed(branch):
            if entry.type == "message" and entry.role == "assistant":
                inner = entry.raw.get("message")
                if isinstance(inner, dict) and inner.get("timestamp") == stamp:
                    return entry
    text = content_text(message.get("content"))
    if text:
        for entry in reversed(branch):
            if entry.type == "message" and entry.role == "assistant" and entry_text(entry) == text:
                return entry
    return None


def is_reasked(entry: Entry) -> bool:
    """Pi puts a user or custom message back into the editor and moves to its parent."""
    return (entry.type == "message" and entry.role == "user") or entry.type == "custom_message"


def rewind_parent(entry: Entry) -> str | None:
    """Where the conversation stands after rewinding to ``entry`` (Pi's ``/tree`` rule)."""
    return entry.parent_id if is_reasked(entry) else entry.id


def fork_path(
    session: Session, entry_id: str, position: ForkPosition = "before"
) -> list[dict[str, Any]]:
    """The entries a fork copies, ids preserved: root → the entry (``at``) or → the parent of a
    user message (``before``, Pi's ``/fork``)."""
    target = session.get(entry_id)
    if target is None:
        return []
    end: str | None = target.id
    if position == "before" and is_reasked(target):
        end = target.parent_id
    if end is None:
        return []
    path = session.branch(end)
    copied: list[dict[str, Any]] = []
    dropped_parent: dict[str, str | None] = {}
    for entry in path:
        parent = entry.parent_id
        while parent in dropped_parent:
            parent = dropped_parent[parent]
        if entry.type == "label":
            dropped_parent[entry.id] = parent
            continue
        copied.append({**entry.raw, "parentId": parent} if parent != entry.parent_id else entry.raw)
    # Pi re-creates the resolved labels of the copied entries at the end, chained, with the
    # timestamp of the label entry that set them. Its id is reused: that entry is not copied.
    setter: dict[str, Entry] = {}
    for entry in session.entries:
        if entry.type == "label" and isinstance(entry.raw.get("targetId"), str):
            if entry.raw.get("label"):
                setter[entry.raw["targetId"]] = entry
            else:
                setter.pop(entry.raw["targetId"], None)
    leaf = copied[-1]["id"] if copied else None
    for copy in list(copied):
        source = setter.get(copy["id"])
        if source is not None:
            copied.append({**source.raw, "parentId": leaf})
            leaf = source.id
    return copied


def describe_entry(session: Session, entry_id: str) -> str:
    """``user "fix the parser…" (a1b2c3d4)``: which point, in words the user recognises."""
    entry = session.get(entry_id)
    if entry is None:
        return entry_id
    kind = entry.role if entry.type == "message" and entry.role else entry.type.replace("_", " ")
    text = " ".join(entry_text(entry).split())
    if len(text) > 40:
        text = text[:39] + "…"
    return f'{kind} "{text}" ({entry_id})' if text else f"{kind} {entry_id}"
