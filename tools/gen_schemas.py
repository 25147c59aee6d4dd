#!/usr/bin/env python3
"""Write schemas/*.schema.json from the pydantic models (see ledger/schemas.py).

Usage: python tools/gen_schemas.py [--check]
With --check, exit 1 and name the files that differ instead of writing them.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger.schemas import render_schemas


def main(argv: list[str]) -> int:
    check = "--check" in argv
    out_dir = ROOT / "schemas"
    out_dir.mkdir(exist_ok=True)
    stale = []
    for name, text in render_schemas().items():
        path = out_dir / name
        if path.exists() and path.read_text() == text:
            continue
        stale.append(name)
        if not check:
            path.write_text(text)
    if check and stale:
        print("schemas differ from the models: " + ", ".join(stale), file=sys.stderr)
        return 1
    print(
        ("checked " if check else "wrote ")
        + str(len(render_schemas()))
        + " schemas"
        + (f" ({len(stale)} changed)" if stale else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
