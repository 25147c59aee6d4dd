"""The conversation tree of one Pi session, computed the way Pi 0.73.1 computes it.

Why it exists: rewind decisions depend on Pi's notion of the leaf, the branch and the tree, and
those rules have traps (the leaf is the last line, not a saved pointer; orphans are roots;
duplicate ids after a flush; labels apply across branches). One value type answers all of it.

Invariants:
- ``entries`` is file order, duplicates included (Pi's ``getEntries``); ``by_id`` keeps the
  first occurrence of each id.
- ``leaf_id`` is the id of the last entry in file order (Pi's leaf on open).
- ``branch()`` walks ``parentId`` from the leaf to a root and stops at a missing parent or at
  a repeat (cycle-safe); it is returned root → leaf.
- ``labels`` apply every ``label`` entry in file order; the last wins; a missing/empty label
  clears.
- ``tree()`` is Pi's ``getTree()`` flattened depth-first: roots in file order (an entry whose
  parent is null, itself or missing), children sorted by timestamp (stable). Entries a cycle
  keeps away from every root are appended as extra roots so nothing disappears.
- Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

from ledger.clock import ms_from_iso
from ledger.session.parse import Entry, ParsedSession, SkippedLine, no_cyclic_gc

RESTORABLE_ROLES = frozenset({"user", "assistant"})
RESTORABLE_TYPES = frozenset({"branch_summary", "compaction", "custom_message"})


class Session:
    """A parsed session file (or a session held by a running agent)."""

    def __init__(self, parsed: ParsedSession, path: Path | None = None) -> None:
        self.path = path
        self.header: dict[str, Any] = parsed.header
        self.entries: list[Entry] = parsed.entries
        self.skipped: list[SkippedLine] = parsed.skipped
        self.migrated_from = parsed.migrated_from
        self.ends_with_newline = parsed.ends_with_newline
        self.size = parsed.size
        by_id: dict[str, Entry] = {}
        for entry in self.entries:
            by_id.setdefault(entry.id, entry)
        self.by_id = by_id

    # --- header ---------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return str(self.header.get("id"))

    @property
    def cwd(self) -> str | None:
        value = self.header.get("cwd")
        return value if isinstance(value, str) and value else None

    @property
    def parent_session(self) -> str | None:
        value = self.header.get("parentSession")
        return value if isinstance(value, str) and value else None

    # --- tree and leaf --------------------------------------------------------------------

    @property
    def leaf_id(self) -> str | None:
        return self.entries[-1].id if self.entries else None

    @property
    def leaf(self) -> Entry | None:
        return self.by_id.get(self.leaf_id) if self.leaf_id else None

    def get(self, entry_id: str) -> Entry | None:
        return self.by_id.get(entry_id)

    def branch(self, from_id: str | None = None) -> list[Entry]:
        """Entries from the root down to ``from_id`` (default: the leaf), like Pi's ``getBranch``."""
        start = self.leaf_id if from_id is None else from_id
        path: list[Entry] = []
        seen: set[str] = set()
        cursor = self.by_id.get(start) if start else None
        while cursor is not None and cursor.id not in seen:
            seen.add(cursor.id)
            path.append(cursor)
            parent = cursor.parent_id
            cursor = self.by_id.get(parent) if parent and parent != cursor.id else None
        path.reverse()
        return path

    @cached_property
    def _tree_links(self) -> tuple[list[str], dict[str, list[str]]]:
        roots: list[str] = []
        children: dict[str, list[str]] = {}
        by_id = self.by_id
        for entry in self.entries:
            parent = entry.parent_id
            if parent is None or parent == entry.id or parent not in by_id:
                roots.append(entry.id)
            else:
                children.setdefault(parent, []).append(entry.id)
        for kids in children.values():
            if len(kids) > 1:
                kids.sort(key=lambda kid: ms_from_iso(by_id[kid].timestamp))
        return roots, children

    def children(self, entry_id: str) -> list[Entry]:
        """Children of an entry in Pi's tree order (by timestamp, stable)."""
        return [self.by_id[kid] for kid in self._tree_links[1].get(entry_id, [])]

    def tree(self) -> list[tuple[int, Entry]]:
        """Pi's ``getTree()`` flattened depth-first as ``(depth, entry)`` pairs."""
        with no_cyclic_gc():
            return self._flatten()

    def _flatten(self) -> list[tuple[int, Entry]]:
        roots, children = self._tree_links
        out: list[tuple[int, Entry]] = []
        reached: set[str] = set()
        on_path: set[str] = set()
        pending = list(roots)
        while True:
            # Explicit enter/exit events keep deep chains off the Python stack and let a cycle
            # (possible only through duplicate ids) stop at the first repeat on the path.
            stack: list[tuple[bool, int, str]] = [(True, 0, root) for root in reversed(pending)]
            while stack:
                entering, depth, entry_id = stack.pop()
                if not entering:
                    on_path.discard(entry_id)
                    continue
                if entry_id in on_path:
                    continue
                out.append((depth, self.by_id[entry_id]))
                reached.add(entry_id)
                on_path.add(entry_id)
                stack.append((False, depth, entry_id))
                for kid in reversed(children.get(entry_id, ())):
                    stack.append((True, depth + 1, kid))
            pending = next(([e.id] for e in self.entries if e.id not in reached), [])
            if not pending:
                return out

    # --- labels and names -----------------------------------------------------------------

    @cached_property
    def labels(self) -> dict[str, str]:
        """``{entryId: label}`` after applying every label entry in file order."""
        labels: dict[str, str] = {}
        for entry in self.entries:
            if entry.type != "label":
                continue
            target = entry.raw.get("targetId")
            if not isinstance(target, str):
                continue
            label = entry.raw.get("label")
            if isinstance(label, str) and label:
                labels[target] = label
            else:
                labels.pop(target, None)
        return labels

    @property
    def name(self) -> str | None:
        """The latest ``session_info`` name in file order (Pi's ``getSessionName``)."""
        for entry in reversed(self.entries):
            if entry.type == "session_info":
                value = entry.raw.get("name")
                if isinstance(value, str) and value.strip():
                    return value.strip()
                return None
        return None

    def iter_custom(self, *custom_types: str) -> Iterator[Entry]:
        wanted = set(custom_types)
        for entry in self.entries:
            if entry.type == "custom" and entry.custom_type in wanted:
                yield entry


# --- describing entries -------------------------------------------------------------------

_SPACE = re.compile(r"\s+")


def is_restorable(entry: Entry) -> bool:
    """Entries that may carry an exact rewind point (the reference 1.8.4+ set)."""
    if entry.type == "message":
        return entry.role in RESTORABLE_ROLES
    return entry.type in RESTORABLE_TYPES


def kind_of(entry: Entry) -> str:
    """A message's role, else the entry type; ``custom`` entries show their customType."""
    if entry.type == "message":
        return entry.role or "message"
    if entry.type in ("custom", "custom_message") and entry.custom_type:
        return f"{entry.type}:{entry.custom_type}"
    return entry.type or "?"


def short(text: str, limit: int = 60) -> str:
    """Whitespace collapsed, at most ``limit`` characters, ``…`` when cut."""
    collapsed = _SPACE.sub(" ", text).strip()
    return collapsed if len(collapsed) <= limit else collapsed[:limit] + "…"


def content_text(content: object) -> str:
    """The text of a message ``content``: the string, or its text blocks joined by spaces."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return " ".join(p for p in parts if isinstance(p, str))
    return ""


def entry_text(entry: Entry) -> str:
    """The full human text of an entry, for display and search (may be empty)."""
    raw = entry.raw
    if entry.type == "message":
        message = raw.get("message")
        if not isinstance(message, dict):
            return ""
        role = message.get("role")
        if role == "bashExecution":
            command = message.get("command")
            return command if isinstance(command, str) else ""
        if role == "toolResult":
            name = message.get("toolName")
            return name if isinstance(name, str) else ""
        return content_text(message.get("content"))
    if entry.type == "custom_message":
        return content_text(raw.get("content"))
    if entry.type in ("compaction", "branch_summary"):
        summary = raw.get("summary")
        return summary if isinstance(summary, str) else ""
    if entry.type == "label":
        label = raw.get("label")
        return (
            f"{raw.get('targetId')} = {label}"
            if isinstance(label, str) and label
            else f"{raw.get('targetId')} (cleared)"
        )
    if entry.type == "session_info":
        name = raw.get("name")
        return name if isinstance(name, str) else ""
    if entry.type == "model_change":
        return f"{raw.get('provider')}/{raw.get('modelId')}"
    if entry.type == "thinking_level_change":
        level = raw.get("thinkingLevel")
        return level if isinstance(level, str) else ""
    return ""
