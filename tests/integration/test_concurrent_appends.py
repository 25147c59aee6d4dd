"""Several real processes appending to one session file at once lose and tear nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ledger.session.store import read_session
from tests.gitkit import ROOT

HEADER = (
    b'{"type":"session","version":3,"id":"s","timestamp":"2026-11-22T03:00:00.000Z","cwd":"/r"}\n'
)
WRITER = """
import sys
from ledger.session.store import SessionAppender
app = SessionAppender(sys.argv[1])
for i in range(int(sys.argv[3])):
    app.append_custom("load", {"writer": sys.argv[2], "i": i, "pad": "x" * 5000})
"""


def test_concurrent_appenders_produce_every_line_intact_in_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    path.write_bytes(HEADER)
    writers, per_writer = 6, 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(w), str(per_writer)], cwd=ROOT
        )
        for w in range(writers)
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    session = read_session(path)
    assert session.skipped == []
    assert len(session.entries) == writers * per_writer
    assert len({e.id for e in session.entries}) == writers * per_writer
    seen = {(e.raw["data"]["writer"], e.raw["data"]["i"]) for e in session.entries}
    assert seen == {(str(w), i) for w in range(writers) for i in range(per_writer)}
    # The lock serializes read-leaf-then-write, so the entries form a single chain.
    for previous, current in zip(session.entries, session.entries[1:]):
        assert current.parent_id == previous.id
    assert session.entries[0].parent_id is None
