#!/usr/bin/env python3
"""Benchmark: snapshot capture with the private index vs the reference's fresh-index pipeline.

Why it exists: issue 3's point is speed (defect D9). This measures, in one run and on the same
states, ``take_snapshot`` (capture + dedup/commit + store append, in-process, as the engine calls
it) against the reference pipeline (fresh ``GIT_INDEX_FILE``, ``git -c core.autocrlf=false add
-A``, ``write-tree``, ``commit-tree``), and prints medians and the ratio.

Scenarios: nothing changed, 1 file modified, 100 files modified, 1 new untracked file. Before each
timed run the scenario's change is applied once (a different file each time). Each pipeline runs
its own series, so that the reference's cache churn does not slow ours or the reverse; the last
capture of each series is checked against a fresh-index tree (untimed). Targets (100k files): nothing changed ≤ 1/10 of the reference, 1 modified ≤ 1/8.

Usage::

    python tools/bench_capture.py                    # synthetic 10k and 100k repositories
    python tools/bench_capture.py --files 20000      # one synthetic size
    python tools/bench_capture.py /path/to/repo      # an existing repository too (files are
                                                     # modified and restored: use a scratch copy)

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
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger.git.repo import GitRepo
from ledger.git.store.snapshot import take_snapshot
from ledger.settings import SnapshotSettings

FILES_PER_DIR = 100
TARGETS = {"nothing changed": 10.0, "1 file modified": 8.0}


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=True,
    )
    return result.stdout


def build_repo(parent: Path, files: int) -> Path:
    """``files`` small committed files, 100 per directory, two levels deep."""
    repo = parent / f"synthetic-{files}"
    repo.mkdir()
    _git(repo, "init", "-q")
    for i in range(files):
        d = repo / f"d{i // 10000:02d}" / f"s{(i // FILES_PER_DIR) % 100:02d}"
        if i % FILES_PER_DIR == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i % FILES_PER_DIR:03d}.txt").write_text(f"file {i}\n" * 3)
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    _git(repo, "add", "-A")
    _git(
        repo,
        "-c",
        "user.name=Bench",
        "-c",
        "user.email=bench@example.com",
        "commit",
        "-qm",
        "synthetic",
    )
    return repo


def reference_capture(repo: Path) -> str:
    """The reference's pipeline (docs/design.md#the-references-methods): fresh index, add -A,
    write-tree, commit-tree. Its tree."""
    return reference_snapshot(repo)[0]


def reference_snapshot(repo: Path) -> tuple[str, str]:
    """:func:`reference_capture`'s pipeline: ``(tree, commit)``; the commit is on no ref."""
    with tempfile.TemporaryDirectory(prefix="pi-rewind-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(repo, "-c", "core.autocrlf=false", "add", "-A", env=env)
        tree = _git(repo, "write-tree", env=env).strip()
    commit = _git(
        repo,
        "-c",
        "user.name=Bench",
        "-c",
        "user.email=bench@example.com",
        "commit-tree",
        tree,
        "-m",
        "pi rewind snapshot",
    ).strip()
    return tree, commit


def settle() -> None:
    """Let the previous series' writes (the reference rewrites 100k objects' timestamps) reach
    the disk before timing the next one, so that neither pipeline pays for the other."""
    os.sync()
    time.sleep(1.0)


def reference_tree(repo: Path) -> str:
    """The fresh-index tree alone (not timed), to check each capture."""
    with tempfile.TemporaryDirectory(prefix="pi-rewind-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(repo, "-c", "core.autocrlf=false", "add", "-A", env=env)
        return _git(repo, "write-tree", env=env).strip()


def tracked_files(repo: Path, limit: int) -> list[Path]:
    names = _git(repo, "ls-files", "-z").split("\0")
    out = []
    for name in names:
        if name and (repo / name).is_file() and not (repo / name).is_symlink():
            out.append(repo / name)
            if len(out) >= limit:
                break
    return out


class Scenario:
    def __init__(self, name: str, mutate: Callable[[int], None]) -> None:
        self.name = name
        self.mutate = mutate


def scenarios(repo: Path) -> tuple[list[Scenario], dict[Path, bytes]]:
    pool = tracked_files(repo, 400)
    if len(pool) < 101:
        raise SystemExit(f"{repo}: need at least 101 tracked regular files")
    originals = {p: p.read_bytes() for p in pool}

    def modify(count: int) -> Callable[[int], None]:
        def run(step: int) -> None:
            for k in range(count):
                path = pool[(step * count + k) % len(pool)]
                path.write_bytes(originals[path] + f"bench {step} {k}\n".encode())

        return run

    def new_file(step: int) -> None:
        (repo / f"bench-untracked-{step}.txt").write_text(f"new {step}\n")

    return [
        Scenario("nothing changed", lambda step: None),
        Scenario("1 file modified", modify(1)),
        Scenario("100 files modified", modify(100)),
        Scenario("1 new untracked file", new_file),
    ], originals


def measure(repo: Path, runs: int) -> list[tuple[str, float, float]]:
    gitrepo = GitRepo.discover(repo)
    settings = SnapshotSettings()
    start = time.perf_counter()
    take_snapshot(gitrepo, settings)
    first_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    reference_capture(repo)
    ref_first = (time.perf_counter() - start) * 1000
    print(
        f"  first capture (builds the private index): {first_ms:8.0f} ms   "
        f"(reference: {ref_first:.0f} ms)",
        flush=True,
    )
    items, originals = scenarios(repo)
    rows = []
    step = 0
    mismatches = 0
    try:
        for scenario in items:
            # Each pipeline runs its own series (same kind of change before every run), so
            # that one's cache churn (the reference re-hashes and re-writes every object)
            # does not slow the other.
            ours, ref = [], []
            settle()
            for _ in range(runs):
                step += 1
                scenario.mutate(step)
                t0 = time.perf_counter()
                report = take_snapshot(gitrepo, settings)
                ours.append((time.perf_counter() - t0) * 1000)
            mismatches += report.tree != reference_tree(repo)  # the last state of the series
            settle()
            for _ in range(runs):
                step += 1
                scenario.mutate(step)
                t0 = time.perf_counter()
                reference_capture(repo)
                ref.append((time.perf_counter() - t0) * 1000)
            rows.append((scenario.name, statistics.median(ours), statistics.median(ref)))
            print(
                f"  {scenario.name:22s} ours {rows[-1][1]:8.1f} ms   reference "
                f"{rows[-1][2]:8.1f} ms   ratio {rows[-1][2] / rows[-1][1]:5.1f}x",
                flush=True,
            )
    finally:
        for path, data in originals.items():
            path.write_bytes(data)
        for extra in repo.glob("bench-untracked-*.txt"):
            extra.unlink()
    if mismatches:
        print(
            f"  WARNING: {mismatches} captures differed from the fresh-index tree "
            "(expected only when protected paths were skipped)",
            flush=True,
        )
    return rows


def report(label: str, rows: list[tuple[str, float, float]], show_targets: bool) -> None:
    print(f"\n{label}")
    print(f"  {'scenario':22s} {'ours (median)':>14s} {'reference':>12s} {'ratio':>8s}  target")
    for name, ours, ref in rows:
        ratio = ref / ours if ours else float("inf")
        target = TARGETS.get(name) if show_targets else None
        verdict = (
            "" if target is None else (f"≥{target:.0f}x " + ("ok" if ratio >= target else "MISSED"))
        )
        print(f"  {name:22s} {ours:11.1f} ms {ref:9.1f} ms {ratio:7.1f}x  {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repos", nargs="*", type=Path, help="existing repositories to measure")
    parser.add_argument(
        "--files",
        type=int,
        action="append",
        help="synthetic repository size (repeatable; default 10000 and 100000)",
    )
    parser.add_argument("--runs", type=int, default=7, help="timed runs per scenario")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic repositories")
    args = parser.parse_args(argv)
    sizes = args.files if args.files else ([] if args.repos else [10_000, 100_000])
    print(
        f"git: {_git(Path.cwd(), 'version').strip()}   cpus: {os.cpu_count()}   "
        f"runs per scenario: {args.runs}",
        flush=True,
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    results = []
    try:
        for size in sizes:
            print(f"\nbuilding a synthetic repository of {size} files …", flush=True)
            t0 = time.perf_counter()
            repo = build_repo(tmp, size)
            print(f"  built in {time.perf_counter() - t0:.1f} s", flush=True)
            results.append((f"synthetic, {size} files", measure(repo, args.runs), size >= 100_000))
        for repo in args.repos:
            print(f"\nrepository {repo}", flush=True)
            count = len(_git(repo, "ls-files", "-z").split("\0")) - 1
            results.append(
                (
                    f"{repo} ({count} tracked files)",
                    measure(repo.resolve(), args.runs),
                    count >= 100_000,
                )
            )
    finally:
        if args.keep:
            print(f"\nrepositories kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    for label, rows, show_targets in results:
        report(label, rows, show_targets)
    print("\ntargets (issue 3) apply to the 100k-file repository")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
