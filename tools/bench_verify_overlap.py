#!/usr/bin/env python3
"""Benchmark: a prompt's capture while the change feed's idle-time verification is running.

Why it exists: a watcher (``rewind serve --watch``, the shared watcher Pi's bridges send their
captures to, docs/capture.md#shared-watcher) verifies its fed tree against a full scan about a
second after each capture. When the next prompt's capture arrives during that scan, it must not
wait for it: the scan runs without the capture lock, its git processes run under the idle
scheduling policy (``SCHED_IDLE``), and the process uses a short GIL switch interval. This
measures what is left of the overlap.

Each configuration starts a watcher on the same synthetic repository (100k files, 18 per
directory, the generator of ``tools/bench_feed.py``), detached in its own session as
``autoWatchSeconds`` starts it, and times captures requested through its socket exactly as a
bridge does (:func:`ledger.bridge.snapshot_socket.request_capture`): one file modified before
each, then 80 ms of pause, which the verification started 10 ms after the capture
(``REWIND_FEED_VERIFY_IDLE_S=0.01``) fills with its full scan. Configurations:

- *no verification* (``REWIND_FEED_VERIFY=0``): the floor;
- *verification overlapping*: every capture lands in a scan.

The reference pipeline (fresh ``GIT_INDEX_FILE``, ``git add -A``, ``write-tree``, ``commit-tree``;
``tools/bench_cli.py``'s) is timed in the same run, for scale. Medians and 90th percentiles; not a test, nothing asserts a time.

Usage::

    python tools/bench_verify_overlap.py                      # builds 100k files
    python tools/bench_verify_overlap.py --repo /tmp/feed-100000 --captures 60
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_cli import PER_DIR, REFERENCE  # the same reference whole process

PAUSE_S = 0.08
CONFIGS = {
    "no verification": {"REWIND_FEED_VERIFY": "0"},
    "verification overlapping": {"REWIND_FEED_VERIFY_IDLE_S": "0.01"},
}


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]


def reference_ms(repo: Path, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(["sh", "-c", REFERENCE], cwd=repo, check=True)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def series(repo: Path, env: dict[str, str], captures: int) -> tuple[list[float], dict[str, object]]:
    """Capture latencies (ms) through a fresh watcher, and its final feed status."""
    from ledger.bridge.snapshot_socket import (
        capture_settings_fields,
        find_repository,
        request_capture,
        serving,
    )
    from ledger.git.feed.service import read_status_file
    from ledger.settings import SnapshotSettings

    found = find_repository(repo)
    assert found is not None
    if serving(*found):
        raise SystemExit("a watcher already serves this repository: stop it first")
    rewind = str(Path(sys.executable).parent / "rewind")
    watcher = subprocess.Popen(
        [rewind, "serve", "--watch"],
        cwd=repo,
        env={**os.environ, **env},
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    defaults = SnapshotSettings()
    settings = capture_settings_fields(
        defaults.max_untracked_file_bytes, tuple(defaults.protected_dirs)
    )
    bench = repo / "bench-verify"
    bench.mkdir(exist_ok=True)
    latencies: list[float] = []
    try:
        deadline = time.monotonic() + 60
        while not serving(*found):
            if time.monotonic() > deadline or watcher.poll() is not None:
                raise SystemExit("the watcher did not start")
            time.sleep(0.05)
        time.sleep(3)  # its walk
        for _ in range(2):
            request_capture(*found, settings)  # the base scan arms the feed
        time.sleep(1.5)
        for n in range(captures):
            (bench / f"f{n % 20}.txt").write_text(f"{n} {time.time()}\n")
            started = time.perf_counter()
            answer = request_capture(*found, settings)
            latencies.append((time.perf_counter() - started) * 1000)
            if not isinstance(answer, dict):
                raise SystemExit(f"capture failed: {answer}")
            time.sleep(PAUSE_S)
    finally:
        watcher.send_signal(signal.SIGINT)
        watcher.wait(timeout=60)
        shutil.rmtree(bench, ignore_errors=True)
    status = read_status_file(found[1]) or {}
    return latencies[1:], status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--repo", type=Path, help="reuse this synthetic repository")
    parser.add_argument("--captures", type=int, default=40, help="timed captures per config")
    args = parser.parse_args(argv)
    git_version = subprocess.run(["git", "version"], capture_output=True, text=True).stdout
    print(f"{git_version.strip()}   cpus: {os.cpu_count()}   captures: {args.captures}")
    tmp: Path | None = None
    repo = args.repo
    if repo is None:
        from bench_feed import build_repo

        tmp = Path(tempfile.mkdtemp(prefix="bench-verify-"))
        print(f"building a synthetic repository of {args.files} files …", flush=True)
        repo = build_repo(tmp, args.files, PER_DIR)
    repo = repo.resolve()
    try:
        reference = reference_ms(repo, 3)
        print(f"reference pipeline (bench_cli.REFERENCE): {reference:.0f} ms", flush=True)
        for name, env in CONFIGS.items():
            times, status = series(repo, env, args.captures)
            counts = {k: status.get(k) for k in ("fed", "full", "verified", "inconclusive")}
            median = statistics.median(times)
            print(
                f"  {name:26s} median {median:6.2f} ms = 1/{reference / median:,.0f}   "
                f"p90 {p90(times):6.2f} ms   max {max(times):6.2f} ms   {json.dumps(counts)}",
                flush=True,
            )
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
