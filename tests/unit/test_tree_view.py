"""``rewind tree``'s drawing: nodes only at branch points, any depth, the same lines as anytree."""

from __future__ import annotations

import sys

import orjson
from anytree import ContStyle, RenderTree

from ledger.session.model import Session
from ledger.session.parse import Entry, parse_session_bytes
from ledger.session.treeview import build_segments, render_tree

HEADER = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-11-22T03:00:00.000Z"}
EARLY, LATE = "2026-11-22T03:00:01.000Z", "2026-11-22T03:00:02.000Z"


def session_of(links: list[tuple[str, str | None, str]]) -> Session:
    """A session whose entries are ``(id, parentId, timestamp)``; Pi orders siblings by time."""
    lines = [orjson.dumps(HEADER)]
    for entry_id, parent, stamp in links:
        lines.append(
            orjson.dumps({"type": "label", "id": entry_id, "parentId": parent, "timestamp": stamp})
        )
    return Session(parse_session_bytes(b"\n".join(lines) + b"\n"))


def ident(entry: Entry) -> str:
    return entry.id


def test_a_50000_entry_chain_indents_only_at_its_branch_points() -> None:
    links: list[tuple[str, str | None, str]] = [("e0", None, EARLY)]
    links += [(f"e{i}", f"e{i - 1}", EARLY) for i in range(1, 50_000)]
    links += [("b1", "e10000", LATE), ("b1x", "b1", EARLY), ("b2", "e30000", LATE)]
    session = session_of(links)
    limit = sys.getrecursionlimit()

    lines = render_tree(session, ident)

    assert sys.getrecursionlimit() == limit, "the process-wide recursion limit is left alone"
    expected = [f"e{i}" for i in range(10_001)]
    expected += ["├── e10001", *(f"│   e{i}" for i in range(10_002, 30_001))]
    expected += ["│   ├── e30001", *(f"│   │   e{i}" for i in range(30_002, 50_000))]
    expected += ["│   └── b2", "└── b1", "    b1x"]
    assert lines == expected
    assert [len(root.entries) for root in build_segments(session)] == [10_001]


def comb(levels: int) -> list[tuple[str, str | None, str]]:
    """A spine where every entry branches: the next spine entry, and a leaf beside it."""
    links: list[tuple[str, str | None, str]] = [("s0", None, EARLY)]
    for i in range(1, levels):
        links += [(f"s{i}", f"s{i - 1}", EARLY), (f"x{i}", f"s{i - 1}", LATE)]
    return links


def test_deep_nesting_is_drawn_in_passes_that_equal_one_anytree_pass() -> None:
    session = session_of(comb(300))
    oracle = [
        f"{pre}{node.entries[0].id}"
        for root in build_segments(session)
        for pre, _fill, node in RenderTree(root, style=ContStyle())
    ]
    assert max(len(pre) for pre in oracle) // 4 > 64 * 4, "several passes were needed"
    assert render_tree(session, ident) == oracle


def test_thousands_of_nested_branches_draw_without_raising_the_recursion_limit() -> None:
    limit = sys.getrecursionlimit()
    lines = render_tree(session_of(comb(3_000)), ident)
    assert sys.getrecursionlimit() == limit
    assert len(lines) == 2 * 3_000 - 1
    assert lines[0] == "s0" and lines[1] == "├── s1" and lines[-1] == "└── x1"
    assert lines[-2] == "│   └── x2"
    assert lines[2_999] == "│   " * 2_998 + "├── s2999"
