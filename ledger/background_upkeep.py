"""``python -m ledger.background_upkeep ROOT GIT_DIR FD``: the detached disk upkeep a snapshot
append started (:func:`ledger.git.store.autoupkeep.after_append`).

Why it exists apart: the loop lives in the store layer (:mod:`ledger.git.store.autoupkeep`),
which may not import the restore subsystem above it (tests/unit/test_architecture.py); the
upkeep must still start no pass while a restore journal is open, so this entry point, above the
git layer, hands it :func:`ledger.git.restore.journal.restore_open` (asked at the start of each
pass; why a journal opened during a pass is harmless: :mod:`ledger.git.store.upkeep`).

Invariants: prints nothing (its stdio is ``/dev/null``), never raises; ``FD`` is the descriptor
of the upkeep lock its parent took and passed on, closed (released) before it exits.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        return 2
    from ledger.git.restore.journal import restore_open
    from ledger.git.store.autoupkeep import run_detached

    with contextlib.suppress(Exception):
        return run_detached(Path(argv[0]), Path(argv[1]), int(argv[2]), restore_open)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
