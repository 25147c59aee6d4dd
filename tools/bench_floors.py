#!/usr/bin/env python3
"""The machine's floors, measured in the same run as a benchmark: what no entry point can beat.

Why it exists: the machine is shared (2 cores, other benchmarks running), so a figure in
milliseconds means little alone. Every whole-process benchmark prints its medians beside these
floors, sampled interleaved with its own runs (issue 34, item 6), and beside the load average:

- ``python -c pass``: one interpreter start (the venv's python, with ``site``; bytecode caches on,
  as on a user's machine: ``PYTHONDONTWRITEBYTECODE`` is dropped from every child's environment);
- ``stat scan``: ``git diff-files --name-only`` after ``git update-index -q --refresh``: one
  ``lstat`` of every tracked file against a warm index, nothing hashed, no untracked walk;
- ``git status``: ``git status --porcelain`` (the stat scan, plus the walk for untracked files
  and the index against ``HEAD``), on the same warm index;
- ``blob write``: ``git hash-object -w --stdin`` of a new small blob (a process, a zlib write of
  one loose object);

plus :func:`load` (``os.getloadavg()`` and the CPU count).

Invariants: a floor sample changes nothing in the work tree; it refreshes the stat data of the
repository's own index (``update-index --refresh``, what ``git status`` does too) and writes one
loose blob per sample.

Usage (also a library: ``from bench_floors import floors, load``)::

    python tools/bench_floors.py REPO [--runs 5]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FLOOR_NAMES = ("python -c pass", "stat scan", "git status", "blob write")
INSTALL_PYTHON: str | None = None
"""Set by a benchmark's ``--install``: the python of a regular (non-editable) install, whose
children run without ``PYTHONPATH`` (the installed package, not this checkout) and whose
``python -c pass`` is the floor."""
_blobs = itertools.count()


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Our environment without ``PYTHONDONTWRITEBYTECODE`` (a child uses and writes bytecode
    caches, as on a user's machine), with ``PYTHONPATH`` starting at this checkout so that the
    children run the code beside the benchmark (the editable install's finder comes after it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if INSTALL_PYTHON is not None:  # a regular install runs its own copy of the package
        env.pop("PYTHONPATH", None)
        env.update(extra or {})
        return env
    paths = [str(ROOT), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.update(extra or {})
    return env


def leave_no_watcher(repo: Path) -> None:
    """Stop the watcher a benchmark's bridges started for ``repo`` (they outlive it by their
    ``--idle-exit``, and their idle-time verification would run beside the next benchmark);
    quietly: a repository already gone or not served is left as it is."""
    import contextlib

    from ledger.git.private import serving_pid

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        git_dir = subprocess.run(
            ["git", "rev-parse", "--absolute-git-dir"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
        if git_dir and serving_pid(Path(git_dir)) is not None:
            subprocess.run(
                [INSTALL_PYTHON or sys.executable, "-m", "ledger", "serve", "--stop"],
                cwd=repo,
                env=child_env(),
                capture_output=True,
                timeout=60,
            )


def precompile() -> None:
    """Write the bytecode caches of ``ledger`` before the first timed child (a user's install
    has them; a first run without them would pay the compilation)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "ledger")],
        env=child_env(),
        check=True,
        stdout=subprocess.DEVNULL,
    )


def timed(
    cmd: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
) -> float:
    """Milliseconds of one whole process (start to exit); raises if it fails."""
    started = time.perf_counter()
    subprocess.run(
        cmd,
        cwd=cwd,
        env=env if env is not None else child_env(),
        input=input,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    return (time.perf_counter() - started) * 1000.0


def warm_index(repo: Path) -> None:
    """Refresh the stat data of the repository's index, so that a stat scan hashes nothing."""
    subprocess.run(
        ["git", "update-index", "-q", "--refresh"], cwd=repo, capture_output=True, check=False
    )


def floors(repo: Path) -> dict[str, float]:
    """One sample (ms) of each floor in ``repo``: call it once per benchmark round and take the
    medians (:func:`medians`), so that the floors see the same load as the timed runs."""
    env = child_env()
    warm_index(repo)
    blob = f"bench floor blob {os.getpid()} {time.time_ns()} {next(_blobs)}\n".encode()
    return {
        "python -c pass": timed([INSTALL_PYTHON or sys.executable, "-c", "pass"], env=env),
        "stat scan": timed(["git", "diff-files", "--name-only"], cwd=repo, env=env),
        "git status": timed(["git", "status", "--porcelain"], cwd=repo, env=env),
        "blob write": timed(["git", "hash-object", "-w", "--stdin"], cwd=repo, env=env, input=blob),
    }


def medians(samples: list[dict[str, float]]) -> dict[str, float]:
    """The median of each floor over ``samples`` (rounds of :func:`floors`)."""
    return {name: statistics.median(s[name] for s in samples) for name in FLOOR_NAMES if samples}


def describe(values: dict[str, float]) -> str:
    """One line: every floor's median."""
    return "   ".join(f"{name} {values[name]:.1f} ms" for name in FLOOR_NAMES if name in values)


def load() -> str:
    """The machine's load: ``os.getloadavg()`` and the CPU count."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cpus"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("repo", type=Path, help="a git repository (its index is refreshed)")
    parser.add_argument("--runs", type=int, default=5, help="samples of each floor (median)")
    args = parser.parse_args(argv)
    print(load(), flush=True)
    samples = [floors(args.repo) for _ in range(args.runs)]
    print(f"floors (medians of {args.runs}): {describe(medians(samples))}")
    print(load())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
