#!/usr/bin/env python3
"""Print every import circle in ``ledger/`` (issue 33 item 6), with the imports that make it.

Usage: python tools/import_cycles.py
Exit 0 when there is none, 1 otherwise. Every import counts, including those under
``if TYPE_CHECKING:`` and inside functions; the rules are in ``tests/importgraph.py``, which
``tests/unit/test_import_graph.py`` shares, so the tool and the test agree.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.importgraph import cycles, describe, edges, graph


def main() -> int:
    found = cycles(graph())
    if not found:
        print("no import circles in ledger/")
        return 0
    all_edges = edges()
    for component in found:
        print(describe(component, all_edges))
    print(f"{len(found)} circle(s)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
