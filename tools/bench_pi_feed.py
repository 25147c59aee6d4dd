#!/usr/bin/env python3
"""Benchmark: what a prompt of the real Pi costs with rewind-ledger and its change feed, 100k files.

Why it exists: issue 13's target "a ``pi -p`` prompt on a 100k-file repository costs ≤ 30 ms more
than with no extension (bridge start excluded, shown apart)". One ``pi -p`` run starts a new Pi
and a new bridge, so its extra cost is bridge start + per-prompt work, and its captures cannot be
fed (the watcher's walk of the tree is not over when the pre-prompt snapshot is taken). The two
parts are therefore measured apart:

1. ``pi -p`` whole runs (Pi 0.73.1, print mode, scripted offline model, two tool turns that each
   write a file), five configurations alternated run by run: no extension; the extension
   capturing in the bridge (``REWIND_SERVED=0``; print mode starts no feed of its own); the
   extension with ``REWIND_FEED=0``; the
   extension with ``rewind.snapshot.autoWatchSeconds``, hosted by the shared watcher (its first,
   untimed run starts that watcher, which then runs the sessions of the later runs itself:
   docs/capture.md#hosted-sessions; the bench stops it at the end of this part); the same with
   ``REWIND_HOSTED=0`` (own bridge, captures served by the watcher: #shared-watcher). The
   rewind-turn records of each configuration are counted at the end: one per prompt. The
   difference to no extension is bridge start + per-prompt cost + background work competing
   for the CPU (the shared watcher verifies its feed with a full scan ~1 s after its last
   capture, i.e. during the next configurations' runs).
2. Bridge start alone: ``rewind serve --stdio`` spawned in the repository until it has answered
   ``session_start`` (what Pi awaits before its first prompt), feed on and off alternated; and
   the watcher's walk (in the background, off the critical path) measured in-process.
3. Per prompt, bridge start excluded: one long-lived Pi per configuration (``pi --mode rpc``,
   as in interactive use), several prompts in the same session, alternating between a session
   without the extension and one with it (same load drifts). After each prompt both sessions
   idle for ``--think`` seconds (a user reading the answer): the feed's idle-time verification
   (a full scan) runs then, as it would in real use, and not inside a timed prompt. A prompt
   with the extension ends when its ``rewind-turn`` record is in the session file. The
   extension's session writes ``feed-status.json`` when its bridge ends: the fed/full counts
   prove the captures were fed.

Not a test: nothing here asserts a time. Needs node and npm (Pi is installed into the cache as
the end-to-end tests do).

``--repo PATH`` reuses a built repository (left in place); ``--only-rpc`` runs part 3 alone;
``--compare DIR`` adds to part 3 a third session running another checkout's extension and
bridge (e.g. ``git archive`` of the old code), interleaved with the other two, and prints the
ratios and the machine's load.

Usage: python tools/bench_pi_feed.py [--files 100000] [--runs 7] [--prompts 10] [--think 3]
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_feed import build_repo
from bench_pi_extension import Bridge

from tests.e2e.pikit import PiRunner, RpcPi, ensure_pi, turns, write

SHARED = "shared watcher, own bridge"
HOSTED = "hosted by the shared watcher"
CONFIGS = {
    "no extension": (False, {}),
    # REWIND_SERVED=0: the bridge captures by itself even while the shared watcher is up (in
    # print mode without its own feed: docs/capture.md#shared-watcher); REWIND_HOSTED=0: the
    # extension starts its own bridge (docs/capture.md#hosted-sessions)
    "extension, no shared watcher": (
        True,
        {"REWIND_FEED": "1", "REWIND_SERVED": "0", "REWIND_HOSTED": "0"},
    ),
    "extension, REWIND_FEED=0": (True, {"REWIND_FEED": "0", "REWIND_HOSTED": "0"}),
    # Its first (untimed) run starts the shared watcher, with this configuration's environment:
    # the watcher hosts the sessions of this one, and serves the captures of the next one.
    HOSTED: (True, {}),
    SHARED: (True, {"REWIND_HOSTED": "0"}),
}


def prompt_text(tag: str, n: int) -> str:
    return f"{tag} {n} " + turns(
        [write(f"bench/{tag}-a{n}.txt", f"{n}\n")], [write(f"bench/{tag}-b{n}.txt", f"{n}\n")]
    )


def print_mode(
    cli: Path, repo: Path, tmp: Path, runs: int, pause: float = 0.0
) -> dict[str, list[float]]:
    runners = {
        name: PiRunner(cli, repo, tmp / f"agent-p-{i}", extension=ext)
        for i, (name, (ext, _env)) in enumerate(CONFIGS.items())
    }
    # The shared watcher's configurations: one agent dir (the watcher hosts a session only in
    # its own environment, PI_CODING_AGENT_DIR included); HOSTED's first run starts it.
    runners[SHARED] = runners[HOSTED]
    shared = runners[HOSTED].agent_dir
    shared.mkdir(parents=True, exist_ok=True)
    # No settings file: the default (rewind.snapshot.autoWatchSeconds 600) starts the watcher.
    os.environ.pop("REWIND_AUTO_WATCH", None)
    times: dict[str, list[float]] = {name: [] for name in CONFIGS}
    for n in range(runs + 1):
        for i, (name, (_ext, env)) in enumerate(CONFIGS.items()):
            t0 = time.perf_counter()
            runners[name].run(prompt_text(f"p{i}", n), *([] if n == 0 else ["-c"]), env=env)
            if n:  # the first run creates the session (and our private index)
                times[name].append((time.perf_counter() - t0) * 1000)
            elif name in ("no extension", HOSTED):
                first = (time.perf_counter() - t0) * 1000
                print(f"  first run, {name}: {first:.0f} ms", flush=True)
            if n == 0 and name == HOSTED:
                wait_for_watcher(repo)
            time.sleep(pause)  # a user reading the answer: the watcher verifies meanwhile
    # Not a faster run that records less: every prompt of every configuration is recorded.
    for name, runner in runners.items():
        if name == "no extension" or name == SHARED:
            continue
        prompts = (runs + 1) * (2 if name == HOSTED else 1)  # HOSTED's agent dir has SHARED's
        records = sum(
            line.count(b'"customType":"rewind-turn"')
            for path in runner.sessions()
            for line in path.read_bytes().splitlines()
        )
        label = f"{name} + {SHARED}" if name == HOSTED else name
        print(f"  records: {records} rewind-turn for {prompts} prompts ({label})", flush=True)
    return times


def wait_for_watcher(repo: Path) -> None:
    """Until the shared watcher's feed has its base (its first capture after the walk)."""
    from ledger.bridge.snapshot_socket import find_repository, serving

    found = find_repository(repo)
    assert found is not None
    deadline = time.monotonic() + 120
    while not serving(*found):
        if time.monotonic() > deadline:
            raise SystemExit("the shared watcher did not start")
        time.sleep(0.1)
    from ledger.bridge.snapshot_socket import capture_settings_fields, request_capture
    from ledger.settings import SnapshotSettings

    time.sleep(3)  # the watcher's walk of the tree (~1-2 s at 100k files)
    settings = SnapshotSettings()
    fields = capture_settings_fields(settings.max_untracked_file_bytes, settings.protected_dirs)
    for _ in range(2):  # a full scan that gives the feed its base, then a fed one
        request_capture(*found, fields)


def stop_watcher(repo: Path) -> None:
    """End the shared watcher of ``repo`` (it would end by itself after autoWatchSeconds)."""
    import signal

    here = os.path.realpath(repo)
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            if b"--watch" in command and b"serve" in command and os.readlink(proc / "cwd") == here:
                os.kill(int(proc.name), signal.SIGINT)
        except (OSError, ValueError):
            continue


def bridge_start(repo: Path, tmp: Path, runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"feed on": [], "feed off": []}
    for _ in range(runs):
        for name, value in (("feed on", "1"), ("feed off", "0")):
            os.environ["REWIND_FEED"] = value
            try:
                t0 = time.perf_counter()
                bridge = Bridge(repo, tmp / "agent-bridge")
                bridge.event("session_start", {"reason": "startup"})
                times[name].append((time.perf_counter() - t0) * 1000)
                bridge.close()
            finally:
                del os.environ["REWIND_FEED"]
    return times


def watcher_walk(repo: Path, runs: int) -> list[float]:
    from ledger.git.feed.inotify import InotifyWatcher

    times = []
    for _ in range(runs):
        watcher = InotifyWatcher(str(repo))
        t0 = time.perf_counter()
        watcher.start()
        while not watcher.ready and not watcher.failed:
            time.sleep(0.005)
        times.append((time.perf_counter() - t0) * 1000)
        watcher.stop()
    return times


OWN_FEED = {"REWIND_FEED": "1", "REWIND_SERVED": "0", "REWIND_AUTO_WATCH": "0"}


def rpc_sessions(
    cli: Path, repo: Path, tmp: Path, prompts: int, think: float, compare: Path | None = None
) -> tuple[dict[str, list[float]], dict[str, object] | None]:
    status_file = repo / ".git" / "pi-rewind" / "feed-status.json"
    status_file.unlink(missing_ok=True)
    sessions = {
        "no extension": RpcPi(cli, repo, tmp / "agent-rpc-plain", extension=False),
        # Its own feed, as an interactive Pi with no watcher around: not delegated to a shared
        # watcher (REWIND_SERVED=0) and none started (REWIND_AUTO_WATCH=0).
        "extension + own feed": RpcPi(
            cli,
            repo,
            tmp / "agent-rpc-feed",
            extension=True,
            env=OWN_FEED,
        ),
    }
    if compare is not None:
        # The other checkout's extension, and its bridge (its ledger first on the path).
        bridge = [sys.executable, "-m", "ledger", "serve", "--stdio"]
        sessions[f"compare {compare.name}"] = RpcPi(
            cli,
            repo,
            tmp / "agent-rpc-compare",
            "-e",
            str(compare / "tools" / "pi-extension" / "rewind-ledger.ts"),
            extension=False,
            env={**OWN_FEED, "PYTHONPATH": str(compare), "REWIND_BRIDGE_CMD": json.dumps(bridge)},
        )
    times: dict[str, list[float]] = {name: [] for name in sessions}
    try:
        for n in range(prompts + 2):  # two warm-up prompts: the feed is armed after the first
            for i, (name, rpc) in enumerate(sessions.items()):
                t0 = time.perf_counter()
                rpc.prompt(prompt_text(f"r{i}", n))
                path = Path(rpc.state()["sessionFile"])  # both: the same round trips
                if name != "no extension":
                    while path.read_text().count('"customType":"rewind-turn"') < n + 1:
                        time.sleep(0.002)
                if n >= 2:
                    times[name].append((time.perf_counter() - t0) * 1000)
                time.sleep(think)
    finally:
        for rpc in sessions.values():
            rpc.close()
    status = None
    deadline = time.monotonic() + 10
    while status is None and time.monotonic() < deadline:
        try:
            status = json.loads(status_file.read_text())
        except (OSError, ValueError):
            time.sleep(0.1)
    return times, status


def med(values: list[float]) -> float:
    return statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7, help="pi -p runs per configuration")
    parser.add_argument("--prompts", type=int, default=10, help="timed rpc prompts per session")
    parser.add_argument("--think", type=float, default=3.0, help="idle seconds after a prompt")
    parser.add_argument("--skip-print", action="store_true", help="skip the pi -p runs")
    parser.add_argument(
        "--pause", type=float, default=0.0, help="idle seconds after each pi -p run (default 0)"
    )
    parser.add_argument("--only-print", action="store_true", help="only the pi -p runs")
    parser.add_argument("--only-rpc", action="store_true", help="only the per-prompt part (3)")
    parser.add_argument("--repo", type=Path, help="a repository built before (reused, kept)")
    parser.add_argument("--compare", type=Path, help="another checkout, added to part 3")
    args = parser.parse_args()
    cli = ensure_pi()
    tmp = Path(tempfile.mkdtemp(prefix="bench-pi-feed-"))
    try:
        t0 = time.perf_counter()
        repo = args.repo.resolve() if args.repo else build_repo(tmp, args.files, 10)
        print(
            f"repository: {args.files} files, 10 per directory (built in "
            f"{time.perf_counter() - t0:.0f} s); git "
            f"{subprocess.run(['git', 'version'], capture_output=True, text=True).stdout.strip()}; "
            f"{os.cpu_count()} cpus; Pi 0.73.1, scripted model, 2 tool turns (a file written "
            "in each) per prompt; medians",
            flush=True,
        )
        print(f"load at start: {os.getloadavg()}", flush=True)
        if not args.skip_print and not args.only_rpc:
            try:
                runs = print_mode(cli, repo, tmp, args.runs, args.pause)
            finally:
                stop_watcher(repo)
            base = med(runs["no extension"])
            print(
                f"1. pi -p, whole runs (runs {args.runs}, configurations alternated, "
                f"{args.pause:g} s idle after each)"
            )
            for name, values in runs.items():
                extra = "" if name == "no extension" else f"   added {med(values) - base:+6.0f} ms"
                print(f"  {name:28s} {med(values):7.0f} ms{extra}", flush=True)
        if args.only_print:
            return 0
        if not args.only_rpc:
            starts = bridge_start(repo, tmp, args.runs)
            walk = watcher_walk(repo, 3)
            print("2. bridge start (spawn → session_start answered; on Pi's start-up path)")
            for name, values in starts.items():
                print(f"  rewind serve --stdio, {name:9s} {med(values):7.0f} ms", flush=True)
            print(f"  watcher walk (background thread, not awaited)  {med(walk):7.0f} ms")
        rpc, status = rpc_sessions(cli, repo, tmp, args.prompts, args.think, args.compare)
        a = med(rpc["no extension"])
        print(
            f"3. per prompt, one Pi session each (rpc; {args.prompts} prompts alternated, "
            f"{args.think:g} s idle after each; bridge start excluded; load now "
            f"{os.getloadavg()})"
        )
        print(f"  no extension                 {a:7.0f} ms   (the floor)")
        for name, values in rpc.items():
            if name == "no extension":
                continue
            b = med(values)
            print(
                f"  {name:28s} {b:7.0f} ms   added {b - a:+6.0f} ms per prompt "
                f"(x{b / a:.2f} of no extension)"
            )
        print(f"  all samples: {json.dumps({k: [round(v) for v in vs] for k, vs in rpc.items()})}")
        if status is not None:
            keys = ("mode", "fed", "full", "verified", "inconclusive", "fallbacks", "lastFallback")
            print(f"  feed status at the end: {json.dumps({k: status.get(k) for k in keys})}")
        else:
            print("  feed status at the end: none written")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the agent dirs (and a repository built here)
    return 0


if __name__ == "__main__":
    sys.exit(main())
