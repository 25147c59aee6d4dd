#!/usr/bin/env python3
"""Benchmark: the one-shot CLI as whole processes (start-up, and ``rewind snapshot``).

Why it exists: issue 13's targets for the one-shot CLI (docs/capture.md#start-up). A user's
shell, Pi's extension and scripts run ``rewind`` as a new process each time, so what counts is
the whole process: interpreter start, imports, git processes, the capture itself.

(a) Start-up: ``python -c pass``, ``rewind --version`` and ``rewind --help``, each run as

- *editable*: the development install (``.venv/bin/rewind``, ``pip install -e``). Its ``site``
  start-up runs setuptools' editable finder (``__editable___rewind_ledger_*_finder``, a
  ``.pth`` hook that imports a few stdlib modules), which a user's regular install does not
  have;
- *regular*: what a regular (wheel) install runs, emulated without installing:
  ``python -S`` (no ``site``, so no ``.pth`` hook at all) with ``PYTHONPATH=<repo>:<venv
  site-packages>`` and the console script's two lines. A real regular install still runs
  ``site`` (about the difference between the two ``python -c pass`` rows), so the truth lies
  between the rows; the editable finder's own cost is the difference of the two ``rewind``
  rows minus that.

Target: ``rewind --help`` ≤ 60 ms.

(b) ``rewind snapshot --json`` on a synthetic repository (100k files, 18 per directory: ~5,600
directories; the generator of ``tools/bench_feed.py``) against the reference whole process:
``sh -c`` running a fresh ``GIT_INDEX_FILE``, ``git -c core.autocrlf=false add -A``, ``git
write-tree`` and ``git commit-tree``. Scenarios: nothing changed, 1 file modified (a different
file before each run, for both). Runs alternate ours / reference (the machine is shared:
medians of the same run). Targets: ratio ours/reference ≤ 0.10 (nothing changed), ≤ 0.12
(1 modified). Two rows of ours: *alone* (``REWIND_SERVED=0``: the process captures by itself) and
*served* (a ``rewind serve --watch`` runs in the repository, as Pi's bridge does during a
session, and answers the snapshot from its change feed; its idle-time verification is off for
the benchmark, it would compete for the CPUs).

Every child runs without ``PYTHONDONTWRITEBYTECODE`` (bytecode caches are used, as on a user's
machine). Not a test: nothing here asserts a time.

Usage::

    python tools/bench_cli.py                        # start-up + 100k-file repository
    python tools/bench_cli.py --startup-only
    python tools/bench_cli.py --startup-only --installed /tmp/v   # after: python -m venv /tmp/v && /tmp/v/bin/pip install .
    python tools/bench_cli.py --repo /tmp/feed-100000 --runs 15   # reuse a built repository
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_floors import describe, floors, load, medians

TARGET_HELP_MS = 60.0
TARGETS = {"nothing changed": 0.10, "1 file modified": 0.12}
PER_DIR = 18
REFERENCE = (
    'set -e; export GIT_INDEX_FILE="$(mktemp -u)"; '
    "git -c core.autocrlf=false add -A; t=$(git write-tree); "
    'git -c user.name=Bench -c user.email=bench@example.com commit-tree "$t" -m "pi rewind '
    'snapshot" >/dev/null; rm -f "$GIT_INDEX_FILE"'
)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra or {})
    return env


def timed(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) * 1000.0


def startup(runs: int, installed: Path | None = None) -> list[tuple[str, float]]:
    python = sys.executable
    site_packages = sysconfig.get_paths()["purelib"]
    regular_env = child_env({"PYTHONPATH": f"{ROOT}{os.pathsep}{site_packages}"})
    script = "import sys; from ledger.cli import main; sys.argv[0] = 'rewind'; sys.exit(main())"
    rewind = str(Path(python).parent / "rewind")
    cases: list[tuple[str, list[str], dict[str, str]]] = [
        ("python -c pass", [python, "-c", "pass"], child_env()),
        ("python -S -c pass", [python, "-S", "-c", "pass"], child_env()),
        ("rewind --version (editable)", [rewind, "--version"], child_env()),
        ("rewind --version (regular)", [python, "-S", "-c", script, "--version"], regular_env),
        ("rewind --help (editable)", [rewind, "--help"], child_env()),
        ("rewind --help (regular)", [python, "-S", "-c", script, "--help"], regular_env),
    ]
    if installed is not None:  # a real wheel install: `python -m venv V && V/bin/pip install .`
        cases += [
            (
                "python -c pass (installed)",
                [str(installed / "bin" / "python"), "-c", "pass"],
                child_env(),
            ),
            (
                "rewind --version (installed)",
                [str(installed / "bin" / "rewind"), "--version"],
                child_env(),
            ),
            (
                "rewind --help (installed)",
                [str(installed / "bin" / "rewind"), "--help"],
                child_env(),
            ),
        ]
    for _, cmd, env in cases:  # warm the caches, write the .pyc files
        timed(cmd, env=env)
    samples: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    for _ in range(runs):  # interleaved, so that load changes hit every case alike
        for name, cmd, env in cases:
            samples[name].append(timed(cmd, env=env))
    return [(name, statistics.median(values)) for name, values in samples.items()]


def snapshot_series(repo: Path, runs: int) -> list[tuple[str, float, float, float]]:
    """Rows ``(scenario, ours alone, ours served, reference)``, medians of alternating runs."""
    from bench_capture import tracked_files

    rewind = str(Path(sys.executable).parent / "rewind")
    ours_cmd = [rewind, "snapshot", "--json"]
    ref_cmd = ["sh", "-c", REFERENCE]
    alone_env = child_env({"REWIND_SERVED": "0"})
    served_env = child_env()
    timed(ours_cmd, cwd=repo, env=alone_env)  # builds the private index the first time
    timed(ours_cmd, cwd=repo, env=alone_env)
    # A running `rewind serve --watch` (what Pi's bridge also does). Its idle-time verification
    # is off here: it would compete with the timed runs for the 2 CPUs.
    server = subprocess.Popen(
        [rewind, "serve", "--watch"],
        cwd=repo,
        env=child_env({"REWIND_FEED_VERIFY": "0"}),
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    print(f"  {server.stderr.readline().strip()}", flush=True)
    time.sleep(3)  # the watcher's walk
    for _ in range(3):
        timed(ours_cmd, cwd=repo, env=served_env)  # the base scan arms the feed
    pool = tracked_files(repo, 200)
    originals = {p: p.read_bytes() for p in pool}
    rows = []
    step = 0

    def modify() -> None:
        nonlocal step
        step += 1
        path = pool[step % len(pool)]
        path.write_bytes(originals[path] + f"bench {step}\n".encode())

    scenarios: list[tuple[str, Callable[[], None]]] = [
        ("nothing changed", lambda: None),
        ("1 file modified", modify),
    ]
    try:
        for name, mutate in scenarios:
            alone: list[float] = []
            served: list[float] = []
            ref: list[float] = []
            for _ in range(runs):
                mutate()
                alone.append(timed(ours_cmd, cwd=repo, env=alone_env))
                mutate()
                served.append(timed(ours_cmd, cwd=repo, env=served_env))
                mutate()
                ref.append(timed(ref_cmd, cwd=repo, env=alone_env))
            row = (
                name,
                statistics.median(alone),
                statistics.median(served),
                statistics.median(ref),
            )
            rows.append(row)
            print(
                f"  {name:18s} alone {row[1]:7.0f} ms   served {row[2]:6.1f} ms   "
                f"reference {row[3]:7.0f} ms   ratios {row[1] / row[3]:.3f} / {row[2] / row[3]:.3f}",
                flush=True,
            )
    finally:
        for path, data in originals.items():
            path.write_bytes(data)
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
        print(f"  server: {err.strip()}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=11, help="timed runs per case")
    parser.add_argument("--files", type=int, default=100_000, help="synthetic repository size")
    parser.add_argument("--repo", type=Path, help="reuse this synthetic repository")
    parser.add_argument("--startup-only", action="store_true")
    parser.add_argument(
        "--installed",
        type=Path,
        help="also time a regular install: a venv where `pip install .` (not -e) was run",
    )
    parser.add_argument("--keep", action="store_true", help="keep the synthetic repository")
    args = parser.parse_args(argv)
    git_version = subprocess.run(["git", "version"], capture_output=True, text=True).stdout
    print(
        f"{git_version.strip()}   python {sys.version.split()[0]}   runs: {args.runs}   {load()}",
        flush=True,
    )
    print("\n(a) start-up, medians", flush=True)
    rows = startup(args.runs, args.installed)
    for name, ms in rows:
        verdict = ""
        if name.startswith("rewind --help"):
            verdict = f"  target ≤{TARGET_HELP_MS:.0f} ms " + (
                "ok" if ms <= TARGET_HELP_MS else "MISSED"
            )
        print(f"  {name:30s} {ms:7.1f} ms{verdict}")
    if args.startup_only:
        return 0

    tmp: Path | None = None
    repo = args.repo
    if repo is None:
        from bench_feed import build_repo

        tmp = Path(tempfile.mkdtemp(prefix="bench-cli-"))
        print(f"\nbuilding a synthetic repository of {args.files} files …", flush=True)
        started = time.perf_counter()
        repo = build_repo(tmp, args.files, PER_DIR)
        print(f"  built in {time.perf_counter() - started:.0f} s", flush=True)
    print(f"\n(b) rewind snapshot --json, whole process, {repo}", flush=True)
    print(f"  floors: {describe(medians([floors(repo) for _ in range(3)]))}   {load()}", flush=True)
    try:
        results = snapshot_series(repo.resolve(), args.runs)
    finally:
        if tmp is not None and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp is not None:
            print(f"repository kept in {repo}")
    print(
        f"\n  {'scenario':18s} {'alone':>9s} {'served':>9s} {'reference':>10s} "
        f"{'alone/ref':>9s} {'served/ref':>10s}  target"
    )
    for name, alone, served, ref in results:
        target = TARGETS[name]
        print(
            f"  {name:18s} {alone:6.0f} ms {served:6.1f} ms {ref:7.0f} ms {alone / ref:9.3f} "
            f"{served / ref:10.3f}  ≤{target:.2f}: alone "
            + ("ok" if alone / ref <= target else "MISSED")
            + ", served "
            + ("ok" if served / ref <= target else "MISSED")
        )
    print(f"  {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
