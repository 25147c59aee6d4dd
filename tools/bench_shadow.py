#!/usr/bin/env python3
"""Benchmark: capture in a shadow repository vs in a git repository, each against its reference.

Why it exists: issue 14 requires the shadow-repository capture (docs/shadow.md) to be at least as
fast, relative to the same fresh-index reference, as the in-repository capture. This builds, per
size, the same synthetic tree twice — once as a committed git repository, once as a plain
directory (no ``.git``) — and in the same run measures:

- in the repository: ``tools/bench_capture.py``'s own ``measure`` (``take_snapshot`` against
  ``GIT_INDEX_FILE=<fresh> git add -A && git write-tree && git commit-tree``);
- in the plain directory: ``take_snapshot`` on its shadow repository against the same pipeline
  run with a throw-away git directory holding the shadow's exclude file
  (``git --git-dir=<ref> --work-tree=<dir>``), i.e. what a fresh index of that directory holds.

Scenarios are bench_capture's (nothing changed, 1 modified, 100 modified, 1 new file); medians,
ratios (reference / ours), and per scenario whether the shadow's ratio is at least the
repository's (``ok``) — within the noise of a shared machine (``--tolerance``, default 10 %).

Usage::

    python tools/bench_shadow.py                 # 10k and 100k files
    python tools/bench_shadow.py --files 10000 --runs 5

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_capture import FILES_PER_DIR, Scenario, _git, build_repo, report, settle
from bench_capture import measure as measure_in_repo

from ledger.git.shadow.layout import ShadowRepo
from ledger.git.shadow.open import open_work_tree
from ledger.git.store.snapshot import take_snapshot
from ledger.settings import SnapshotSettings

Rows = list[tuple[str, float, float]]


def build_plain(parent: Path, files: int) -> Path:
    """bench_capture's synthetic tree (same paths, contents and .gitignore) as a plain
    directory, written without git (removing a built repository's ``.git`` races with the
    ``gc --auto`` its commit starts in the background)."""
    directory = parent / f"synthetic-{files}"
    directory.mkdir(parents=True)
    for i in range(files):
        d = directory / f"d{i // 10000:02d}" / f"s{(i // FILES_PER_DIR) % 100:02d}"
        if i % FILES_PER_DIR == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i % FILES_PER_DIR:03d}.txt").write_text(f"file {i}\n" * 3)
    (directory / ".gitignore").write_text("*.log\nbuild/\n")
    return directory


class ShadowReference:
    """The reference pipeline for a plain directory: a fresh index in a throw-away git dir that
    holds the shadow's exclude file, ``add -A``, ``write-tree``, ``commit-tree``."""

    def __init__(self, directory: Path, shadow: ShadowRepo, scratch: Path) -> None:
        self.directory = directory
        self.git_dir = scratch / "reference.git"
        _git(scratch, "init", "-q", "--bare", str(self.git_dir))
        exclude = (shadow.git_dir / "info" / "exclude").read_bytes()
        (self.git_dir / "info").mkdir(exist_ok=True)
        (self.git_dir / "info" / "exclude").write_bytes(exclude)
        self.base = [f"--git-dir={self.git_dir}", f"--work-tree={directory}"]

    def tree(self) -> str:
        with tempfile.TemporaryDirectory(prefix="pi-rewind-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            _git(self.directory, *self.base, "-c", "core.autocrlf=false", "add", "-A", env=env)
            return _git(self.directory, *self.base, "write-tree", env=env).strip()

    def capture(self) -> str:
        """The timed pipeline; returns the commit."""
        tree = self.tree()
        return _git(
            self.directory,
            *self.base,
            "-c",
            "user.name=Bench",
            "-c",
            "user.email=bench@example.com",
            "commit-tree",
            tree,
            "-m",
            "pi rewind snapshot",
        ).strip()


def plain_scenarios(directory: Path) -> tuple[list[Scenario], dict[Path, bytes]]:
    """bench_capture's scenarios on the first 400 regular files of the directory."""
    pool: list[Path] = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".txt"):
                pool.append(Path(root) / name)
        if len(pool) >= 400:
            break
    pool = pool[:400]
    originals = {p: p.read_bytes() for p in pool}

    def modify(count: int) -> Callable[[int], None]:
        def run(step: int) -> None:
            for k in range(count):
                path = pool[(step * count + k) % len(pool)]
                path.write_bytes(originals[path] + f"bench {step} {k}\n".encode())

        return run

    def new_file(step: int) -> None:
        (directory / f"bench-untracked-{step}.txt").write_text(f"new {step}\n")

    return [
        Scenario("nothing changed", lambda step: None),
        Scenario("1 file modified", modify(1)),
        Scenario("100 files modified", modify(100)),
        Scenario("1 new untracked file", new_file),
    ], originals


def measure_shadow(directory: Path, agent_dir: Path, scratch: Path, runs: int) -> Rows:
    repo = open_work_tree(directory, agent_dir, create=True).repo
    assert isinstance(repo, ShadowRepo)
    settings = SnapshotSettings()
    t0 = time.perf_counter()
    take_snapshot(repo, settings)
    first_ms = (time.perf_counter() - t0) * 1000
    reference = ShadowReference(directory, repo, scratch)
    t0 = time.perf_counter()
    first = reference.capture()
    ref_first = (time.perf_counter() - t0) * 1000
    # The synthetic repository's objects are committed and packed (its commit ran gc --auto);
    # make the reference's reachable and packed too, or every later add -A pays one utime per
    # loose object it freshens.
    _git(directory, f"--git-dir={reference.git_dir}", "update-ref", "refs/heads/main", first)
    _git(directory, f"--git-dir={reference.git_dir}", "repack", "-adq")
    print(
        f"  first capture (builds the private index): {first_ms:8.0f} ms   "
        f"(reference: {ref_first:.0f} ms)",
        flush=True,
    )
    items, originals = plain_scenarios(directory)
    rows: Rows = []
    step = mismatches = 0
    try:
        for scenario in items:
            ours, ref = [], []
            settle()
            for _ in range(runs):
                step += 1
                scenario.mutate(step)
                t0 = time.perf_counter()
                snap = take_snapshot(repo, settings)
                ours.append((time.perf_counter() - t0) * 1000)
            mismatches += snap.tree != reference.tree()
            settle()
            for _ in range(runs):
                step += 1
                scenario.mutate(step)
                t0 = time.perf_counter()
                reference.capture()
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
        for extra in directory.glob("bench-untracked-*.txt"):
            extra.unlink()
    if mismatches:
        print(f"  WARNING: {mismatches} shadow captures differed from the fresh index", flush=True)
    return rows


def compare(label: str, in_repo: Rows, shadow: Rows, tolerance: float) -> bool:
    print(f"\n{label}: reference/ours ratio, shadow vs in-repository")
    print(f"  {'scenario':22s} {'in-repo':>9s} {'shadow':>9s}  verdict")
    good = True
    for (name, ours_r, ref_r), (_, ours_s, ref_s) in zip(in_repo, shadow, strict=True):
        ratio_r, ratio_s = ref_r / ours_r, ref_s / ours_s
        ok = ratio_s >= ratio_r * (1 - tolerance)
        good &= ok
        print(f"  {name:22s} {ratio_r:8.1f}x {ratio_s:8.1f}x  {'ok' if ok else 'WORSE'}")
    return good


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--files", type=int, action="append", help="sizes (default 10k, 100k)")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per scenario")
    parser.add_argument("--tolerance", type=float, default=0.10, help="noise margin (0.10 = 10 %%)")
    args = parser.parse_args(argv)
    sizes = args.files or [10_000, 100_000]
    print(
        f"git: {_git(Path.cwd(), 'version').strip()}   cpus: {os.cpu_count()}   "
        f"runs per scenario: {args.runs}",
        flush=True,
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench-shadow-"))
    verdicts = []
    try:
        for size in sizes:
            print(f"\n{size} files: building a repository and a plain directory …", flush=True)
            (tmp / "repo").mkdir()
            repo = build_repo(tmp / "repo", size)
            plain = build_plain(tmp / "plain", size)
            print(f"in the repository ({size} files)", flush=True)
            in_repo = measure_in_repo(repo, args.runs)
            print(f"in the shadow repository ({size} files)", flush=True)
            scratch = tmp / f"scratch-{size}"
            scratch.mkdir()
            shadow = measure_shadow(plain, tmp / "agent", scratch, args.runs)
            report(f"in-repository, {size} files", in_repo, False)
            report(f"shadow, {size} files", shadow, False)
            verdicts.append(compare(f"{size} files", in_repo, shadow, args.tolerance))
            shutil.rmtree(tmp / "repo")
            shutil.rmtree(tmp / "plain")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nshadow ratio at least the in-repository ratio: " + ("yes" if all(verdicts) else "NO"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
