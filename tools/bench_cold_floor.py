#!/usr/bin/env python3
"""The least a cold ``rewind restore`` of this design can take, timed beside the reference.

Why it exists: issue 34 holds a cold ``rewind restore`` (one file differs, 100k files, nobody
watches) to ≤ 0.15 of the reference's restore, against a floor of "interpreter start + one stat
scan". A restore must first take an exact undo snapshot, and the one scan that makes it is the
capture's ``git status`` on the private index (docs/capture.md#status-prefetch): stat of every
entry, the untracked walk through git's cache, and the index written back when it refreshed
anything. A cold process must also load pygit2 and orjson, which it does while that status
runs (the prefetch). These rows time exactly those parts, with none of the engine's own work, so
that the cold row of :mod:`bench_restore` can be read against what this design cannot avoid:

- ``the capture's git status alone``: the very argv and environment the capture runs
  (:func:`ledger.git.capture.prefetch.status_command`), one process;
- ``python + that status + pygit2/orjson imports``: an interpreter (the measured install's) that
  starts that status, imports pygit2 and orjson while it runs, and waits for it. No rewind code.

Each runs on a copy of the private index (``shutil.copy2``, the file's times kept: git's racy
check reads them), so that the index the capture keeps, and the racy bookkeeping beside it
(:mod:`ledger.git.capture.racy`), are never touched by a status the capture did not run. The
copy is made before the clock starts. Not a test: nothing here asserts a time.

Usage: imported by ``tools/bench_restore.py`` (phase 1 rows), or alone::

    python tools/bench_cold_floor.py REPO [--runs 7]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_floors import load

_IMPORTS = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:], cwd=os.environ['BENCH_ROOT'], stdin=subprocess.DEVNULL,"
    " stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
    "import pygit2, orjson\n"
    "p.communicate()\n"
    "sys.exit(p.returncode)\n"
)


def _private_status(repo: Path, copy: Path) -> tuple[list[str], dict[str, str], Path]:
    """The capture's status command, pointed at ``copy`` (a fresh copy of the private index)."""
    from ledger.git.capture.index import PrivateIndex
    from ledger.git.capture.prefetch import status_command
    from ledger.git.repo import GitRepo
    from ledger.git.runner import GitRunner

    gitrepo = GitRepo.discover(repo)
    index = PrivateIndex(gitrepo.git_dir).index_path
    argv, env = status_command(GitRunner(gitrepo.root, gitrepo.git_dir), copy)
    return argv, env, index


def status_alone(repo: Path, scratch: Path) -> Callable[[], float]:
    """Time the capture's ``git status`` as one process (ms)."""
    copy = scratch / "index"
    argv, env, index = _private_status(repo, copy)

    def run() -> float:
        shutil.copy2(index, copy)
        started = time.perf_counter()
        subprocess.run(argv, cwd=repo, env=env, capture_output=True, check=True)
        return (time.perf_counter() - started) * 1000.0

    return run


def python_status_imports(repo: Path, scratch: Path, python: str) -> Callable[[], float]:
    """Time an interpreter that runs that status while importing pygit2 and orjson (ms)."""
    copy = scratch / "index"
    argv, env, index = _private_status(repo, copy)
    env = {**env, "BENCH_ROOT": str(repo)}

    def run() -> float:
        shutil.copy2(index, copy)
        started = time.perf_counter()
        subprocess.run([python, "-c", _IMPORTS, *argv], env=env, capture_output=True, check=True)
        return (time.perf_counter() - started) * 1000.0

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help="a repository with a private index (a capture ran)")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    from bench_capture import reference_snapshot
    from bench_restore import Bench, reference_restore

    with tempfile.TemporaryDirectory(prefix="bench-cold-floor-") as tmp:
        # A commit of the whole work tree, untracked files too, as the reference takes it (a
        # commit of tracked files only would make its restore delete the untracked ones).
        target = reference_snapshot(args.repo)[1]
        bench = Bench(args.repo, Path(tmp) / "agent")
        if not bench.pool:
            parser.error(
                "REPO has no tracked d*/….txt files to change (tools/bench_feed.py's layout)"
            )

        def reference() -> float:
            rel = bench.change_one()
            elapsed = reference_restore(args.repo, target)
            bench.check("the reference", rel)
            return elapsed

        cases: dict[str, Callable[[], float]] = {
            "reference (sh: git add -A … git restore)": reference,
            "the capture's git status alone": status_alone(args.repo, Path(tmp)),
            "python + that status + pygit2/orjson imports": python_status_imports(
                args.repo, Path(tmp), sys.executable
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, run in cases.items():
                times[name].append(run())
        bench.put_back()
    ref = statistics.median(next(iter(times.values())))
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:48s} {median:8.1f} ms {median / ref:7.3f}")
    print(f"  {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
