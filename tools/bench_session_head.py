#!/usr/bin/env python3
"""Benchmark: session header reads with a huge one-line file in the sessions folder (issue 23).

Setup: a git repository and an agent dir with --sessions real-looking sessions of it (a header,
40 messages, a ``rewind-turn`` record in every other one) plus a 1.5 GiB sparse file without a
newline in the same sessions folder.

- ours, library: what ``rewind sessions`` does, called in-process
  (:func:`ledger.session.discovery.repo_sessions` + :func:`ledger.session_views.summarize_sessions`);
  the huge file is refused after 1 MiB (``MAX_HEADER_BYTES``);
- ours, CLI: ``python -m ledger sessions`` as a real process (start-up included);
- old method: the header read before issue 23 (``reference_read_head`` below: re-count the
  newlines of the whole growing buffer after every 64 KiB read, up to 2 GiB). On the 1.5 GiB file
  it would run for hours, so it is timed on a --old-mib one-line file (32 MiB by
  default) and extrapolated quadratically. On that same file the bench also times the new read
  without its 1 MiB bound (``safe_read.read_head`` with ``limit`` = the file size): the cost of
  reading every byte once, which shows that the gain is linear scanning, not only the bound.

Not a test: nothing here asserts a time. Usage:
python tools/bench_session_head.py [--sessions 20] [--runs 7] [--old-mib 32] [--old-runs 3]
"""

from __future__ import annotations

import argparse
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
from ledger.safe_read import MAX_SESSION_BYTES, open_regular, read_head
from ledger.session.discovery import repo_sessions
from ledger.session.store import HEADER_LINES, MAX_HEADER_BYTES, encode_cwd
from ledger.session_views import summarize_sessions

HUGE = 1500 << 20


def reference_read_head(path: Path, limit: int = 1 << 16) -> bytes:
    """The old ``ledger.session.store._read_head`` loop, verbatim: after every 64 KiB read it
    counts the newlines of the whole buffer again and copies the buffer to grow it."""
    fd, _st = open_regular(path)
    try:
        data = os.read(fd, limit)
        while data.count(b"\n") < 5 and len(data) < MAX_SESSION_BYTES:
            more = os.read(fd, limit)
            if not more:
                break
            data += more
        return data
    finally:
        os.close(fd)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, check=True, text=True
    ).stdout.strip()


def build(root: Path, sessions: int) -> tuple[Path, Path, Path]:
    """The repository, the agent dir and the huge file."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "Bench")
    git(repo, "config", "user.email", "bench@example.com")
    (repo / "README.md").write_text("bench\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "init")
    head = git(repo, "rev-parse", "HEAD")
    agent = root / "agent"
    folder = agent / "sessions" / encode_cwd(str(repo.resolve()))
    folder.mkdir(parents=True)
    for n in range(sessions):
        header = {
            "type": "session",
            "version": 3,
            "id": f"bench-{n:04d}",
            "timestamp": "2026-11-22T03:00:00.000Z",
            "cwd": str(repo.resolve()),
        }
        lines = [serialize_entry(header)]
        parent: str | None = None
        for m in range(40):
            entry_id = f"{n:04x}{m:04x}"
            role = "user" if m % 2 == 0 else "assistant"
            message = {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": "2026-11-22T03:00:01.000Z",
                "message": {
                    "role": role,
                    "content": [{"type": "text", "text": f"message {m} of session {n}"}],
                    "timestamp": 1795316401000 + m,
                },
            }
            lines.append(serialize_entry(message))
            parent = entry_id
        if n % 2 == 0:
            turn = build_turn([(parent, head)]).to_data()
            record = custom_entry(TURN, turn, f"{n:04x}ffff", parent, "2026-11-22T03:00:02.000Z")
            lines.append(serialize_entry(record))
        (folder / f"2026-11-22T03-00-00-000Z_bench-{n:04d}.jsonl").write_bytes(b"".join(lines))
    huge = folder / "zz-huge-one-line.jsonl"
    huge.touch()
    os.truncate(huge, HUGE)
    return repo, agent, huge


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cli-runs", type=int, default=3)
    parser.add_argument("--old-mib", type=int, default=32)
    parser.add_argument("--old-runs", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-session-head-") as tmp:
        root = Path(tmp)
        repo, agent, huge = build(root, args.sessions)

        def library() -> None:
            skipped: list[tuple[Path, str]] = []
            infos = repo_sessions(agent, repo, skipped=skipped)
            rows, _warnings = summarize_sessions(infos, LineageReader())
            assert len(rows) == args.sessions, rows
            assert [path for path, _ in skipped] == [huge], skipped

        def cli() -> None:
            proc = subprocess.run(
                [sys.executable, "-m", "ledger", "--agent-dir", str(agent), "sessions"],
                cwd=repo,
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                timeout=120,
            )
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.count("\n") == args.sessions, proc.stdout

        lib_ms = statistics.median(timed(library, args.runs))
        cli_ms = statistics.median(timed(cli, args.cli_runs))

        small = root / f"one-line-{args.old_mib}mib.jsonl"
        small.touch()
        os.truncate(small, args.old_mib << 20)
        size = small.stat().st_size

        def old() -> None:
            assert len(reference_read_head(small)) == size

        def linear() -> None:
            fd, _st = open_regular(small)
            try:
                assert len(read_head(fd, HEADER_LINES, size)[0]) == size
            finally:
                os.close(fd)

        def bounded(path: Path) -> Callable[[], None]:
            def run() -> None:
                fd, _st = open_regular(path)
                try:
                    data, cut = read_head(fd, HEADER_LINES, MAX_HEADER_BYTES)
                    assert cut and not data
                finally:
                    os.close(fd)

            return run

        old_ms = statistics.median(timed(old, args.old_runs))
        linear_ms = statistics.median(timed(linear, args.runs))
        bounded_small_ms = statistics.median(timed(bounded(small), args.runs))
        bounded_huge_ms = statistics.median(timed(bounded(huge), args.runs))

    scale = HUGE / size

    def row(label: str, ms: float, extra: str = "") -> None:
        print(f"  {label:<62}{ms:11.2f} ms{extra}")

    print(f"{args.sessions} sessions + a 1.5 GiB sparse file without a newline, same folder")
    row(f"rewind sessions, library in-process (median of {args.runs})", lib_ms)
    row(f"rewind sessions, CLI process (median of {args.cli_runs})", cli_ms)
    row(f"new header read of the 1.5 GiB file (median of {args.runs})", bounded_huge_ms)
    print(f"header read of a {args.old_mib} MiB one-line file")
    row(f"old method, reference_read_head (median of {args.old_runs})", old_ms)
    row(
        f"new read_head, bound lifted: whole file once (median of {args.runs})",
        linear_ms,
        f"   old/new = {old_ms / linear_ms:,.0f}x",
    )
    row(
        f"new read_head, 1 MiB bound (median of {args.runs})",
        bounded_small_ms,
        f"   old/new = {old_ms / bounded_small_ms:,.0f}x",
    )
    print(
        f"old method extrapolated to the 1.5 GiB file (quadratic, x{scale * scale:,.0f}): "
        f"~{old_ms * scale * scale / 60_000:,.0f} min; new: {bounded_huge_ms:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
