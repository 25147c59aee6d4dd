#!/usr/bin/env python3
"""Benchmark: reading big session files and walking long fork chains.

Targets (issue 2): reading a 100,000-entry session file <= 1 s; `rewind log --lineage` across a
50-deep fork chain whose files hold no rewind records <= 0.3 s (the fast path).

Each measurement is the median of --runs runs, printed next to a baseline measured in the same
run on the same files:
- reading: the plain way (stdlib ``json.loads`` per line into dicts, no tree) — what a naive
  compatible reader costs;
- lineage: the same walk with every file parsed in full (no ``"rewind-`` fast path).

Usage: python tools/bench_session.py [--entries 100000] [--depth 50] [--chain-entries 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger.lineage import LineageReader
from ledger.record_models import build_turn
from ledger.records import TURN, custom_entry, serialize_entry
from ledger.session.store import read_session
from ledger.session_views import ledger_log


def make_session(path: Path, entries: int, *, records: bool, parent: Path | None = None) -> None:
    header = {
        "type": "session",
        "version": 3,
        "id": path.stem,
        "timestamp": "2026-11-22T03:00:00.000Z",
        "cwd": "/bench",
    }
    if parent is not None:
        header["parentSession"] = str(parent)
    lines = [serialize_entry(header)]
    previous = None
    for i in range(entries):
        entry_id = f"{i:08x}"
        kind = i % 4
        if kind == 0:
            entry = {
                "type": "message",
                "id": entry_id,
                "parentId": previous,
                "timestamp": "2026-11-22T03:00:01.000Z",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "text",
                            "text": f"Please change file {i} so that it does the thing",
                        }
                    ],
                    "timestamp": 1795316401000 + i,
                },
            }
        elif kind == 1:
            entry = {
                "type": "message",
                "id": entry_id,
                "parentId": previous,
                "timestamp": "2026-11-22T03:00:01.000Z",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "Let me look at it. " * 4},
                        {
                            "type": "toolCall",
                            "id": f"call_{i}",
                            "name": "edit",
                            "arguments": {
                                "path": f"src/f{i}.py",
                                "edits": [{"oldText": "a = 1\n", "newText": "a = 2\n"}],
                            },
                        },
                    ],
                    "api": "faux",
                    "provider": "faux",
                    "model": "faux-1",
                    "usage": {
                        "input": 1200,
                        "output": 80,
                        "cacheRead": 0,
                        "cacheWrite": 0,
                        "totalTokens": 1280,
                        "cost": {
                            "input": 0.0036,
                            "output": 0.0012,
                            "cacheRead": 0,
                            "cacheWrite": 0,
                            "total": 0.0048,
                        },
                    },
                    "stopReason": "toolUse",
                    "timestamp": 1795316401000 + i,
                },
            }
        elif kind == 2:
            entry = {
                "type": "message",
                "id": entry_id,
                "parentId": previous,
                "timestamp": "2026-11-22T03:00:01.000Z",
                "message": {
                    "role": "toolResult",
                    "toolCallId": f"call_{i - 1}",
                    "toolName": "edit",
                    "content": [
                        {
                            "type": "text",
                            "text": f"Successfully replaced 1 block(s) in src/f{i}.py.",
                        }
                    ],
                    "details": {"diff": "-1 a = 1\n+1 a = 2"},
                    "isError": False,
                    "timestamp": 1795316401000 + i,
                },
            }
        elif records:
            sha = f"{i:040x}"
            entry = custom_entry(
                TURN,
                build_turn([(f"{i - 3:08x}", sha), (f"{i - 2:08x}", sha)]).to_data(),
                entry_id,
                previous,
                "2026-11-22T03:00:01.000Z",
            )
        else:
            entry = {
                "type": "custom",
                "customType": "other-extension",
                "data": {"n": i},
                "id": entry_id,
                "parentId": previous,
                "timestamp": "2026-11-22T03:00:01.000Z",
            }
        lines.append(serialize_entry(entry))
        previous = entry_id
    path.write_bytes(b"".join(lines))


def median_ms(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def naive_read(path: Path) -> list[dict]:
    out = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def full_parse_walk(start: Path) -> int:
    """The lineage walk with every file parsed in full (no fast path)."""
    reader = LineageReader()
    count = 0
    cursor: Path | None = start
    seen = set()
    while cursor is not None and str(cursor) not in seen:
        seen.add(str(cursor))
        link = reader.load(cursor, full=True)
        count += len(link.view.references)
        cursor = Path(link.parent_session) if link.parent_session else None
    return count


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--depth", type=int, default=50)
    parser.add_argument(
        "--chain-entries", type=int, default=2_000, help="entries per file of the fork chain"
    )
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rewind-bench-") as tmp:
        tmpdir = Path(tmp)
        big = tmpdir / "big.jsonl"
        make_session(big, args.entries, records=True)
        size_mb = big.stat().st_size / 1e6

        def ours_read() -> object:
            session = read_session(big)
            session.branch()
            return session

        ours = median_ms(ours_read, args.runs)
        base = median_ms(lambda: naive_read(big), args.runs)
        tree = median_ms(lambda: read_session(big).tree(), args.runs)
        print(f"read {args.entries:,}-entry session ({size_mb:.1f} MB), median of {args.runs}:")
        print(f"  ours (parse + index + branch)        {ours:8.1f} ms   target <= 1000 ms")
        print(f"  ours (parse + index + full tree)     {tree:8.1f} ms")
        print(
            f"  baseline (stdlib json per line)      {base:8.1f} ms   ratio ours/baseline = {ours / base:.2f}"
        )

        chain = []
        parent = None
        for level in range(args.depth):
            path = tmpdir / f"chain-{level:03d}.jsonl"
            make_session(path, args.chain_entries, records=False, parent=parent)
            chain.append(path)
            parent = path
        deepest = chain[-1]
        in_process = median_ms(
            lambda: ledger_log(deepest, LineageReader(), lineage=True), args.runs
        )
        full = median_ms(lambda: full_parse_walk(deepest), args.runs)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}

        def cli() -> None:
            subprocess.run(
                [sys.executable, "-m", "ledger", "log", str(deepest), "--lineage"],
                check=True,
                capture_output=True,
                env=env,
            )

        cli_ms = median_ms(cli, args.runs)
        startup = median_ms(
            lambda: subprocess.run(
                [sys.executable, "-c", "import ledger.cli.app"], check=True, env=env
            ),
            args.runs,
        )
        print(
            f"log --lineage across a {args.depth}-deep fork chain ({args.chain_entries:,} entries per file, no rewind records):"
        )
        print(f"  ours, in process (fast path)         {in_process:8.1f} ms   target <= 300 ms")
        print(
            f"  ours, whole CLI process              {cli_ms:8.1f} ms   (of which interpreter + imports {startup:.1f} ms)"
        )
        print(
            f"  baseline (every file parsed in full) {full:8.1f} ms   ratio ours/baseline = {in_process / full:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
