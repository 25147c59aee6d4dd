#!/usr/bin/env python3
"""Benchmark: the values of a tree diff, libgit2's whole-tree diff against our walk that skips
equal subtrees (issue 34, item 3).

Why it exists: :func:`ledger.git.treediff.diff_values` used libgit2's tree-to-tree diff, which
visits every entry of both trees (11–37 ms for one changed file at 100k files); it now walks
with :func:`ledger.git.trees.tree_changes` and asks libgit2 only for the changed blob pairs.
This times both on the same trees, interleaved (one of each per round), and prints medians,
ratios and the machine's load; and the per-entry tree reader against the bulk one for
``tree_changes`` itself (the restore plan's validated walk).

Usage::

    python tools/bench_treediff.py [--repo DIR] [--files 100000] [--rounds 15]

``--repo``: a repository built by ``tools/bench_feed.py``'s ``build_repo`` (reused), else one is
built in a temporary directory. Not a test: nothing here asserts a time.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import pygit2
from bench_feed import build_repo

from ledger.git.tree_names import Problem
from ledger.git.treediff import _libgit2_values, diff_values
from ledger.git.trees import TreeReader, tree_changes


def changed_tree(repo: pygit2.Repository, base: pygit2.Tree, count: int) -> str:
    """``base`` with the first file of ``count`` directories changed."""
    index = pygit2.Index()
    index.read_tree(base)
    seen: set[str] = set()
    for entry in index:
        folder = entry.path.rsplit("/", 1)[0]
        if folder in seen or not entry.path.endswith(".txt"):
            continue
        seen.add(folder)
        blob = repo.create_blob(f"changed {entry.path}\n".encode())
        index.add(pygit2.IndexEntry(entry.path, blob, entry.mode))
        if len(seen) == count:
            break
    return str(index.write_tree(repo))


def per_entry_walk(repo: pygit2.Repository, old: str, new: str) -> int:
    """The walk ``tree_changes`` was before levels were read in bulk (validated, as a plan)."""
    reader = TreeReader(repo)
    problems: list[Problem] = []
    stack: list[tuple[bytes, str | None, str | None]] = [(b"", old, new)]
    found = 0
    while stack:
        prefix, a_id, b_id = stack.pop()
        if a_id is not None and a_id == b_id:
            continue
        a = reader.entries(a_id, prefix, None) if a_id else {}
        b = reader.entries(b_id, prefix, problems) if b_id else {}
        for name in a.keys() | b.keys():
            x, y = a.get(name), b.get(name)
            if x == y:
                continue
            if (x is not None and x.mode == 0o40000) or (y is not None and y.mode == 0o40000):
                stack.append(
                    (
                        prefix + name + b"/",
                        x.oid if x is not None and x.mode == 0o40000 else None,
                        y.oid if y is not None and y.mode == 0o40000 else None,
                    )
                )
            else:
                found += 1
    return found


def cases_for(repo: pygit2.Repository, old: str, new: str) -> dict[str, Callable[[], object]]:
    return {
        "libgit2 whole-tree diff (before)": lambda: _libgit2_values(
            repo, repo[old], repo[new], find_renames=False
        ),
        "diff_values: walk + changed blobs": lambda: diff_values(repo, old, new),
        "per-entry validated walk (before)": lambda: per_entry_walk(repo, old, new),
        "tree_changes validated (bulk levels)": lambda: tree_changes(
            repo, old, new, validate=True, problems=[]
        ),
    }


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repo", default=None, help="parent directory of a bench_feed repo")
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    parent = Path(args.repo) if args.repo else Path(tempfile.mkdtemp(prefix="bench-treediff-"))
    try:
        path = parent / f"feed-{args.files}"
        if not (path / ".git" / "bench-complete").is_file():
            path = build_repo(parent, args.files, 10)
        # Only HEAD's tree is read: the work tree (perhaps another benchmark's) is left alone
        # (build_repo would check out HEAD over it when reusing).
        repo = pygit2.Repository(str(path))
        head = repo.revparse_single("HEAD").peel(pygit2.Tree)
        print(
            f"{args.files} files; {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        for count in (1, 1000):
            new = changed_tree(repo, head, count)
            old = str(head.id)
            assert len(diff_values(repo, old, new).files) == count
            cases = cases_for(repo, old, new)
            times: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(args.rounds):
                for name, fn in cases.items():
                    times[name].append(timed(fn))
            med = {name: statistics.median(values) for name, values in times.items()}
            print(f"{count} changed file(s), median of {args.rounds} interleaved rounds:")
            names = list(cases)
            for before, after in ((names[0], names[1]), (names[2], names[3])):
                print(f"  {before:40s} {med[before]:9.2f} ms")
                print(
                    f"  {after:40s} {med[after]:9.2f} ms   ({med[after] / med[before]:.3f} of "
                    "before)"
                )
        print(f"load at the end {os.getloadavg()[0]:.1f}")
    finally:
        if not args.repo:
            shutil.rmtree(parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
