#!/usr/bin/env python3
"""Benchmark: what attributing a restore plan costs (issues 27 and 33).

Why it exists: before a restore overwrites files, its plan names whose work they hold (the
user's, another session's agent's: docs/design.md#attribution). That answer used to be
recomputed at every plan from every recorded point of this session and of every neighbour
session; it now comes from the authorship index (docs/authorship.md), one lookup per path.
Issue 33's targets: attributing a 3-file plan in at most 5 ms and a 2,000-file plan in at most
100 ms, with 0, 1 and 8 other sessions of 80 prompts each.

The world (built once, in this process, with this checkout's engine: tests/enginekit.py's
``Agent``, real git, real session files): a repository of ``--files`` files; session A whose
first prompt rewrites files 0..1,999 (the 2,000-file plan restores A to before it); then other
sessions are added in stages (0, then 1, then 8 in all, ``--sessions``), each of ``--prompts``
prompts editing 3 of those 2,000 files per prompt. Before each stage is measured, A runs one
more prompt and then 3 files change after it: written by the last other session's agent (or,
with no other session, by the user); the 3-file plan restores A to that prompt's end.

What is timed, in a new process per sample (``--runs`` processes, medians), for each ledger:

- **floor**: the plan itself without attribution (``operations.plan_for``: the capture and the
  diff, what every restore pays anyway);
- **first**: ``changes_since.plan_authors(engine, plan)`` the first time in a fresh engine (what
  a CLI process pays: the index's sparse or whole read; before, the timelines);
- **later**: the same call again on the same engine (median of 5), and for the new ledger also
  on an engine that keeps the index loaded, as the bridge does (``keep_loaded``).

The old method, in the same run: the ledger of commit ``--old`` (default cfd1c9e, before the
index was wired; extracted with ``git archive`` into a temp dir, no git state changed) through
``PYTHONPATH``, on the same world (it reads the same session files; it ignores the index file).
Its ``plan_authors`` has the same signature.

Usage::

    python tools/bench_neighbours.py                          # 20,000 files, 0/1/8 x 80 prompts
    python tools/bench_neighbours.py --files 5000 --runs 3 --old none

Not a test: nothing here asserts a time. The machine is usually shared: medians of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAN_FILES = 2000
TARGETS = {"3": 5.0, str(PLAN_FILES): 100.0}
"""Issue 33: ms for attributing a 3-file and a 2,000-file plan."""


def worker(spec: dict[str, str]) -> dict[str, object]:
    """In a child process with the ledger under test on PYTHONPATH: one sample (see module)."""
    from ledger.engine import operations
    from ledger.engine.changes_since import plan_authors
    from tests.enginekit import Agent

    agent = Agent(Path(spec["repo"]), Path(spec["agent_dir"]), Path(spec["session"]))
    engine = agent.engine
    if spec.get("keep_loaded") and hasattr(engine, "authorship"):
        engine.authorship.keep_loaded = True  # the bridge's engine (absent before the index)
    engine.session_start("startup")
    target = engine.resolve_point(spec["entry"])
    assert target is not None
    t0 = time.perf_counter()
    plan = operations.plan_for(engine, target)
    floor = (time.perf_counter() - t0) * 1000
    profiler = None
    if spec.get("profile"):
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0 = time.perf_counter()
    authors = plan_authors(engine, plan)
    first = (time.perf_counter() - t0) * 1000
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(spec["profile"] + ".first")
        profiler = cProfile.Profile()
        profiler.enable()
    later = []
    for _ in range(5):
        t0 = time.perf_counter()
        again = plan_authors(engine, plan)
        later.append((time.perf_counter() - t0) * 1000)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(spec["profile"] + ".later")
    assert again == authors
    return {
        "floor": floor,
        "first": first,
        "later": statistics.median(later),
        "paths": len({*plan.added, *plan.modified, *plan.deleted}),
        "others": sum(len(g.paths) for g in authors.others),
        "own": len(authors.own),
    }


# --- the world --------------------------------------------------------------------------------


class World:
    def __init__(self, root: Path, files: int) -> None:
        from tests.enginekit import Agent

        self.files = files
        self.repo = root / "repo"
        self.agent_dir = root / "agent"
        self.repo.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=self.repo, check=True)
        for n in range(files):
            self.path(n).parent.mkdir(exist_ok=True)
            self.path(n).write_text(f"file {n}\n")
        subprocess.run(["git", "add", "-A"], cwd=self.repo, check=True)
        subprocess.run(["git", "commit", "-qm", "base"], cwd=self.repo, check=True)
        self.a = Agent.start(self.repo, self.agent_dir)

        def generate(r: Path) -> None:
            for n in range(PLAN_FILES):
                self.path(n).write_text(f"file {n}, generated by A\n")

        self.far, _ = self.a.prompt("generate", generate)  # restore to before: 2,000 files
        self.others: list[object] = []
        self.stamp = 0

    def path(self, n: int) -> Path:
        return self.repo / f"d{n % 100}" / f"f{n}.txt"

    def add_others(self, count: int, prompts: int) -> None:
        from tests.enginekit import Agent

        for _ in range(count):
            s = len(self.others)
            other = Agent.start(self.repo, self.agent_dir)
            for p in range(prompts):

                def edit(r: Path, s: int = s, p: int = p) -> None:
                    for k in range(3):
                        n = (s * 131 + p * 3 + k) % PLAN_FILES
                        self.path(n).write_text(f"session {s} prompt {p} {k}\n")

                other.prompt(f"s{s} p{p}", edit)
            self.others.append(other)

    def near(self) -> str:
        """A's next prompt, then 3 files changed after it: the 3-file plan's target."""
        self.stamp += 1
        _, assistants = self.a.prompt(
            f"mine {self.stamp}",
            lambda r: (r / "mine.txt").write_text(f"A's {self.stamp}\n"),
        )
        paths = [self.repo / "late" / f"l{k}.txt" for k in range(3)]
        paths[0].parent.mkdir(exist_ok=True)

        def write(r: Path) -> None:
            for k, p in enumerate(paths):
                p.write_text(f"late {self.stamp} {k}\n")

        if self.others:
            from tests.enginekit import Agent

            last = self.others[-1]
            again = Agent(self.repo, self.agent_dir, last.session_file)  # type: ignore[attr-defined]
            again.engine.session_start("resume")
            again.prompt(f"late {self.stamp}", write)
        else:
            write(self.repo)  # the user's, by hand
        return assistants[-1]


def sample(source: Path, spec: dict[str, str], env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "_worker", json.dumps(spec)],
        cwd=spec["repo"],
        env={**env, "PYTHONPATH": str(source)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"worker ({source}) failed:\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def extract(commit: str, into: Path) -> Path:
    """The ledger of ``commit`` as plain files (``git archive``: no worktree, no git state)."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--sessions", default="0,1,8", help="other sessions per stage (0,1,8)")
    parser.add_argument("--prompts", type=int, default=80)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--old", default="cfd1c9e", help="reference commit, or 'none'")
    parser.add_argument("--profile", action="store_true", help="cProfile the last stage")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    assert args.files >= PLAN_FILES
    stages = sorted(int(s) for s in args.sessions.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="bench-neighbours-"))
    home = tmp / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Bench\n\temail = bench@example.com\n")
    # Bytecode caches are used, as on a user's machine (an installed package has them): without
    # them every process compiles every module it imports, which is most of a CLI's time.
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("REWIND_", "PI_")) and k != "PYTHONDONTWRITEBYTECODE"
        },
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "REWIND_AUTO_WATCH": "0",
        "REWIND_AUTO_UPKEEP": "0",
    }
    os.environ.update(env)
    sources = [("new", ROOT, False), ("new, index kept loaded", ROOT, True)]
    if args.old != "none":
        sources.append((f"old {args.old}", extract(args.old, tmp / "old-src"), False))
    for _, source, _ in sources:  # bytecode caches, as an installed package has them
        subprocess.run(
            [
                sys.executable,
                "-m",
                "compileall",
                "-q",
                str(source / "ledger"),
                str(source / "tests" / "enginekit.py"),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
    print(
        f"{args.files} files; other sessions of {args.prompts} prompts: {stages}; medians of "
        f"{args.runs} processes; {os.cpu_count()} cpus (shared machine)"
    )
    print(
        "ms: floor = the plan without attribution; first = plan_authors in a fresh engine; "
        "later = the same call again"
    )
    try:
        world_dir = tmp / "world"
        world_dir.mkdir()
        sys.path.insert(0, str(ROOT))
        started = time.perf_counter()
        world = World(world_dir, args.files)
        print(f"built the repository and A's first prompt in {time.perf_counter() - started:.0f} s")
        for stage in stages:
            started = time.perf_counter()
            world.add_others(stage - len(world.others), args.prompts)
            near = world.near()
            print(f"\n== {stage} other sessions (built in {time.perf_counter() - started:.0f} s)")
            print(
                f"  {'plan':<6} {'ledger':<24} {'paths':>5} {'named':>5} {'own':>4} "
                f"{'floor':>7} {'first':>7} {'later':>7}  target"
            )
            for label, entry in (("3", near), (str(PLAN_FILES), world.far)):
                spec = {
                    "repo": str(world.repo),
                    "agent_dir": str(world.agent_dir),
                    "session": str(world.a.session_file),
                    "entry": entry,
                }
                rows: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in sources}
                for _ in range(args.runs):  # interleaved: a busy moment hits every ledger
                    for name, source, keep in sources:
                        one = {**spec, **({"keep_loaded": "1"} if keep else {})}
                        rows[name].append(sample(source, one, env))
                for name, _, _ in sources:
                    r = rows[name]

                    def med(key: str, r: list[dict[str, float]] = r) -> float:
                        return statistics.median(x[key] for x in r)

                    target = TARGETS[label]
                    verdict = "ok" if med("first") <= target else "MISSED"
                    print(
                        f"  {label:<6} {name:<24} {med('paths'):5.0f} {med('others'):5.0f} "
                        f"{med('own'):4.0f} {med('floor'):7.1f} {med('first'):7.1f} "
                        f"{med('later'):7.2f}  <= {target:.0f} ms first: {verdict}",
                        flush=True,
                    )
        if args.profile:
            import pstats

            for label, entry in (("3", near), (str(PLAN_FILES), world.far)):
                out = str(tmp / f"profile-{label}")
                spec = {
                    "repo": str(world.repo),
                    "agent_dir": str(world.agent_dir),
                    "session": str(world.a.session_file),
                    "entry": entry,
                    "profile": out,
                }
                sample(ROOT, spec, env)
                for call in ("first", "later"):
                    print(
                        f"\n-- cProfile: new ledger, {label}-file plan, plan_authors {call} "
                        f"call{'' if call == 'first' else ' x5'} (cumulative) --"
                    )
                    stats = pstats.Stats(f"{out}.{call}")
                    stats.sort_stats("cumulative").print_stats(args.top)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "_worker":
        print(json.dumps(worker(json.loads(sys.argv[2]))))
        sys.exit(0)
    sys.exit(main())
