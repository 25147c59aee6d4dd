"""Benchmark: what naming another session's files costs a restore plan (issue 27).

A repository (``--files``) with session A and ``--sessions`` sibling sessions of
``--prompts`` prompts each (their agents edit a few files per prompt), all recent, so all are
neighbours. Times a fresh engine's ``rewind restore --dry-run`` plan to A's first prompt (what a
CLI process pays), median of ``--runs``:

- **per path** (the method used): each neighbour's agent steps are asked, for the few files the
  restore would change, whether a step produced their current state (two tree lookups per step
  and path);
- **every diff** (the first version): each neighbour's agent work built from a tree diff of every
  agent step, then looked up;
- **no neighbours**: the plan without attribution to other sessions (the floor).

Run: ``python tools/bench_neighbours.py [--files 20000 --sessions 8 --prompts 150 --runs 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger.engine import neighbours as N
from ledger.engine import operations
from ledger.engine.ownership import AgentWork, branch_timeline, recorded_changes
from ledger.session.model import Session
from tests.enginekit import Agent


def every_diff(engine: object, session: Session) -> AgentWork:
    """The first version: a tree diff of every agent step of every branch."""
    parents = {e.parent_id for e in session.entries if e.parent_id}
    leaves = [e.id for e in session.entries if e.id not in parents][-32:]
    work = AgentWork()
    for leaf in leaves:
        steps = branch_timeline(engine, session, leaf)  # type: ignore[arg-type]
        for before, after in pairwise(steps):
            if after.kind != "agent":
                continue
            for change in recorded_changes(engine, before.tree, after.tree):  # type: ignore[arg-type]
                if change.new is None:
                    work.deleted.add(change.path)
                else:
                    work.made.add((change.path, change.new.mode, change.new.oid))
    return work


def build(root: Path, files: int, sessions: int, prompts: int) -> tuple[Agent, str, str]:
    repo = root / "repo"
    repo.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@b",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@b",
    }
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for n in range(files):
        d = repo / f"d{n % 100}"
        d.mkdir(exist_ok=True)
        (d / f"f{n}.txt").write_text(f"file {n}\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "base"], cwd=repo, check=True, env=env)
    agent_dir = root / "agent"
    first = Agent.start(repo, agent_dir)
    point, _ = first.prompt("the point")
    for s in range(sessions):
        other = Agent.start(repo, agent_dir)
        for p in range(prompts):

            def edit(r: Path, s: int = s, p: int = p) -> None:
                for k in range(3):
                    (
                        r / f"d{(s * 7 + p + k) % 100}" / f"f{(s * 131 + p * 3 + k) % files}.txt"
                    ).write_text(f"session {s} prompt {p} {k}\n")

            other.prompt(f"s{s} p{p}", edit)
    near, _ = first.prompt("mine", lambda r: (r / "mine.txt").write_text("A's\n"))
    last = Agent(repo, agent_dir, other.session_file)  # the last neighbour writes 3 more files
    last.engine.session_start("resume")
    last.prompt(
        "three more",
        lambda r: [(r / "d0" / f"f{k}.txt").write_text(f"late {k}\n") for k in range(3)],
    )
    return first, point, near


def timed(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=150)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        os.environ.update(HOME=str(home), REWIND_AUTO_WATCH="0", GIT_CONFIG_NOSYSTEM="1")
        started = time.perf_counter()
        first, far, near = build(Path(tmp), args.files, args.sessions, args.prompts)
        print(
            f"built {args.files} files, {args.sessions} sessions x {args.prompts} prompts in {time.perf_counter() - started:.0f} s"
        )

        for label, point in (("far (every neighbour's files)", far), ("near (3 files)", near)):

            def plan(point: str = point) -> object:
                fresh = first.resume()  # a new engine, as a CLI process has
                return operations.restore(fresh.engine, point, "files", dry_run=True)

            report = plan()
            named = sum(len(g.paths) for g in report.others)  # type: ignore[attr-defined]
            per_path = timed(plan, args.runs)
            original = N.session_agent_work
            N.session_agent_work = every_diff  # type: ignore[assignment]
            try:
                diffs = timed(plan, args.runs)
            finally:
                N.session_agent_work = original
            import ledger.engine.changes_since as C

            kept = C.neighbours
            C.neighbours = lambda engine, now=None: []  # type: ignore[assignment]
            try:
                floor = timed(plan, args.runs)
            finally:
                C.neighbours = kept
            print(f"restore to the {label}: {named} files named as another session's")
            print(f"  plan, per path (used): {per_path:8.1f} ms")
            print(f"  plan, every diff (v1): {diffs:8.1f} ms   ratio {diffs / per_path:.1f}x")
            print(
                f"  plan, no neighbours:   {floor:8.1f} ms   attribution adds {per_path - floor:.1f} ms"
            )


if __name__ == "__main__":
    main()
