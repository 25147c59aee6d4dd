#!/usr/bin/env python3
"""Benchmark: captures through the change feed (as inside ``rewind serve``) vs the reference.

Why it exists: issue 13's targets. Inside the bridge a snapshot is ``take_snapshot`` with the
feed on (:mod:`ledger.git.feed.service`); this runs exactly that in-process, on a synthetic repository,
next to the reference pipeline (fresh ``GIT_INDEX_FILE`` + ``git add -A`` + ``write-tree`` +
``commit-tree``) measured in the same run, alternating ours and the reference run by run (the
machine is shared: medians). Scenarios: nothing changed, 1 file modified, 100 files modified.
It also prints the watcher's start-up time and memory, and the cost of one idle-time
verification (a fed capture + a full scan; off the critical path, shown apart).

Targets (100k files): nothing changed ≤ 1/100 of the reference, 1 modified ≤ 1/60, 100
modified ≤ 1/10; 1,000,000 files (``--million``, opt-in: builds ~1 GB of small files in /tmp and
takes minutes) within 2× of the 100k figures.

Usage::

    python tools/bench_feed.py                       # 100k files, 10 per directory (10k dirs)
    python tools/bench_feed.py --files 20000 --runs 5
    python tools/bench_feed.py --million             # adds the 1,000,000-file repository

A repository generated in the run is slower to write objects into than a settled one (new
directories of a fresh disk, docs/capture.md#numbers-of-the-change-feed-and-of-pi-prompts):
``--dir D`` keeps it, and a second run on the same ``D`` measures the settled case.

Not a test: nothing here asserts a time. Every capture of a series is checked against a
fresh-index tree once, after the timed runs.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_capture import reference_capture

from ledger.git.feed import service as feedmod
from ledger.git.feed.inotify import InotifyWatcher
from ledger.git.repo import GitRepo
from ledger.git.store.snapshot import take_snapshot
from ledger.settings import SnapshotSettings

TARGETS = {"nothing changed": 100.0, "1 file modified": 60.0, "100 files modified": 10.0}


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    ).stdout


def build_repo(parent: Path, files: int, per_dir: int) -> Path:
    repo = parent / f"feed-{files}"
    done = repo / ".git" / "bench-complete"
    if done.is_file() and done.read_text() == f"{files} {per_dir}\n":
        _git(repo, "checkout", "-q", "--", ".")  # reused (--dir): undo an interrupted run
        return repo
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir()
    _git(repo, "init", "-q")
    dirs = max(1, files // per_dir)
    fanout = max(1, int(dirs**0.5))
    for i in range(files):
        d_index = i // per_dir
        d = repo / f"d{d_index // fanout:04d}" / f"s{d_index % fanout:04d}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i % per_dir:03d}.txt").write_text(f"file {i}\n" * 3)
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    _git(repo, "add", "-A")
    # No background `gc --auto` (it would pack the new objects during the timed runs, on the
    # same CPUs); the objects are packed now instead, as in a user's repository.
    _git(repo, "config", "gc.auto", "0")
    _git(repo, "-c", "user.name=Bench", "-c", "user.email=bench@example.com", "commit", "-qm", "s")
    _git(repo, "repack", "-adq")
    done.write_text(f"{files} {per_dir}\n")
    return repo


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def measure(repo: Path, runs: int) -> dict[str, object]:
    gitrepo = GitRepo.discover(repo)
    settings = SnapshotSettings()
    take_snapshot(gitrepo, settings)  # builds the private index (not part of the feed's cost)
    watcher_mb, heap_mb, heap_peak_mb = watcher_memory(repo)
    feedmod.enable(verify=False)
    t0 = time.perf_counter()
    feed = feedmod.feed_for(gitrepo)
    start_ms = (time.perf_counter() - t0) * 1000  # what the caller waits for: the thread start
    assert feed is not None
    ready_at: list[float] = []

    def note_ready() -> None:  # the moment the walk is over, whatever the main thread does
        while not feed.watcher.ready and not feed.watcher.failed:
            time.sleep(0.002)
        ready_at.append(time.perf_counter())

    poller = threading.Thread(target=note_ready, daemon=True)
    poller.start()
    # A capture while the walk is still going: a full scan that does not wait for the watcher.
    t1 = time.perf_counter()
    early = take_snapshot(gitrepo, settings)
    early_ms = (time.perf_counter() - t1) * 1000
    early_ready = feed.watcher.ready
    poller.join()
    ready_ms = (ready_at[0] - t0) * 1000
    if feed.watcher.failed:
        raise SystemExit(f"watcher failed: {feed.watcher.failed}")
    watches = len(feed.watcher._path_wd)
    del early
    take_snapshot(gitrepo, settings)  # the base scan (arms the feed)
    pool = [p for p in sorted(repo.glob("d*/s*/f*.txt"))[:400]]
    originals = {p: p.read_bytes() for p in pool}
    rows: dict[str, tuple[float, float]] = {}
    step = 0
    try:
        for name, count in (
            ("nothing changed", 0),
            ("1 file modified", 1),
            ("100 files modified", 100),
        ):
            ours, ref = [], []
            for _ in range(runs):
                for pipeline in ("ours", "ref"):
                    step += 1
                    for k in range(count):
                        path = pool[(step * count + k) % len(pool)]
                        path.write_bytes(originals[path] + f"bench {step} {k}\n".encode())
                    start = time.perf_counter()
                    if pipeline == "ours":
                        report = take_snapshot(gitrepo, settings)
                        ours.append((time.perf_counter() - start) * 1000)
                    else:
                        reference_capture(repo)
                        ref.append((time.perf_counter() - start) * 1000)
            exact = take_snapshot(gitrepo, settings).tree == reference_capture(repo)
            del report
            rows[name] = (statistics.median(ours), statistics.median(ref))
            print(
                f"  {name:20s} ours {rows[name][0]:8.2f} ms   reference {rows[name][1]:8.1f} ms   "
                f"1/{rows[name][1] / rows[name][0]:.0f}   exact={exact}",
                flush=True,
            )
        t1 = time.perf_counter()
        agreed = feed.verify_now()
        verify_ms = (time.perf_counter() - t1) * 1000
        # A prompt's capture while the verifier scans (it must not wait for the scan).
        pool[0].write_bytes(originals[pool[0]] + b"before the verification\n")
        take_snapshot(gitrepo, settings)
        pool[1].write_bytes(originals[pool[1]] + b"verified\n")
        fed_before = feed.counters.fed
        verifier = threading.Thread(target=feed.verify_now)
        t2 = time.perf_counter()
        verifier.start()
        while feed.counters.fed == fed_before and verifier.is_alive():
            time.sleep(0.001)
        time.sleep(0.05)  # inside the scan now
        pool[2].write_bytes(originals[pool[2]] + b"during the verification\n")
        t3 = time.perf_counter()
        take_snapshot(gitrepo, settings)
        during_ms = (time.perf_counter() - t3) * 1000
        verifier.join()
        second_ms = (time.perf_counter() - t2) * 1000
        described = feed.describe()
    finally:
        for path, data in originals.items():
            path.write_bytes(data)
        feedmod.disable()
    print(
        f"  watcher: feed_for returned in {start_ms:.1f} ms; ready after {ready_ms:.0f} ms in "
        f"the background ({watches} watches); a capture during the walk took {early_ms:.0f} ms "
        f"(full scan; the walk was over when it ended: {early_ready})\n"
        f"  watcher memory: +{watcher_mb:.1f} MB RSS (alone), Python heap {heap_mb:.1f} MB "
        f"(peak during the walk {heap_peak_mb:.1f} MB); kernel: ~1 KB per watch, not in RSS\n"
        f"  one idle verification {verify_ms:.0f} ms (agreed={agreed}, off the critical path); "
        f"a capture (1 file modified) during a verification took {during_ms:.1f} ms "
        f"(that verification {second_ms:.0f} ms, inconclusive={described['inconclusive']}); "
        f"fed={described['fed']} full={described['full']}",
        flush=True,
    )
    return {"rows": rows, "ready_ms": ready_ms, "watcher_mb": watcher_mb, "verify_ms": verify_ms}


def watcher_memory(repo: Path) -> tuple[float, float, float]:
    """``(RSS growth, Python heap, peak heap)`` in MB of one watcher of ``repo``, started and
    stopped on its own (tracemalloc slows the walk: the timed watcher is another one)."""
    gc.collect()
    before = rss_mb()
    tracemalloc.start()
    watcher = InotifyWatcher(str(repo))
    watcher.start()
    while not watcher.ready and not watcher.failed:
        time.sleep(0.01)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    gc.collect()
    grown = rss_mb() - before
    watcher.stop()
    return grown, current / 2**20, peak / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, action="append", help="synthetic size (repeatable)")
    parser.add_argument("--per-dir", type=int, default=10, help="files per directory (default 10)")
    parser.add_argument("--runs", type=int, default=9, help="timed runs per scenario and pipeline")
    parser.add_argument(
        "--million-runs", type=int, default=5, help="timed runs at 1,000,000 files (default 5)"
    )
    parser.add_argument("--million", action="store_true", help="also 1,000,000 files (slow, ~1 GB)")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic repositories")
    parser.add_argument(
        "--dir", type=Path, help="build the repositories here and keep them; reuse them if built"
    )
    args = parser.parse_args(argv)
    sizes = list(args.files or [100_000])
    if args.million:
        sizes.append(1_000_000)
    print(
        f"git {_git(Path.cwd(), 'version').strip()}  cpus {os.cpu_count()}  runs {args.runs} "
        f"(ours and reference alternate; medians)",
        flush=True,
    )
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        args.keep = True
    tmp = args.dir or Path(tempfile.mkdtemp(prefix="bench-feed-"))
    try:
        for size in sizes:
            print(f"\nbuilding {size} files, {args.per_dir} per directory …", flush=True)
            t0 = time.perf_counter()
            repo = build_repo(tmp, size, args.per_dir)
            print(f"  built in {time.perf_counter() - t0:.0f} s", flush=True)
            result = measure(repo, args.million_runs if size >= 1_000_000 else args.runs)
            rows = result["rows"]
            assert isinstance(rows, dict)
            for name, (ours, ref) in rows.items():
                target = TARGETS[name]
                verdict = "ok" if ref / ours >= target else "MISSED"
                print(f"  target {name}: ≤ 1/{target:.0f} → 1/{ref / ours:.0f} {verdict}")
            if not args.keep:
                shutil.rmtree(repo, ignore_errors=True)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
