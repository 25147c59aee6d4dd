#!/usr/bin/env python3
"""Benchmark: a restore where 1 file differs, ours (``restore_commit``) vs the reference's.

Why it exists: issue 4 asks that a restore cost grow with the number of changed files, not with
the repository: on the 100k-file repository, ours (the whole ``restore_commit``: capture and
plan, undo snapshot, delete/write, verification) must take at most 1/5 of the reference's
restore measured in the same run.

The reference (docs/design.md#the-references-methods): a fresh-index capture (``GIT_INDEX_FILE`` in a temp dir,
``git -c core.autocrlf=false add -A``, ``write-tree``), ``commit-tree`` for the undo snapshot,
the delete list (``git diff --name-only --diff-filter=D -z``), then ``git restore
--source=<c> --worktree -- .`` at the root against the user's index.

Each timed round: one tracked file is modified and ours restores the target snapshot (default
``verify="paths"``); the file is modified again and ours restores it with ``verify="capture"``
(a whole second capture, shown for comparison); the file is modified again and the reference
restores it (its ``git restore`` reuses the user's index entries whose blob matches, so it
writes only the changed file; its cost is mostly the fresh-index capture). An untimed capture
after each reference run checks its result and lets our private index see the file the
reference rewrote, as between two real restores. Every result is checked (the file is back, the
capture equals the target tree).

Usage::

    python tools/bench_restore.py                  # synthetic 10k and 100k repositories
    python tools/bench_restore.py --files 20000    # one size
    python tools/bench_restore.py --runs 9

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_capture import build_repo, tracked_files

from ledger.git.capture.scan import capture_tree
from ledger.git.repo import GitRepo
from ledger.git.restore.run import restore_commit
from ledger.git.store.snapshot import take_snapshot
from ledger.settings import SnapshotSettings

TARGET_RATIO = 0.2  # ours ≤ 1/5 of the reference


def _git(
    repo: Path, *args: str, env: dict[str, str] | None = None, input: bytes | None = None
) -> bytes:
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        check=True,
        env={**os.environ, **(env or {})},
        input=input,
    ).stdout


def reference_restore(repo: Path, target: str) -> None:
    """The reference's restore (docs/design.md#the-references-methods), as it runs it (from the repository root)."""
    with tempfile.TemporaryDirectory(prefix="pi-rewind-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(repo, "-c", "core.autocrlf=false", "add", "-A", env=env)
        current = _git(repo, "write-tree", env=env).decode().strip()
    target_tree = _git(repo, "show", "-s", "--format=%T", target).decode().strip()
    if current == target_tree:
        return
    _git(repo, "commit-tree", current, "-m", "pi rewind snapshot")
    deleted = _git(repo, "diff", "--name-only", "--diff-filter=D", "-z", current, target_tree, "--")
    for rel in filter(None, deleted.split(b"\0")):
        path = repo / os.fsdecode(rel)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    _git(repo, "restore", f"--source={target}", "--worktree", "--", ".")


def measure(repo: Path, runs: int) -> tuple[float, float, float]:
    _git(repo, "config", "user.name", "Bench")
    _git(repo, "config", "user.email", "bench@example.com")
    gitrepo = GitRepo.discover(repo)
    settings = SnapshotSettings()
    t0 = time.perf_counter()
    point = take_snapshot(gitrepo, settings)
    print(
        f"  first capture (builds the private index): {(time.perf_counter() - t0) * 1000:8.0f} ms",
        flush=True,
    )
    pool = tracked_files(repo, runs * 2 + 2)
    originals = {p: p.read_bytes() for p in pool}
    ours, full, ref = [], [], []
    try:
        for i in range(runs):
            path = pool[i]
            rel = str(path.relative_to(repo))
            for verify, times in (("paths", ours), ("capture", full)):
                path.write_bytes(originals[path] + f"changed by bench ({verify})\n".encode())
                t0 = time.perf_counter()
                outcome = restore_commit(
                    gitrepo, point.commit, settings, last_exact=None, verify=verify
                )  # type: ignore[arg-type]
                times.append((time.perf_counter() - t0) * 1000)
                if outcome.plan.modified != (rel,) or path.read_bytes() != originals[path]:
                    print(f"  WARNING: ours did not restore exactly {rel}: {outcome.plan}")

            path.write_bytes(originals[path] + b"changed again\n")
            t0 = time.perf_counter()
            reference_restore(repo, point.commit)
            ref.append((time.perf_counter() - t0) * 1000)
            if path.read_bytes() != originals[path]:
                print(f"  WARNING: the reference did not restore {rel}")
            settle = capture_tree(gitrepo, settings)  # untimed: check, and re-stat the file
            if settle.tree != point.tree:
                print(f"  WARNING: tree after the reference {settle.tree} != {point.tree}")
            print(
                f"  run {i + 1}: ours {ours[-1]:8.1f} ms   ours (verify=capture) "
                f"{full[-1]:8.1f} ms   reference {ref[-1]:9.1f} ms",
                flush=True,
            )
    finally:
        for p, data in originals.items():
            p.write_bytes(data)
    return statistics.median(ours), statistics.median(full), statistics.median(ref)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--files",
        type=int,
        action="append",
        help="synthetic repository size (repeatable; default 10000 and 100000)",
    )
    parser.add_argument("--runs", type=int, default=7, help="timed rounds per size (median)")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic repositories")
    args = parser.parse_args(argv)
    sizes = args.files or [10_000, 100_000]
    version = _git(Path.cwd(), "version").decode().strip()
    print(f"{version}   cpus: {os.cpu_count()}   runs per size: {args.runs}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-restore-"))
    rows = []
    try:
        for size in sizes:
            print(f"\nbuilding a synthetic repository of {size} files …", flush=True)
            t0 = time.perf_counter()
            repo = build_repo(tmp, size)
            print(f"  built in {time.perf_counter() - t0:.1f} s", flush=True)
            rows.append((size, *measure(repo, args.runs)))
    finally:
        if args.keep:
            print(f"\nrepositories kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("\nrestore, 1 file differs (medians, whole operation)")
    print(
        f"  {'files':>8s} {'ours':>10s} {'reference':>11s} {'ours/ref':>9s}  target (100k)"
        f"   {'verify=capture':>14s} {'/ref':>6s}"
    )
    for size, ours, full, ref in rows:
        ratio = ours / ref if ref else float("inf")
        verdict = ("ok" if ratio <= TARGET_RATIO else "MISSED") if size >= 100_000 else "-"
        print(
            f"  {size:8d} {ours:7.1f} ms {ref:8.1f} ms {ratio:9.3f}  "
            f"≤{TARGET_RATIO:.2f} {verdict:6s}   {full:11.1f} ms {full / ref:6.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
