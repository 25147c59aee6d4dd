"""Drawing a session tree with anytree.

Why it exists: ``rewind tree`` shows where the branches are and which entries have an exact
rewind point. Real sessions are long single chains with a few branch points, so one anytree node
per entry would nest thousands deep (unreadable, and beyond anytree's recursive renderer).
Instead each node is a *segment*: a maximal run of entries where each has exactly one child.
Indentation then grows only at real branch points, as in Pi's own ``/tree``.

Invariants:
- Pure (values in, lines out); every entry of ``Session.tree()`` appears exactly once per
  occurrence, in Pi's depth-first order.
- Bounded stack whatever the input: the segments are linked bottom-up (anytree's loop check then
  costs nothing), and ``RenderTree`` walks at most ``_LEVELS_PER_PASS`` nesting levels per pass,
  a deeper subtree being drawn by a fresh pass under its parent's indentation. The interpreter's
  recursion limit is never touched: it is process-wide, and the library runs in threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from anytree import ContStyle, Node, RenderTree

from ledger.session.model import Session
from ledger.session.parse import Entry

# RenderTree recurses once per nesting level (``yield from``); a pass this deep stays far below
# the default recursion limit wherever the caller stands.
_LEVELS_PER_PASS = 64


@dataclass
class _Segment:
    entries: list[Entry]
    parent: int | None
    level: int
    children: list[int] = field(default_factory=list)


def _segments(session: Session) -> list[_Segment]:
    """The runs of single-child entries, in Pi's depth-first order (a parent before its kids)."""
    flat = session.tree()
    segments: list[_Segment] = []
    # Pi's flattening is depth-first, so a segment's parent is the last one seen one level up.
    stack: list[tuple[int, int]] = []  # (entry depth, segment index)
    for index, (depth, entry) in enumerate(flat):
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else None
        previous = flat[index - 1] if index else None
        if (
            parent is not None
            and previous is not None
            and previous[0] == depth - 1
            and len(session.children(previous[1].id)) == 1
            and segments[parent].entries[-1] is previous[1]
        ):
            segments[parent].entries.append(entry)
            stack[-1] = (depth, parent)
            continue
        level = 0 if parent is None else segments[parent].level + 1
        segments.append(_Segment([entry], parent, level))
        if parent is not None:
            segments[parent].children.append(len(segments) - 1)
        stack.append((depth, len(segments) - 1))
    return segments


def build_segments(session: Session) -> list[Node]:
    """anytree roots whose nodes carry ``entries`` (a run of single-child entries) and ``level``
    (the nesting depth below the root)."""
    segments = _segments(session)
    nodes: list[Node] = [None] * len(segments)
    # Children before parents: a node gets its children while it has no parent yet, so anytree's
    # loop check (a walk up the ancestors) is constant time even for deeply nested branches.
    for index in reversed(range(len(segments))):
        segment = segments[index]
        nodes[index] = Node(
            segment.entries[0].id,
            children=[nodes[kid] for kid in segment.children],
            entries=segment.entries,
            level=segment.level,
        )
    return [nodes[index] for index, segment in enumerate(segments) if segment.parent is None]


def render_tree(session: Session, describe: Callable[[Entry], str]) -> list[str]:
    """One line per entry occurrence, drawn with anytree's ``ContStyle``."""
    lines: list[str] = []
    for root in build_segments(session):
        for indent, pre, fill, node in _rows(root):
            for position, entry in enumerate(node.entries):
                lines.append(f"{indent}{pre if position == 0 else fill}{describe(entry)}")
    return lines


def _rows(root: Node) -> Iterator[tuple[str, str, str, Node]]:
    """``RenderTree(root, style=ContStyle())`` as ``(indent, pre, fill, node)``, pass by pass.

    A node on the last level of a pass is drawn by that pass; its subtree then gets a pass of its
    own whose rows carry the node's ``fill`` as ``indent`` (RenderTree's prefixes are the
    concatenation of one column per level, so the result is the same as one deep pass).
    """
    style = ContStyle()
    passes: list[tuple[str, int, Iterator[tuple[str, str, Node]]]] = [
        ("", root.level, iter(RenderTree(root, style=style, maxlevel=_LEVELS_PER_PASS)))
    ]
    while passes:
        indent, top, rows = passes[-1]
        row = next(rows, None)
        if row is None:
            passes.pop()
            continue
        pre, fill, node = row
        yield indent, pre, fill, node
        if node.level - top == _LEVELS_PER_PASS - 1 and node.children:
            deeper = iter(RenderTree(node, style=style, maxlevel=_LEVELS_PER_PASS))
            next(deeper)  # the node itself, drawn just now
            passes.append((indent + fill, node.level, deeper))
