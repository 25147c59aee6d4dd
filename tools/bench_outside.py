#!/usr/bin/env python3
"""Benchmark: what the check for changes made outside the agent adds to a restore.

Why it exists: issue 14 allows the check at most one capture on top of a restore, which already
takes one (so ≈ nothing). A restore plan compares the latest rewind point with the capture the
plan takes anyway, so this counts the captures (``Capturer.capture`` calls) and times:

- ``dry-run``: ``operations.restore(..., dry_run=True)`` (what ``rewind restore --dry-run`` runs
  after opening the session), with the check, and without it (the check replaced by a no-op:
  the code before issue 14);
- ``check``: the check alone on the plan (a tree-to-tree diff, no capture);
- ``menu``: the menu title of ``/tree``/``/fork`` (one capture before the menu; the restore
  after the choice captures again, warm);
- ``prompt``: the status-line note at the start of a prompt (reuses the pre-prompt snapshot).

Setup: a synthetic repository (``tools/bench_capture.py``), a Pi-format session with two
prompts through the engine, then ``--edits`` files changed by hand.

Usage::

    python tools/bench_outside.py                # 10k files
    python tools/bench_outside.py --files 100000 --runs 5

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_capture import build_repo, tracked_files

from ledger.engine import Engine, FileHost, operations, outside
from ledger.engine import messages as M
from ledger.git.capture.scan import Capturer
from ledger.git.repo import GitRepo
from ledger.session.store import SessionAppender, create_session_file

CAPTURES: list[int] = []
_original_capture = Capturer.capture


def _counted(self: Capturer) -> Any:
    CAPTURES.append(1)
    return _original_capture(self)


Capturer.capture = _counted  # type: ignore[method-assign]


def _prompt(engine: Engine, writer: SessionAppender, text: str, change: Callable[[], None]) -> str:
    engine.before_agent_start(text)
    engine.turn_start(0)
    user = writer.append_entry(
        {"type": "message", "message": {"role": "user", "content": text, "timestamp": 1}}
    )
    change()
    reply = writer.append_entry(
        {"type": "message", "message": {"role": "assistant", "content": "done", "timestamp": 2}}
    )
    engine.turn_end(0, assistant_entry_id=reply["id"])
    engine.agent_end()
    return str(user["id"])


def _median_ms(runs: int, fn: Callable[[], object]) -> tuple[float, int]:
    """Median wall time in ms and the captures per call."""
    times = []
    CAPTURES.clear()
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times), len(CAPTURES) // runs


def bench(parent: Path, files: int, edits: int, runs: int) -> None:
    repo_path = build_repo(parent, files)
    paths = tracked_files(repo_path, 10 + edits)
    sessions = parent / "agent" / "sessions"
    session_file = create_session_file(sessions, str(repo_path.resolve()))
    engine = Engine(FileHost(session_file, sessions), GitRepo.discover(repo_path))
    writer = SessionAppender(session_file)
    engine.session_start("startup")
    first = _prompt(engine, writer, "one", lambda: (repo_path / paths[0]).write_text("agent one\n"))
    _prompt(engine, writer, "two", lambda: (repo_path / paths[1]).write_text("agent two\n"))
    for i in range(edits):  # by hand, after the agent's last turn
        (repo_path / paths[10 + i]).write_text(f"by hand {i}\n")

    plan = operations.plan_for(engine, engine.resolve_point(first) or "")
    report = operations.restore(engine, first, "files", dry_run=True)
    with_times, without_times = [], []
    saved = operations.overwritten_by
    CAPTURES.clear()
    for _ in range(runs):  # interleaved, so that a busy machine weighs on both alike
        started = time.perf_counter()
        operations.restore(engine, first, "files", dry_run=True)
        with_times.append((time.perf_counter() - started) * 1000.0)
        operations.overwritten_by = lambda _engine, _plan: ()  # type: ignore[assignment]
        try:
            started = time.perf_counter()
            operations.restore(engine, first, "files", dry_run=True)
            without_times.append((time.perf_counter() - started) * 1000.0)
        finally:
            operations.overwritten_by = saved  # type: ignore[assignment]
    captures = captures_before = len(CAPTURES) // (2 * runs)
    with_check, without = statistics.median(with_times), statistics.median(without_times)
    check, check_captures = _median_ms(runs, lambda: outside.overwritten_by(engine, plan))
    targets = [engine.resolve_point(first), engine.undo_point()]
    menu, menu_captures = _median_ms(
        runs, lambda: outside.menu_title(engine, M.MENU_TITLE, targets)
    )
    last = engine.last_exact
    prompt, prompt_captures = _median_ms(runs, lambda: outside.prompt_status_note(engine, last))

    print(f"{files} files, {edits} edited by hand; {runs} runs, medians")
    print(f"  outside changes found by the plan: {len(report.outside)}")
    print(f"  restore --dry-run, with the check:    {with_check:8.1f} ms  ({captures} capture/run)")
    print(
        f"  restore --dry-run, without the check: {without:8.1f} ms  ({captures_before} capture/run)"
    )
    print(f"  the check alone (tree diff):          {check:8.2f} ms  ({check_captures} captures)")
    print(f"  menu title (before the menu):         {menu:8.1f} ms  ({menu_captures} capture/run)")
    print(
        f"  prompt note (tree = last point):       {prompt:8.3f} ms  ({prompt_captures} captures)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-outside-") as tmp:
        bench(Path(tmp), args.files, args.edits, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
