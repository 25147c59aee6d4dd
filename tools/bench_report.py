#!/usr/bin/env python3
"""Benchmark: ``rewind report`` of a long session — write time, page size, first screen in Chromium.

Why it exists: issue 25 measured a 10 MB page written in 15.8 s that headless Chromium needed
~22 s to load, for 100 prompts / 200 turns on a 10k-file repository. The target is: written in
<= 2 s, <= 3 MB, first screen drawn by headless Chromium in <= 2 s.

Setup (temporary directory, removed at the end): a committed repository of ``--files`` Python
files (100 directories); a session of ``--prompts`` prompts with two turns each, written the way
Pi writes it (assistant messages with ``toolCall`` parts: ``edit``, ``write``, ``bash``), one
snapshot per prompt and per turn (``take_snapshot``) bound by a ``rewind-turn`` record. A turn
changes about 9 files (modified, added, sometimes deleted); one turn changes ``--big`` files; a
few files carry lone carriage returns, a symlink and a name that is not UTF-8.

Timed, in the same run, on the same session:

- the new report: ``open_review`` + ``render_report`` + writing the file, as ``rewind report``
  does (``write_report``), median of ``--runs``;
- render only, with the review's diffs already computed (what this page's code costs, apart
  from ``ledger.review.diff``);
- the old report: the same with ``render_report`` loaded from ``git show a1b0619^:ledger/review/html.py``
  (the page before issue 25)
  (``--old-rev``) as a separate module;
- both pages in headless Chromium driven over the DevTools protocol (``--remote-debugging-pipe``,
  no network): first contentful paint and the load event after navigation start, read from the
  page's own ``performance`` entries, median of ``--chrome-runs`` (a fresh browser each run).

Usage::

    python tools/bench_report.py --quick    # 1k files, 20 prompts, a 60-file turn (< 1 min)
    python tools/bench_report.py            # 10k files, 100 prompts / 200 turns, a 400-file turn

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger.clock import SystemClock
from ledger.git.repo import GitRepo
from ledger.git.store.snapshot import take_snapshot
from ledger.record_models import build_turn
from ledger.records import TURN
from ledger.review.html import render_report
from ledger.review.show import open_review
from ledger.session.store import SessionAppender, create_session_file
from tests.browser.conftest import Cdp


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def _module(rel: Path) -> str:
    return "".join(f"value_{j} = {j * 7}  # {rel.name} line {j}\n" for j in range(30))


def build(root: Path, files: int, prompts: int, big: int) -> tuple[Path, Path, Path]:
    """The repository, the session file and the agent directory."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    names = [Path(f"pkg{i % 100:02}") / f"m{i}.py" for i in range(files)]
    for rel in names:
        (repo / rel).parent.mkdir(exist_ok=True)
        (repo / rel).write_text(_module(rel))
    git(repo, "add", "-A")
    git(repo, "config", "gc.auto", "0")  # no background gc racing the benchmark
    git(repo, "-c", "user.name=b", "-c", "user.email=b@e", "commit", "-qm", "base")
    git(repo, "repack", "-adq")
    agent = root / "agent"
    path = create_session_file(agent / "sessions", str(repo))
    writer = SessionAppender(path)
    r = GitRepo.discover(repo)
    now = SystemClock().now_ms()
    big_turn = prompts  # the middle turn (of 2 * prompts)
    turn_no = 0
    for p in range(prompts):
        before = take_snapshot(r, last_exact=None).commit
        user = writer.append_entry(
            {
                "type": "message",
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": f"prompt {p}: refactor module group {p}"}],
                    "timestamp": now,
                },
            }
        )
        bound = [(user["id"], before)]
        for t in range(2):
            calls = _change(repo, names, p, t, big if turn_no == big_turn else 0)
            turn_no += 1
            after = take_snapshot(r, last_exact=None).commit
            content: list[dict[str, Any]] = [{"type": "text", "text": f"turn {t} of prompt {p}"}]
            content += [
                {"type": "toolCall", "id": f"c{p}-{t}-{i}", "name": name, "arguments": args}
                for i, (name, args) in enumerate(calls)
            ]
            reply = writer.append_entry(
                {
                    "type": "message",
                    "message": {"role": "assistant", "content": content, "timestamp": now},
                }
            )
            bound.append((reply["id"], after))
        writer.append_custom(TURN, build_turn(bound).to_data())
    return repo, path, agent


def _change(
    repo: Path, names: list[Path], p: int, t: int, big: int
) -> list[tuple[str, dict[str, Any]]]:
    """About 9 file changes (or ``big``), returned as the tool calls that made them."""
    calls: list[tuple[str, dict[str, Any]]] = []
    seed = p * 2 + t
    count = big or 6
    for k in range(count):
        rel = names[(seed * 131 + k * 977) % len(names)]
        f = repo / rel
        if not f.exists():
            continue
        lines = f.read_text().splitlines(keepends=True)
        lines[(seed + k) % len(lines)] = f"changed_{p}_{t} = {k}\n"
        lines[(seed + k + 13) % len(lines)] = f"also_{p}_{t} = {k}\n"
        f.write_text("".join(lines))
        calls.append(("edit", {"path": str(rel), "edits": []}))
    for k in range(2):
        rel = Path(f"new{p % 10}") / f"n{p}_{t}_{k}.py"
        (repo / rel).parent.mkdir(exist_ok=True)
        (repo / rel).write_text(_module(rel))
        calls.append(("write", {"path": str(rel), "content": "…"}))
    if seed % 3 == 0:
        rel = names[(seed * 7919) % len(names)]
        if (repo / rel).exists():
            (repo / rel).unlink()
            calls.append(("bash", {"command": f"git rm -q {rel}"}))
    if seed == 1:
        (repo / "notes.txt").write_bytes(b"header\nstep 1\rstep 2\rstep 3\nA\nB\nC\nD\nE\n")
        (repo / "latest").symlink_to("notes.txt")
        (repo / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin one\n")
    calls.append(("bash", {"command": "pytest -q"}))
    return calls


def load_old(rev: str) -> ModuleType:
    source = subprocess.run(
        ["git", "show", f"{rev}:ledger/review/html.py"],
        cwd=Path(__file__).resolve().parent.parent,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    tmp = Path(tempfile.mkdtemp(prefix="old-html-")) / "old_report_html.py"
    tmp.write_text(source)
    spec = importlib.util.spec_from_file_location("old_report_html", tmp)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_report_html"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def write_with(
    render: Callable[..., tuple[str, dict[str, int]]], repo: Path, session: Path, out: Path
) -> int:
    """What ``rewind report`` does: open the review, render, write the bytes."""
    review = open_review(GitRepo.discover(repo), session)
    page, _counts = render(review)
    data = page.encode("utf-8", "replace")
    out.write_bytes(data)
    return len(data)


def timed(fn: Callable[[], int], runs: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        size = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), size


PAINT = """JSON.stringify((() => {
  const t = performance.timing, p = performance.getEntriesByName('first-contentful-paint')[0];
  return {fcp: p ? p.startTime : null, load: t.loadEventEnd - t.navigationStart,
          dcl: t.domContentLoadedEventEnd - t.navigationStart,
          rows: document.querySelectorAll('tr').length};
})())"""


def first_screen(binary: str, page: Path, timeout: float = 180) -> dict[str, float]:
    """Milliseconds from navigation start to first contentful paint and to the load event."""
    profile = Path(tempfile.mkdtemp(prefix="bench-chrome-"))
    chrome = Cdp(binary, profile)
    try:
        chrome.open(page.resolve().as_uri(), timeout)
        time.sleep(0.2)  # loadEventEnd is set just after the event
        result: dict[str, float] = json.loads(chrome.evaluate(PAINT))
        return result
    finally:
        chrome.close()
        shutil.rmtree(profile, ignore_errors=True)


def chrome_medians(binary: str, page: Path, runs: int) -> dict[str, float]:
    samples = [first_screen(binary, page) for _ in range(runs)]
    return {k: statistics.median(s[k] or 0 for s in samples) for k in ("fcp", "dcl", "load")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--big", type=int, default=400, help="files changed by the one big turn")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--chrome-runs", type=int, default=3)
    parser.add_argument(
        "--old-rev",
        default="a1b0619^",
        help="revision holding the old html.py (default: before issue 25's report)",
    )
    parser.add_argument("--no-chrome", action="store_true")
    parser.add_argument("--quick", action="store_true", help="1k files, 20 prompts, a 60-file turn")
    parser.add_argument("--keep", metavar="DIR", help="copy both pages here")
    args = parser.parse_args()
    if args.quick:
        args.files, args.prompts, args.big, args.runs, args.chrome_runs = 1000, 20, 60, 3, 1
    old = load_old(args.old_rev)
    chromium = None if args.no_chrome else shutil.which("chromium") or shutil.which("google-chrome")
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        start = time.perf_counter()
        repo, session, _agent = build(Path(tmp), args.files, args.prompts, args.big)
        print(
            f"setup: {args.files} files, {args.prompts} prompts / {2 * args.prompts} turns, "
            f"a {args.big}-file turn, in {time.perf_counter() - start:.1f} s"
        )
        new_page, old_page = Path(tmp) / "new.html", Path(tmp) / "old.html"
        new_t, new_size = timed(
            lambda: write_with(render_report, repo, session, new_page), args.runs
        )
        old_t, old_size = timed(
            lambda: write_with(old.render_report, repo, session, old_page), args.runs
        )
        print(
            f"write, new: median {new_t:.3f} s, {new_size / 1e6:.2f} MB  (target <= 2 s, <= 3 MB)"
        )
        print(f"write, old: median {old_t:.3f} s, {old_size / 1e6:.2f} MB")
        print(f"ratio old/new: time {old_t / new_t:.1f}x, size {old_size / new_size:.1f}x")
        review = open_review(GitRepo.discover(repo), session)
        old.render_report(review)  # both renderers now find every diff computed
        new_r, _ = timed(lambda: len(render_report(review)[0]), args.runs)
        old_r, _ = timed(lambda: len(old.render_report(review)[0]), args.runs)
        print(
            f"render only (diffs already computed): new {new_r:.3f} s, old {old_r:.3f} s, "
            f"ratio {old_r / new_r:.1f}x; the rest of the write time is the diff layer"
        )
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(new_page, Path(args.keep) / "report-new.html")
            shutil.copy(old_page, Path(args.keep) / "report-old.html")
        if chromium is None:
            print("chromium: not found or --no-chrome; first-screen times skipped")
            return
        new_c = chrome_medians(chromium, new_page, args.chrome_runs)
        old_c = chrome_medians(chromium, old_page, args.chrome_runs)
        for name, c in (("new", new_c), ("old", old_c)):
            print(
                f"chromium, {name}: first contentful paint {c['fcp'] / 1000:.3f} s, "
                f"DOMContentLoaded {c['dcl'] / 1000:.3f} s, load {c['load'] / 1000:.3f} s "
                f"(medians of {args.chrome_runs}; target first screen <= 2 s)"
            )
        print(
            f"ratio old/new: first paint {old_c['fcp'] / max(new_c['fcp'], 1):.1f}x, "
            f"load {old_c['load'] / max(new_c['load'], 1):.1f}x"
        )


if __name__ == "__main__":
    main()
