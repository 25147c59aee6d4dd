"""Drawing a session tree with anytree.

Why it exists: ``rewind tree`` shows where the branches are and which entries have an exact
rewind point. Real sessions are long single chains with a few branch points, so one anytree node
per entry would nest thousands deep (unreadable, and beyond anytree's recursive renderer).
Instead each node is a *segment*: a maximal run of entries where each has exactly one child.
Indentation then grows only at real branch points, as in Pi's own ``/tree``.

Invariants: pure (values in, lines out); every entry of ``Session.tree()`` appears exactly once
per occurrence, in Pi's depth-first order.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from anytree import ContStyle, Node, RenderTree

from ledger.session.model import Session
from ledger.session.parse import Entry


def build_segments(session: Session) -> list[Node]:
    """anytree roots whose nodes carry ``entries``: runs of single-child entries."""
    flat = session.tree()
    roots: list[Node] = []
    # Pi's flattening is depth-first, so a node's parent is the last node seen one level up.
    stack: list[tuple[int, Node]] = []
    for index, (depth, entry) in enumerate(flat):
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent_node = stack[-1][1] if stack else None
        previous = flat[index - 1] if index else None
        continues = (
            parent_node is not None
            and previous is not None
            and previous[0] == depth - 1
            and len(session.children(previous[1].id)) == 1
            and parent_node.entries[-1] is previous[1]
        )
        if continues:
            assert parent_node is not None
            parent_node.entries.append(entry)
            stack[-1] = (depth, parent_node)
            continue
        node = Node(entry.id, parent=parent_node, entries=[entry])
        if parent_node is None:
            roots.append(node)
        stack.append((depth, node))
    return roots


def render_tree(session: Session, describe: Callable[[Entry], str]) -> list[str]:
    """One line per entry occurrence, drawn with anytree's ``ContStyle``."""
    lines: list[str] = []
    roots = build_segments(session)
    depth_needed = max((_height(root) for root in roots), default=0)
    limit = sys.getrecursionlimit()
    if depth_needed * 3 + 100 > limit:
        sys.setrecursionlimit(depth_needed * 3 + 100)
    try:
        for root in roots:
            for pre, fill, node in RenderTree(root, style=ContStyle()):
                for position, entry in enumerate(node.entries):
                    lines.append(f"{pre if position == 0 else fill}{describe(entry)}")
    finally:
        sys.setrecursionlimit(limit)
    return lines


def _height(root: Node) -> int:
    height = 0
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        height = max(height, depth)
        stack.extend((child, depth + 1) for child in node.children)
    return height
