#!/usr/bin/env python3
"""Benchmark: what a whole rewind process costs to start, beside its floor on this machine.

Why it exists: issue 34 item 2 ("a process imports only what it uses"; the spawned bridge
answers ``session_start`` in ≤ 100 ms at 100k files) and item 5 (per prompt inside a running
bridge ≤ +30 ms). In-process timings hide start-up, so everything here is a real process,
timed from the outside, interleaved run by run with its floor (same load drifts):

1. ``python -c pass`` (the interpreter's floor) and ``python -c 'import pydantic'`` (what the
   record models used to add), ``rewind --version``, ``rewind restore --help``, and on a small
   demo repository with a session: ``rewind checkpoint`` and a ``rewind restore`` + ``rewind
   undo`` pair.
2. The spawned bridge (``rewind serve --stdio``) in a ``--files`` repository until it has
   answered ``session_start`` (what Pi awaits before its first prompt), beside two
   ``git rev-parse`` (the floor the issue names) and ``python -c pass``; then a later event
   (``ping``) on the same pipe.
3. Per prompt inside that running bridge, its own change feed warm (``hasUI``: the feed starts
   at the first event; warm-up prompts with idle time arm it): ``before_agent_start``,
   ``turn_start``, ``turn_end``, ``agent_end`` with one file written by the "agent", against
   four ``ping`` round trips on the same pipe (the protocol's floor). ``feed-status.json``
   (written when the bridge ends) proves the timed captures were fed.

Which install a figure is for: by default every child runs this checkout through the
interpreter running the script with ``PYTHONPATH`` at the checkout, i.e. the development venv,
an **editable** install (``pip install -e``) whose ``site`` start-up imports the editable
finder (``pathlib``, ``importlib.util``, …: ~25–30 ms more per process than a regular install).
Users run a **regular** install (the extension's ``.rewind-venv`` made by ``pip install
<package root>``, or the README's ``pip install /path/to/rewind-ledger``). ``--install
VENV/bin/rewind`` adds that install's bridge (``rewind serve --stdio`` as the extension spawns
it, without ``PYTHONPATH``) interleaved run by run with the editable one (then also spawned as
``bin/rewind serve --stdio``), and both interpreters' floors ``python -c pass`` and ``python -S
-c pass``. Build one with ``python3 -m venv /tmp/ui-venv && /tmp/ui-venv/bin/pip install .``
and precompile it (``python -m compileall -q <site-packages>/ledger``).

Not a test: nothing here asserts a time. Prints medians and ``os.getloadavg()``.

Usage: python tools/bench_startup.py [--files 100000] [--dir /tmp/startup-100k] [--runs 7]
[--prompts 10 (0: none)] [--skip-bridge] [--skip-cli] [--compare OLD_CHECKOUT]
[--install VENV/bin/rewind]
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_feed import build_repo
from bench_floors import leave_no_watcher

from tests.bridgekit import FakePi

PY = sys.executable
_ARGV: dict[str, tuple[list[str], Path]] = {}


def _env(root: Path = ROOT) -> dict[str, str]:
    # Whole processes are timed as users run them: with bytecode caches (compiled below).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(root)
    return env


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
    ms = (time.perf_counter() - t0) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{argv}: {done.stderr.decode()}")
    return ms


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def report(name: str, values: list[float], floor: list[float] | None, floor_name: str) -> None:
    median = statistics.median(values)
    line = f"{name:<44} median {median:7.1f} ms  (min {min(values):6.1f}, n={len(values)})"
    if floor:
        f = statistics.median(floor)
        line += f"  {floor_name} {f:6.1f} ms  +{median - f:6.1f} ms  x{median / f:4.2f}"
    print(line, flush=True)


def bench_cli(runs: int, env: dict[str, str], before: dict[str, str] | None) -> None:
    from ledger.demo import build_world, run_prompts

    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        world = run_prompts(build_world(tmp / "demo"))
        agent = ["--agent-dir", str(world.agent_dir)]
        rewind = [PY, "-m", "ledger"]
        _ARGV.update(
            {
                "rewind --version": ([*rewind, "--version"], tmp),
                "rewind restore --help": ([*rewind, "restore", "--help"], tmp),
                "rewind checkpoint @": ([*rewind, *agent, "checkpoint", "@"], world.repo),
                "rewind restore @ <prompt 2> --yes": (
                    [*rewind, *agent, "restore", "@", world.users[1], "--yes"],
                    world.repo,
                ),
                "rewind undo @ --yes": ([*rewind, *agent, "undo", "@", "--yes"], world.repo),
            }
        )
        cases: dict[str, Callable[[], float]] = {
            "python -c pass": lambda: timed([PY, "-c", "pass"], tmp, env),
            "python -c 'import pydantic'": lambda: timed([PY, "-c", "import pydantic"], tmp, env),
            "rewind --version": lambda: timed([*rewind, "--version"], tmp, env),
            "rewind restore --help": lambda: timed([*rewind, "restore", "--help"], tmp, env),
            "rewind checkpoint @": lambda: timed(
                [*rewind, *agent, "checkpoint", "@"], world.repo, env
            ),
            "rewind restore @ <prompt 2> --yes": lambda: timed(
                [*rewind, *agent, "restore", "@", world.users[1], "--yes"], world.repo, env
            ),
            "rewind undo @ --yes": lambda: timed(
                [*rewind, *agent, "undo", "@", "--yes"], world.repo, env
            ),
        }
        if before is not None:  # the same commands run by the --compare tree, interleaved
            for name in [n for n in cases if n.startswith("rewind")]:
                argv, cwd = _ARGV[name]
                cases[f"{name} (before)"] = lambda a=argv, c=cwd: timed(a, c, before)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for run in cases.values():
            run()  # warm-up (page cache, bytecode)
        for _ in range(runs):
            for name, run in cases.items():  # interleaved: the same load for every case
                times[name].append(run())
        print(f"\n== whole CLI processes, small demo repository ({load()})", flush=True)
        floor = times["python -c pass"]
        for name, values in times.items():
            report(name, values, None if name == "python -c pass" else floor, "floor")
    finally:
        leave_no_watcher(tmp / "demo" / "project")  # ledger.demo.build_world's repository
        shutil.rmtree(tmp, ignore_errors=True)


def _git_floor(repo: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    for args in (["rev-parse", "--show-toplevel"], ["rev-parse", "--git-dir"]):
        subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, check=True)
    return (time.perf_counter() - t0) * 1000


def _session_start(repo: Path, agent: Path, trace: Path | None = None) -> tuple[FakePi, float]:
    if trace is not None:
        os.environ["REWIND_TRACE"] = str(trace)
    try:
        t0 = time.perf_counter()
        pi = FakePi(repo, agent)
        reply = pi.event("session_start", {"reason": "startup"})
        ms = (time.perf_counter() - t0) * 1000
    finally:
        os.environ.pop("REWIND_TRACE", None)
    if reply.error is not None:
        raise SystemExit(f"session_start: {reply.error}")
    return pi, ms


def _event_ms(pi: FakePi, name: str, payload: dict[str, object] | None = None) -> float:
    t0 = time.perf_counter()
    reply = pi.event(name, payload)
    if reply.error is not None:
        raise SystemExit(f"{name}: {reply.error}")
    return (time.perf_counter() - t0) * 1000


def _installed_env(env: dict[str, str]) -> dict[str, str]:
    """The environment of a regular install's child: no PYTHONPATH (it would put this checkout
    before the installed package)."""
    return {k: v for k, v in env.items() if k not in ("PYTHONPATH", "BRIDGEKIT_BRIDGE_CMD")}


def _installed_start(repo: Path, agent: Path, rewind: Path, env: dict[str, str]) -> float:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(_installed_env(env))
    os.environ["BRIDGEKIT_BRIDGE_CMD"] = json.dumps([str(rewind), "serve", "--stdio"])
    try:
        pi, ms = _session_start(repo, agent)
        pi.close()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return ms


def bench_bridge(
    repo: Path,
    runs: int,
    prompts: int,
    env: dict[str, str],
    before: dict[str, str] | None,
    install: Path | None = None,
) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-bridge-"))
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # FakePi spawns with os.environ
    if install is not None:  # the editable one spawned the same way: bin/rewind serve --stdio
        script = Path(PY).parent / "rewind"
        if script.exists():
            os.environ["BRIDGEKIT_BRIDGE_CMD"] = json.dumps([str(script), "serve", "--stdio"])
    floors_of: dict[str, list[float]] = {}
    try:
        starts, pings, floors, pys, befores, installed = [], [], [], [], [], []
        for run in range(runs + 1):
            floor, py = _git_floor(repo, env), timed([PY, "-c", "pass"], repo, env)
            pi, ms = _session_start(repo, tmp / f"agent-{run}")
            later = [_event_ms(pi, "ping") for _ in range(5)]
            pi.close()
            if install is not None:  # the regular install's bridge and floors, interleaved
                ui_py, ui_env = str(install.parent / "python"), _installed_env(env)
                installed.append(_installed_start(repo, tmp / f"agent-ui-{run}", install, env))
                for name, argv, e in (
                    ("editable: python -S -c pass", [PY, "-S", "-c", "pass"], env),
                    ("regular: python -c pass", [ui_py, "-c", "pass"], ui_env),
                    ("regular: python -S -c pass", [ui_py, "-S", "-c", "pass"], ui_env),
                ):
                    value = timed(argv, repo, e)
                    if run:
                        floors_of.setdefault(name, []).append(value)
            if before is not None:  # the --compare tree's bridge, interleaved
                os.environ["PYTHONPATH"] = before["PYTHONPATH"]
                old, before_ms = _session_start(repo, tmp / f"agent-before-{run}")
                old.close()
                os.environ["PYTHONPATH"] = env["PYTHONPATH"]
                befores.append(before_ms)
            if run:  # the first is a warm-up (page cache of the tree, bytecode)
                floors.append(floor)
                pys.append(py)
                starts.append(ms)
                pings.append(statistics.median(later))
        print(f"\n== spawned bridge, {repo} ({load()})", flush=True)
        report("two git rev-parse", floors, None, "")
        report("python -c pass", pys, None, "")
        report("spawn until session_start answered", starts, pys, "python -c pass")
        report("  same, against two git rev-parse", starts, floors, "rev-parse x2")
        if before is not None:
            report("  the --compare tree's bridge", befores[1:], pys, "python -c pass")
            report("  this tree against the --compare tree", starts, befores[1:], "before")
        report("later event (ping) on the same pipe", pings, None, "")
        if install is not None:
            print(f"  editable: {PY} (PYTHONPATH {env.get('PYTHONPATH')}); regular: {install}")
            for name, values in floors_of.items():
                report(name, values, None, "")
            ui_pass = floors_of["regular: python -c pass"]
            report("regular install: spawn until session_start", installed[1:], ui_pass, "its pass")
            report("  regular against editable", installed[1:], starts, "editable")
            median = statistics.median(installed[1:])
            print(f"  regular against the 100 ms target: x{median / 100:4.2f}", flush=True)

        if prompts <= 0:
            return
        # Per prompt, the bridge's own feed warm.
        trace = tmp / "trace.jsonl"
        pi, _ = _session_start(repo, tmp / "agent-prompts", trace)
        for n in range(3):  # warm-up: the feed's walk runs in the background, then idles
            pi.prompt(f"warm {n}", lambda n=n: (repo / f"startup-warm-{n}.txt").write_text("w\n"))
            time.sleep(5 if n == 0 else 2)
        per_prompt, floor = [], []
        for n in range(prompts):
            target = repo / f"startup-{n}.txt"
            t0 = time.perf_counter()
            pi.prompt(f"prompt {n}", lambda t=target, n=n: t.write_text(f"{n}\n"))
            per_prompt.append((time.perf_counter() - t0) * 1000)
            floor.append(sum(_event_ms(pi, "ping") for _ in range(4)))
            time.sleep(1.5)  # a user reading the answer: the idle-time verification runs here
        pi.close()
        status_file = repo / ".git" / "pi-rewind" / "feed-status.json"
        status = json.loads(status_file.read_text()) if status_file.exists() else {}
        print(f"\n== per prompt inside the running bridge ({load()})", flush=True)
        report("4 events of a prompt (1 file written)", per_prompt, floor, "4 pings")
        events = [json.loads(line) for line in trace.read_bytes().splitlines()]
        timed_events = events[-(prompts * 8) :]
        for name in ("before_agent_start", "turn_start", "turn_end", "agent_end"):
            values = [e["ms"] for e in timed_events if e["event"] == name]
            if values:
                print(f"  in the bridge: {name:<20} median {statistics.median(values):6.2f} ms")
        print(f"  feed: fed {status.get('fed')}, full {status.get('full')} (the whole session)")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        leave_no_watcher(repo)
        for n in range(prompts + 3):
            for name in (f"startup-{n}.txt", f"startup-warm-{n}.txt"):
                (repo / name).unlink(missing_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/startup-100k"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--repo", type=Path, help="reuse this repository (instead of --dir)")
    parser.add_argument("--skip-bridge", action="store_true")
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument(
        "--compare",
        type=Path,
        help="another checkout (e.g. `git archive` of an older commit) run interleaved as 'before'",
    )
    parser.add_argument(
        "--install",
        type=Path,
        help="a regular (non-editable) install's `rewind` script, e.g. /tmp/ui-venv/bin/rewind: "
        "its bridge runs interleaved with the editable one (bridge part only)",
    )
    args = parser.parse_args()
    env = _env()
    before = _env(args.compare) if args.compare else None
    for root in [ROOT, *([args.compare] if args.compare else [])]:
        subprocess.run([PY, "-m", "compileall", "-q", str(root / "ledger")], env=env, check=True)
    print(f"{PY}; {load()}; cpus {os.cpu_count()}", flush=True)
    if not args.skip_cli:
        bench_cli(args.runs, env, before)
    if not args.skip_bridge:
        if args.repo is not None:
            repo = args.repo.resolve()
        else:
            args.dir.mkdir(parents=True, exist_ok=True)
            repo = build_repo(args.dir, args.files, 100)
        bench_bridge(repo, args.runs, args.prompts, env, before, args.install)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
