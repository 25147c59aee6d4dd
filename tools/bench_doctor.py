#!/usr/bin/env python3
"""Benchmark: ``rewind doctor``'s disk figures and the sweep's count of what it frees, old
method vs new, same run, on one store of thousands of snapshots.

Setup: a repository with a ``--files``-file tree (100 files per directory) on ``master`` and a
store of ``--snapshots`` snapshot commits, each changing 5 files (about 13 new objects per
snapshot, like a prompt of docs/soak.md), every object loose (``--pack``: packed afterwards, as
the disk upkeep or a user's gc leaves them). Its object directories are aged 30 s (a store at
rest between captures).

Timed (median of ``--runs``):

- doctor figures, old: ``rev-list --disk-usage`` of the store, of what only the store reaches,
  and ``rev-list --objects`` + one ``stat`` per object for the loose count (three walks);
- doctor figures, new: :func:`ledger.git.store.usage.measure` cold (no cache, no budget: the exact
  walk), on a cache hit (the state unchanged), and on a stale cache (the store moved on; walk
  killed at the doctor's budget);
- the whole :func:`ledger.doctor.diagnose` (no sessions) with a cache hit, and cold;
- the sweep's count, old: ``rev-list --objects --count`` and ``--disk-usage`` (two walks); new:
  :func:`ledger.git.store.rewrite.reclaimable` (one walk), dropping every other snapshot.

``--old-tree DIR``: also run ``python -m ledger doctor --json`` from an old checkout (e.g.
``git archive efeee1b | tar -x -C DIR``) against the new one, as real processes.
Not a test: nothing here asserts a time.

Usage: python tools/bench_doctor.py [--snapshots 5000] [--files 20000] [--runs 3] [--pack]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pygit2

from ledger.doctor import USAGE_BUDGET_S, diagnose
from ledger.git.repo import GitRepo
from ledger.git.runner import EMPTY_TREE
from ledger.git.store.chain import STORE_REF, Store
from ledger.git.store.rewrite import reclaimable, rewrite_store
from ledger.git.store.usage import cache_path, measure, usage_key, write_cache

PER_DIR, CHANGES = 100, 5


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    return (
        subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )


def build(repo: Path, files: int, snapshots: int) -> None:
    git(repo.parent, "init", "-q", str(repo))
    r = pygit2.Repository(str(repo))
    sig = pygit2.Signature("Bench", "bench@example.com", 1_790_000_000, 0)
    dirs: dict[int, pygit2.Oid] = {}
    root = r.TreeBuilder()
    for d in range(max(1, files // PER_DIR)):
        tb = r.TreeBuilder()
        for f in range(PER_DIR):
            blob = r.create_blob(f"file {d} {f}\n".encode() * 20)
            tb.insert(f"f{f:03d}.txt", blob, pygit2.GIT_FILEMODE_BLOB)
        dirs[d] = tb.write()
        root.insert(f"d{d:03d}", dirs[d], pygit2.GIT_FILEMODE_TREE)
    tree = root.write()
    r.create_commit("refs/heads/master", sig, sig, "base\n", tree, [])
    rng = random.Random(1)
    shas = []
    for i in range(snapshots):
        rb = r.TreeBuilder(r[tree])
        for _ in range(CHANGES):
            d, f = rng.randrange(len(dirs)), rng.randrange(PER_DIR)
            tb = r.TreeBuilder(r[dirs[d]])
            blob = r.create_blob(f"change {i} {d} {f}\n".encode() * 20)
            tb.insert(f"f{f:03d}.txt", blob, pygit2.GIT_FILEMODE_BLOB)
            dirs[d] = tb.write()
            rb.insert(f"d{d:03d}", dirs[d], pygit2.GIT_FILEMODE_TREE)
        tree = rb.write()
        shas.append(str(r.create_commit(None, sig, sig, "pi rewind snapshot\n", tree, [])))
    rewrite_store(GitRepo.discover(repo), shas, since=None, now_ms=1_790_000_000_000)


def settle(repo: Path) -> None:
    for directory, _dirs, _files in os.walk(repo / ".git" / "objects"):
        st = os.stat(directory)
        os.utime(directory, (st.st_atime - 30, st.st_mtime - 30))


# --- the old methods (efeee1b), copied --------------------------------------------------------


def old_doctor_figures(repo: Path) -> tuple[int, int, int]:
    sizes = []
    for extra in ([], ["--not", f"--exclude={STORE_REF}", "--all"]):
        sizes.append(int(git(repo, "rev-list", "--disk-usage", "--objects", STORE_REF, *extra)))
    objects = repo / ".git" / "objects"
    out = subprocess.run(
        ["git", "rev-list", "--objects", STORE_REF, "--not", f"--exclude={STORE_REF}", "--all"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    loose = 0
    for raw in out.splitlines():
        oid = raw.decode().partition(" ")[0]
        loose += (objects / oid[:2] / oid[2:]).is_file()
    return sizes[0], sizes[1], loose


def old_sweep_count(repo: Path, head: str, kept: list[str]) -> tuple[int, int]:
    lines = ("\n".join([head, *(f"^{s}" for s in kept), f"^{EMPTY_TREE}"]) + "\n").encode()
    found = []
    for mode in ("--count", "--disk-usage"):
        args = ["rev-list", "--objects", mode, "--stdin", "--not", f"--exclude={STORE_REF}"]
        found.append(int(git(repo, *args, "--all", input=lines)))
    return found[0], found[1]


# --- timing -----------------------------------------------------------------------------------


def timed(
    runs: int, fn: Callable[[], object], before: Callable[[], object] = lambda: None
) -> float:
    samples = []
    for _ in range(runs):
        before()
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--snapshots", type=int, default=5000)
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pack", action="store_true", help="pack every object before timing")
    parser.add_argument("--old-tree", type=Path, help="an old checkout to run 'rewind doctor' from")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-doctor-"))
    try:
        repo, agent = tmp / "repo", tmp / "agent"
        agent.mkdir()
        t0 = time.perf_counter()
        build(repo, args.files, args.snapshots)
        if args.pack:
            git(repo, "repack", "-a", "-d", "-q")
            git(repo, "prune-packed")
        settle(repo)
        count = git(repo, "count-objects", "-v").replace("\n", ", ")
        print(
            f"built {args.snapshots} snapshots of {args.files} files in {time.perf_counter() - t0:.1f} s ({count})"
        )
        g = GitRepo.discover(repo)
        drop_cache = lambda: cache_path(g).unlink(missing_ok=True)  # noqa: E731

        old = old_doctor_figures(repo)
        new = measure(g, budget_s=None)
        assert new is not None and (new.bytes, new.exclusive_bytes, new.loose_ours) == old, (
            old,
            new,
        )
        rows: list[tuple[str, float, float | None]] = []
        t_old = timed(args.runs, lambda: old_doctor_figures(repo))
        t_exact = timed(args.runs, lambda: measure(g, budget_s=None), drop_cache)
        rows.append(("doctor figures: exact walk (no cache)", t_exact, t_old))
        measure(g, budget_s=None)
        t_hit = timed(args.runs, lambda: measure(g))
        rows.append(("doctor figures: cache hit", t_hit, t_old))
        usage = measure(g)
        assert usage is not None and usage.cached
        key = usage_key(g)

        def stale() -> None:  # an earlier state's figures: the doctor's budget applies
            write_cache(g, type(key)("0" * 64, key.head, key.newest_s, key.read_s), usage)

        t_stale = timed(args.runs, lambda: measure(g), stale)
        rows.append((f"doctor figures: stale cache (budget {USAGE_BUDGET_S:g} s)", t_stale, t_old))
        measure(g, budget_s=None)
        t_diag_hit = timed(args.runs, lambda: diagnose(g, agent))
        t_rest = t_diag_hit - t_hit
        rows.append(("diagnose(), cache hit", t_diag_hit, t_rest + t_old))
        t_diag_cold = timed(args.runs, lambda: diagnose(g, agent), drop_cache)
        rows.append(("diagnose(), no cache (budget)", t_diag_cold, t_rest + t_old))

        head = Store(g).head()
        assert head is not None
        kept = Store(g).snapshots()[::2]
        old_counts = old_sweep_count(repo, head, kept)
        found = reclaimable(g, head, kept)
        assert (found.objects, found.bytes) == old_counts, (found, old_counts)
        t_sweep_old = timed(args.runs, lambda: old_sweep_count(repo, head, kept))
        t_sweep_new = timed(args.runs, lambda: reclaimable(g, head, kept))
        rows.append(("sweep count + bytes (half dropped)", t_sweep_new, t_sweep_old))

        if args.old_tree is not None:
            env_old = {**os.environ, "PYTHONPATH": str(args.old_tree)}
            env_new = {**os.environ, "PYTHONPATH": str(ROOT)}

            def cli(env: dict[str, str]) -> None:
                subprocess.run(
                    [sys.executable, "-m", "ledger", "--agent-dir", str(agent), "doctor", "--json"],
                    cwd=repo,
                    env=env,
                    capture_output=True,
                    check=False,
                )

            measure(g, budget_s=None)
            t_cli_old = timed(args.runs, lambda: cli(env_old))
            rows.append(
                (
                    "rewind doctor (process), cache hit",
                    timed(args.runs, lambda: cli(env_new)),
                    t_cli_old,
                )
            )
            rows.append(
                (
                    "rewind doctor (process), no cache",
                    timed(args.runs, lambda: cli(env_new), drop_cache),
                    t_cli_old,
                )
            )

        print(
            f"figures: store {old[0]} B, exclusive {old[1]} B, loose ours {old[2]}; sweep frees {old_counts[0]} objects, {old_counts[1]} B"
        )
        print(f"{'median of ' + str(args.runs):<44} {'new ms':>8} {'old ms':>8} {'new/old':>8}")
        for name, new_ms, old_ms in rows:
            ratio = f"{new_ms / old_ms:8.3f}" if old_ms else ""
            print(f"{name:<44} {new_ms:8.0f} {old_ms or 0:8.0f} {ratio}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    sys.exit(main())
