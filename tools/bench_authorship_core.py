"""Benchmark: the authorship index's core (issue 33, docs/authorship.md#cost), no git.

A work tree of ``--files`` files; this session and ``--sessions`` other sessions of ``--prompts``
prompts each, interleaved (each prompt: a capture finding a few user changes, then the agent's
turn changing about ``--paths`` files). The records go through the real file (one append per
capture), then a fresh reader loads it. Times (medians of ``--runs``):

- **load**: a fresh process's first read of the whole file (parse + index);
- **tail**: reading one more capture's record appended by another session;
- **3-path / 2,000-path plan**: attributing the current content of 3 / 2,000 files with the
  index loaded (a running bridge, or a CLI after its load);
- **3 cold**: a process without the index loaded reading just what answers for 3 paths
  (``AuthorshipStore.read(only=...)``: every frame checked, only those naming them parsed);
- **rebuild**: the records recomputed from the points (their tree diffs given: the core's part);
- **compact**: rewriting the file for the current tree's keys.

for 0, 1 and ``--sessions`` other sessions. Targets (issue 33): a 3-file plan ≤ 5 ms, a
2,000-file plan ≤ 100 ms.

Run: ``python tools/bench_authorship_core.py [--files 20000 --sessions 8 --prompts 80 --paths 20]``.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger.authorship.model import AuthorshipIndex, Key, Lineage, diff_entries
from ledger.authorship.rebuild import Chain, Point, PointKind, rebuild
from ledger.authorship.store import AuthorshipReader, AuthorshipStore

Tree = dict[bytes, tuple[int, str]]


def _blob(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def median_ms(run: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


@dataclass
class World:
    names: list[bytes]
    tree: Tree
    points: list[Point]
    changes: Callable[[str | None, str], list[Key]]
    store: AuthorshipStore


def build(directory: Path, files: int, others: int, prompts: int, paths: int, seed: int) -> World:
    rng = random.Random(seed)
    names = [f"src/module{n // 50}/file{n}.py".encode() for n in range(files)]
    tree: Tree = {name: (0o100644, _blob(f"base {name!r}")) for name in names}
    trees: dict[str, Tree] = {}
    store = AuthorshipStore(directory)
    store.replace([])
    chain = Chain()
    points: list[Point] = []
    sessions = ["own", *(f"other{n}" for n in range(others))]
    serial = 0
    recorded: dict[str, list[Key]] = {}

    def live_changes(base: str | None, snapshot: str) -> list[Key]:
        found = diff_entries(trees[base] if base else None, trees[snapshot])
        recorded[snapshot] = found
        return found

    def changes(base: str | None, snapshot: str) -> list[Key]:
        return recorded[snapshot]  # the rebuild's tree diffs, precomputed: the core's cost only

    def point(session: str, kind: PointKind, entry: str | None = None) -> None:
        nonlocal serial
        serial += 1
        snapshot = f"{serial:040x}"
        trees[snapshot] = dict(tree)
        p = Point(snapshot, kind, session, entry, None, float(serial))
        points.append(p)
        store.append([chain.record(p, live_changes)])
        live = {chain.last, *chain.sessions.values()}
        for old in [s for s in trees if s not in live]:
            del trees[old]  # only the chain's bases are compared with again

    for prompt in range(prompts):
        for session in sessions:
            for name in rng.sample(names, 2):  # the user's edits between prompts
                tree[name] = (0o100644, _blob(f"user {serial} {name!r}"))
            point(session, "capture")
            for name in rng.sample(names, paths):
                tree[name] = (0o100644, _blob(f"{session} {prompt} {name!r}"))
            point(session, "agent", f"{session}-a{prompt}")
    return World(names, tree, points, changes, store)


def measure(others: int, args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        world = build(Path(tmp), args.files, others, args.prompts, args.paths, seed=others)
        store = world.store
        size = store.path.stat().st_size
        load = median_ms(lambda: AuthorshipReader(store).refresh(), max(3, args.runs // 4))
        reader = AuthorshipReader(store)
        reader.refresh()
        index = reader.index
        records, entries = index.records, index.entries
        lineage = Lineage("own")
        rng = random.Random(7)
        three: list[Key] = [(n, *world.tree[n]) for n in rng.sample(world.names, 3)]
        many: list[Key] = [(n, *world.tree[n]) for n in rng.sample(world.names, 2000)]
        small = median_ms(lambda: index.attribute_all(three, lineage), args.runs)
        wanted = [key[0] for key in three]
        cold = median_ms(
            lambda: AuthorshipIndex.of(store.read(only=wanted).records).attribute_all(
                three, lineage
            ),
            args.runs,
        )
        large = median_ms(lambda: index.attribute_all(many, lineage), args.runs)
        last = world.points[-1]

        def tail() -> None:
            chain = Chain(last=last.snapshot)
            store.append([chain.record(last, lambda base, snap: many[:20])])
            reader.refresh()

        tailing = median_ms(tail, max(3, args.runs // 4))
        rebuilt = median_ms(lambda: rebuild(world.points, world.changes), 3)
        referenced = {(p, m, b) for p, (m, b) in world.tree.items()}
        compacting = median_ms(lambda: store.compact(referenced), 3)
        return (
            f"{others:>6} {records:>8,} {entries:>8,} {size / 1024:>7,.0f}Ki "
            f"{load:>6.1f}ms {tailing:>5.2f}ms {small:>6.3f}ms {cold:>6.1f}ms {large:>9.2f}ms "
            f"{rebuilt:>6.0f}ms {compacting:>6.0f}ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=80)
    parser.add_argument("--paths", type=int, default=20)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    print(
        f"{args.files:,} files; this session + N others x {args.prompts} prompts x ~{args.paths} "
        f"paths; medians of {args.runs}"
    )
    header = f"{'others':>6} {'records':>8} {'entries':>8} {'file':>9} {'load':>8} {'tail':>7} "
    header += f"{'3-path':>8} {'3 cold':>8} {'2,000-path':>11} {'rebuild':>8} {'compact':>8}"
    print(header)
    for others in sorted({0, 1, args.sessions}):
        print(measure(others, args), flush=True)


if __name__ == "__main__":
    main()
