#!/usr/bin/env python3
"""Benchmark: the first ``pi -p`` of the day, with the bridge's own trace split by event.

Why it exists: issue 34's target "the first ``pi -p`` of the day at 100k files ≤ +400 ms over
no extension". "First of the day" means no watcher runs when Pi starts, with default settings
(``rewind.snapshot.autoWatchSeconds``: the bridge starts one in the background, for the later
runs). ``tools/bench_pi_feed.py`` times later runs and a configuration without the watcher; this
one times exactly that first run: before each run every watcher of the repository is stopped.
Three configurations are alternated run by run (same load drifts): no extension, this tree, and
``--compare OLD_CHECKOUT`` (e.g. ``git archive <commit>`` unpacked; its extension and its
bridge). The real Pi 0.73.1, print mode, the scripted offline model, two tool turns that each
write a file (as bench_pi_feed).
``REWIND_TRACE`` gives the bridge's time per event: the pre-prompt capture (the largest
``turn_start``) and the turns' captures (``turn_end``) are printed apart.

Not a test: nothing here asserts a time. Prints medians, ratios and ``os.getloadavg()``.
Whole processes are timed as users run them: precompile both trees (``python -m compileall -q
ledger``) and drop ``PYTHONDONTWRITEBYTECODE``. Run it under the bench lock.

``--latency MS``: the scripted model answers each request MS ms late, as a model over the network
does (its first answer comes ~0.5-2 s after the prompt): the bridge's pre-prompt capture then runs
while Pi waits for the model (Pi holds a tool call until our handlers are done, not the request),
so the run shows what a user waits for. The default, 0, answers at once: every millisecond the
bridge spends before the first tool call is on the run's path.

``--later K``: after each first run, K more runs of the same tree with the same agent dir, as a
user's next prompts of the day: the watcher the first run started hosts them (its first hosted
run waits for the watcher's first full scan and is printed but left out of the median). Their
median is printed per tree beside the first runs', with the pre-prompt capture of each; each
waits :data:`LATER_PAUSE_S` after the run before it, as a person's next prompt does (the
watcher's idle-time verification is over then). "none" has no watcher in its later runs: compare
the trees' later runs with each other first.

Usage: python tools/bench_first_pi.py REPO [--runs 5] [--latency MS] [--compare OLD_CHECKOUT]
[--later K]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_pi_feed import stop_watcher

from tests.e2e.pikit import ensure_pi, pi_args, pi_env, turns, write


def no_watcher(repo: Path) -> None:
    """Stop every watcher of ``repo`` and wait until it is gone; drop leftover journals."""
    stop_watcher(repo)
    here = os.path.realpath(repo)
    for _ in range(100):
        pids = subprocess.run(
            ["pgrep", "-f", "serve --watch"], capture_output=True, text=True
        ).stdout.split()
        alive = []
        for pid in pids:
            try:
                if os.readlink(f"/proc/{pid}/cwd") == here:
                    alive.append(pid)
            except OSError:
                continue
        if not alive:
            break
        time.sleep(0.1)
    for leftover in (repo / ".git" / "pi-rewind" / "journal").glob("*"):
        leftover.unlink()
    time.sleep(1.0)  # the stopped watcher's exit off the next run's CPU


LATER_PAUSE_S = 3.0
"""The pause before each later run (``--later``)."""


def run_pi(argv: list[str], repo: Path, env: dict[str, str]) -> float:
    """One whole ``pi -p`` run in ``repo``: its wall time in ms (it must succeed)."""
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise SystemExit(f"pi failed ({done.returncode}): {done.stderr[-3000:]}")
    return (time.perf_counter() - started) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compare", type=Path, default=None)
    parser.add_argument("--latency", type=int, default=0, help="the model's answer delay (ms)")
    parser.add_argument("--later", type=int, default=0, help="hosted runs after each first run")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.pop("REWIND_AUTO_WATCH", None)  # the default: the first bridge starts a watcher
    trees = {"none": None, "this tree": ROOT}
    if args.compare is not None:
        trees["compare"] = args.compare.resolve()
    cli = ensure_pi()
    tmp = Path(tempfile.mkdtemp(prefix="bench-first-pi-"))
    times: dict[str, list[float]] = {name: [] for name in trees}
    later: dict[str, list[float]] = {name: [] for name in trees}
    later_capture: dict[str, list[float]] = {name: [] for name in trees if trees[name]}
    split: dict[str, dict[str, list[float]]] = {name: {} for name in trees if trees[name]}
    for n in range(args.runs + 1):  # the first round is a warm-up (page cache, bytecode)
        for i, (name, tree) in enumerate(trees.items()):
            no_watcher(args.repo)
            # Each tree runs its own extension (tools/pi-extension) as well as its own bridge.
            argv = pi_args(cli, extension=False)
            if tree is not None:
                argv += ["-e", str(tree / "tools" / "pi-extension" / "rewind-ledger.ts")]
            trace = tmp / f"trace-{i}-{n}.jsonl"
            env = {
                "REWIND_TRACE": str(trace),
                "PYTHONPATH": str(tree or ROOT),
                "SCRIPTED_LATENCY_MS": str(args.latency),
            }
            prompt = f"first{i}.{n} " + turns(
                [write(f"bench/first{i}-a{n}.txt", "a\n")],
                [write(f"bench/first{i}-b{n}.txt", "b\n")],
            )
            agent_env = {**pi_env(tmp / f"agent-{i}-{n}"), **env}
            ms = run_pi([*argv, "-p", prompt], args.repo, agent_env)
            print(f"  round {n} {name}: {ms:.0f} ms (load {os.getloadavg()[0]:.2f})", flush=True)
            seen = first_lines = trace.read_text().count("\n") if trace.exists() else 0
            for k in range(args.later):
                # A user's next prompt comes later: the run's sweep and the watcher's idle-time
                # verification (a full scan ~1 s after its last capture) end meanwhile.
                time.sleep(LATER_PAUSE_S)
                again = f"later{i}.{n}.{k} " + turns([write(f"bench/later{i}-{n}-{k}.txt", "c\n")])
                later_ms = run_pi([*argv, "-p", again], args.repo, agent_env)
                lines = trace.read_text().splitlines() if trace.exists() else []
                captures = [json.loads(x)["ms"] for x in lines[seen:] if '"turn_start"' in x]
                seen = len(lines)
                capture_ms = max(captures, default=0.0)
                print(
                    f"    later {k} {name}: {later_ms:.0f} ms, pre-prompt capture {capture_ms:.1f} ms"
                )
                if n and k:  # the first hosted run waits for the watcher's first full scan
                    later[name].append(later_ms)
                    if name in later_capture:
                        later_capture[name].append(capture_ms)
            if not n:
                continue
            times[name].append(ms)
            if tree is not None and trace.exists():
                lines = trace.read_text().splitlines()[:first_lines]
                events = [json.loads(line) for line in lines]
                parts = split[name]
                parts.setdefault("bridge events", []).append(sum(e["ms"] for e in events))
                parts.setdefault("pre-prompt capture", []).append(
                    max(e["ms"] for e in events if e["event"] == "turn_start")
                )
                parts.setdefault("turns' captures", []).append(
                    sum(e["ms"] for e in events if e["event"] == "turn_end")
                )
    no_watcher(args.repo)
    one, five, fifteen = os.getloadavg()
    print(
        f"\n== first pi -p of the day, {args.repo}, model latency {args.latency} ms"
        f" (load {one:.2f} {five:.2f} {fifteen:.2f})"
    )
    floor = statistics.median(times["none"])
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"{name:<10} median {median:7.0f} ms  +{median - floor:6.0f} ms over no extension"
            f"  x{median / floor:4.2f}  runs {[round(v) for v in values]}"
        )
        for part, ms in split.get(name, {}).items():
            print(
                f"    {part:<20} median {statistics.median(ms):7.1f} ms  {[round(v) for v in ms]}"
            )
    if args.later > 1:
        print(
            f"later runs (hosted by the watcher the first run started; medians of runs 2..{args.later}):"
        )
        later_floor = statistics.median(later["none"])
        for name, values in later.items():
            median = statistics.median(values)
            capture = later_capture.get(name)
            extra = f"  pre-prompt capture {statistics.median(capture):5.1f} ms" if capture else ""
            print(
                f"{name:<10} median {median:7.0f} ms  +{median - later_floor:6.0f} ms over no"
                f" extension{extra}  runs {[round(v) for v in values]}"
            )
    if "compare" in times:
        new, old = statistics.median(times["this tree"]), statistics.median(times["compare"])
        print(
            f"this tree / compare: whole run x{new / old:.2f}, added x{(new - floor) / (old - floor):.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
