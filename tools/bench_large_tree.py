#!/usr/bin/env python3
"""Benchmark: the first capture and a first restore of a large tree whose ``node_modules`` is not
ignored, ours vs the reference's methods, in the same run.

Why it exists: issue 26. Other agents' checkpoints took >20 s at 252k files, half of them in
``node_modules``, and filled disks. Here: a repository of ``--files`` files (default 250,000),
``--node-modules`` of them (default 150,000) in an untracked ``node_modules`` that no
``.gitignore`` names (protected directories on, as by default), the rest tracked and committed.

Measured, medians of ``--runs`` rounds:

- **first capture**: ours is ``take_snapshot`` (capture + commit + store, in-process, as the
  engine calls it) with the private index removed before each run (``<git-dir>/pi-rewind/``),
  so every run builds it from nothing and runs the first-capture check
  (docs/design.md#first-capture-limits). The reference is ``reference_capture`` of
  tools/bench_capture.py (fresh ``GIT_INDEX_FILE``, ``git -c core.autocrlf=false add -A``,
  ``write-tree``, ``commit-tree``): it hashes ``node_modules`` too.
- **first restore**: 10 tracked files modified, then restored to the snapshot. Ours is
  ``restore_commit`` right after the private index was removed (its own capture is a first
  capture: the cold case), and again with the index kept (warm). The reference is
  ``reference_restore`` of tools/bench_restore.py (fresh-index capture, ``commit-tree``,
  delete list, ``git restore --source=<c> --worktree -- .``) to its own snapshot (which holds
  ``node_modules``; restoring ours would delete it).

The first run of a series also writes the objects; later runs find them. Series alternate
(ours, reference, ours, …) so neither pays for the other's cache churn alone.

Usage::

    python tools/bench_large_tree.py              # 250k files, 150k in node_modules
    python tools/bench_large_tree.py --quick      # 25k / 15k
    python tools/bench_large_tree.py --profile    # also: where a first capture spends its time

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_capture import _git, reference_capture, reference_tree, settle, tracked_files
from bench_restore import reference_restore

from ledger.git.private import private_dir
from ledger.git.repo import GitRepo
from ledger.git.restore.run import restore_commit
from ledger.git.runner import GitRunner
from ledger.git.store.snapshot import take_snapshot
from ledger.settings import SnapshotSettings

FILES_PER_DIR = 100
FILES_PER_PACKAGE = 15
CHANGED = 10


def build(parent: Path, files: int, node_modules: int) -> Path:
    """``files - node_modules`` committed files (100 per directory, two levels) and an untracked,
    unignored ``node_modules`` of ``node_modules`` files (15 per package, scoped packages too)."""
    repo = parent / f"large-{files}"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.name", "Bench")
    _git(repo, "config", "user.email", "bench@example.com")
    for i in range(files - node_modules):
        d = repo / "src" / f"d{i // 10000:02d}" / f"s{(i // FILES_PER_DIR) % 100:02d}"
        if i % FILES_PER_DIR == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i % FILES_PER_DIR:03d}.ts").write_text(f"export const v{i} = {i};\n" * 4)
    (repo / ".gitignore").write_text("*.log\ndist/\n")  # node_modules is NOT ignored
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "large tree")
    for i in range(node_modules):
        package = i // FILES_PER_PACKAGE
        scope = f"@scope{package % 7}/" if package % 3 == 0 else ""
        d = repo / "node_modules" / f"{scope}pkg{package}" / ("lib" if i % 2 else "")
        if i % FILES_PER_PACKAGE in (0, 1):
            d.mkdir(parents=True, exist_ok=True)
        (d / f"m{i % FILES_PER_PACKAGE:02d}.js").write_text(f"module.exports = {i};\n" * 8)
    return repo


def forget_private_index(repo: GitRepo) -> None:
    shutil.rmtree(private_dir(repo.git_dir), ignore_errors=True)


def ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


def first_captures(repo: Path, runs: int) -> tuple[list[float], list[float], str]:
    gitrepo = GitRepo.discover(repo)
    settings = SnapshotSettings()
    ours: list[float] = []
    ref: list[float] = []
    commit = ""
    for i in range(runs):
        forget_private_index(gitrepo)
        settle()
        t0 = time.perf_counter()
        report = take_snapshot(gitrepo, settings)
        ours.append(ms_since(t0))
        commit = report.commit
        settle()
        t0 = time.perf_counter()
        reference_capture(repo)
        ref.append(ms_since(t0))
        print(
            f"  first capture run {i + 1}: ours {ours[-1]:9.0f} ms   reference {ref[-1]:9.0f} ms"
            f"   (ours skipped: {', '.join(s.path for s in report.skipped)})",
            flush=True,
        )
    expected = reference_tree_without(repo, "node_modules")
    if report.tree != expected:
        print(f"  WARNING: our tree {report.tree} != fresh index without node_modules {expected}")
    return ours, ref, commit


def reference_tree_without(repo: Path, directory: str) -> str:
    with tempfile.TemporaryDirectory(prefix="pi-rewind-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(
            repo,
            "-c",
            "core.autocrlf=false",
            "add",
            "-A",
            "--",
            ".",
            f":(exclude,literal){directory}",
            env=env,
        )
        return _git(repo, "write-tree", env=env).strip()


def first_restores(
    repo: Path, runs: int, point: str
) -> tuple[list[float], list[float], list[float]]:
    gitrepo = GitRepo.discover(repo)
    settings = SnapshotSettings()
    ref_tree = reference_tree(repo)
    ref_point = _git(repo, "commit-tree", ref_tree, "-m", "reference point").strip()
    pool = tracked_files(repo, CHANGED * runs * 3)
    originals = {p: p.read_bytes() for p in pool}
    cold: list[float] = []
    warm: list[float] = []
    ref: list[float] = []
    try:
        for i in range(runs):
            for k, (kind, times) in enumerate((("cold", cold), ("warm", warm), ("reference", ref))):
                start = (i * 3 + k) * CHANGED
                batch = pool[start : start + CHANGED]
                for p in batch:
                    p.write_bytes(originals[p] + f"changed ({kind})\n".encode())
                if kind == "cold":
                    forget_private_index(gitrepo)
                settle()
                t0 = time.perf_counter()
                if kind == "reference":
                    reference_restore(repo, ref_point)
                else:
                    restore_commit(gitrepo, point, settings, last_exact=None)
                times.append(ms_since(t0))
                if any(p.read_bytes() != originals[p] for p in batch):
                    print(f"  WARNING: {kind} did not restore the {CHANGED} files")
            print(
                f"  first restore run {i + 1}: ours (cold index) {cold[-1]:9.0f} ms   ours (warm) "
                f"{warm[-1]:8.0f} ms   reference {ref[-1]:9.0f} ms",
                flush=True,
            )
    finally:
        for p, data in originals.items():
            p.write_bytes(data)
    return cold, warm, ref


@contextmanager
def git_time_by_operation() -> Iterator[dict[str, list[float]]]:
    """Wall time of every git command run through :class:`GitRunner`, by operation name."""
    seen: dict[str, list[float]] = defaultdict(list)
    original = GitRunner.run

    def timed(self: GitRunner, args: Any, *rest: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(self, args, *rest, **kwargs)
        finally:
            seen[str(kwargs.get("operation", args[0] if args else "?"))].append(ms_since(t0))

    GitRunner.run = timed  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        GitRunner.run = original  # type: ignore[method-assign]


def profile_first_capture(repo: Path) -> None:
    gitrepo = GitRepo.discover(repo)
    forget_private_index(gitrepo)
    settle()
    profiler = cProfile.Profile()
    with git_time_by_operation() as seen:
        t0 = time.perf_counter()
        profiler.enable()
        take_snapshot(gitrepo, SnapshotSettings())
        profiler.disable()
        total = ms_since(t0)
    print(f"\nprofile of one first capture ({total:.0f} ms in all):")
    git_total = 0.0
    for operation, times in sorted(seen.items(), key=lambda kv: -sum(kv[1])):
        git_total += sum(times)
        print(f"  git {operation:<40} {sum(times):9.0f} ms  ({len(times)} run(s))")
    print(f"  python outside git{'':<29} {total - git_total:9.0f} ms")
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(12)
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:4000])


def show(label: str, ours: list[float], ref: list[float]) -> None:
    o, r = statistics.median(ours), statistics.median(ref)
    print(f"  {label:<34} ours {o:9.0f} ms   reference {r:9.0f} ms   ratio {o / r:5.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=250_000)
    parser.add_argument("--node-modules", type=int, default=150_000)
    parser.add_argument("--quick", action="store_true", help="25k files, 15k in node_modules")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    files, modules = (25_000, 15_000) if args.quick else (args.files, args.node_modules)
    with tempfile.TemporaryDirectory(prefix="bench-large-") as tmp:
        t0 = time.perf_counter()
        repo = build(Path(tmp), files, modules)
        print(
            f"{files:,} files, {modules:,} in an unignored node_modules "
            f"(built in {ms_since(t0) / 1000:.0f} s); {args.runs} runs",
            flush=True,
        )
        ours_capture, ref_capture, point = first_captures(repo, args.runs)
        cold, warm, ref_restore = first_restores(repo, args.runs, point)
        if args.profile:
            profile_first_capture(repo)
        print(f"\nmedians ({files:,} files, {modules:,} in node_modules):")
        show("first capture", ours_capture, ref_capture)
        show("first restore (cold private index)", cold, ref_restore)
        show("restore (warm private index)", warm, ref_restore)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
