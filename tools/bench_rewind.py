#!/usr/bin/env python3
"""Benchmark: how fast ``/rewind`` opens (its list) and previews a point, 100k files, 200 points.

Why it exists: issue 24's target "the list opens within 200 ms of the command on a 100k-file
repository with 200 points". What the user waits for is the round trip of the bridge event
``rewind_list`` (docs/pi.md#rewind): the bridge's capture of the work tree (through the warm
change feed, as inside an interactive Pi), its ``session`` calls back to the host, one tree
diff and the user's-own-work check per point, and the JSON answer. So it is timed the way Pi's
extension sees it, on a real ``rewind serve --stdio`` driven by :class:`tests.bridgekit.FakePi`
(the extension's half of the protocol, the session held in memory as Pi holds it; ``hasUI``
true, so the bridge starts its own change feed at the first event like an interactive Pi).

Setup (in a temporary directory, removed at the end): a committed, packed repository
(``tools/bench_feed.py``'s generator, 10 files per directory, ``gc.auto=0``); a session of
``--prompts`` prompts through the bridge, each editing 1–10 files (modified, added, deleted),
one of them 400 files, and hand edits between some prompts (files created and edited outside
the agent, so older points carry the user's own work). That is one user point per prompt and
one assistant point per turn.

Timed (``--runs`` each, after ``--think`` idle seconds so that the feed's idle-time verification
is not running, as when a user types ``/rewind`` after reading an answer):

- ``rewind_list``: from sending the event to reading its result; with the ``ms`` the list
  reports (the engine's own time), the bridge's time from ``REWIND_TRACE`` and the answer's size;
- ``rewind_preview`` for the newest, a middle and the oldest point.

Reference, same run (what a user had before ``/rewind``): ``rewind diff SESSION ENTRY`` (a new
process, full capture) for one point, and the same per-point counts for every point in-process
through the restore plan (``operations.diff``: one capture and one plan per point), plus the
cheapest in-process variant (one capture, ``build_plan`` per point).

The **first** list of a session is reported on its own: once the session is built, its
bridge ends and a fresh ``rewind serve --stdio`` resumes it (``session_start``, its feed
started, ``--think`` idle seconds), and that bridge's first ``rewind_list`` and first preview
of the oldest point are timed (no memoised diffs, authorship index read from disk), beside the
later ones; each with the target (issue 34: the first list ≤ 200 ms, any preview ≤ 200 ms).

``--profile``: ``list_points`` (a fresh engine: the first list) and the oldest point's
``preview`` in-process under cProfile on the same repository and session, with the change feed
on (as in the bridge); prints the top functions.

``--dir DIR``: build the repository and the session there once and reuse them in later runs
(the list and previews are read-only); without it, a temporary directory removed at the end.

Usage::

    python tools/bench_rewind.py --quick      # 10k files, 40 prompts (< 1 min)
    python tools/bench_rewind.py              # 100k files, 200 prompts
    python tools/bench_rewind.py --dir /tmp/rewind-100k --profile

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_feed import build_repo
from bench_floors import leave_no_watcher
from bench_rewind_state import load_state, save_state

from tests.bridgekit import FakePi, Reply

TARGET_MS = 200.0
BIG_PROMPT_FILES = 400
PER_DIR = 10
SLOW_LIST_MS = 10_000.0
"""A first list slower than this caps the timed runs at 3 (unless --runs is given)."""


class TimedPi(FakePi):
    """:class:`FakePi` that remembers the size of the last line it read (the answer)."""

    last_bytes = 0

    def read(self) -> dict[str, Any]:
        import orjson

        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise EOFError(self.proc.stderr.read().decode() if self.proc.stderr else "")
        self.last_bytes = len(line)
        result: dict[str, Any] = orjson.loads(line)
        return result


# --- the session ------------------------------------------------------------------------------


class Workload:
    """Deterministic edits: the agent's per prompt, and the user's by hand between prompts."""

    def __init__(self, repo: Path, prompts: int, seed: int = 24) -> None:
        self.repo = repo
        self.rng = random.Random(seed)
        names = subprocess.run(
            ["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True
        ).stdout.split(b"\0")
        self.pool = [n.decode() for n in names if n.endswith(b".txt")]
        self.rng.shuffle(self.pool)
        self.big = prompts // 2
        self.files_touched = 0

    def _write(self, rel: str, text: str) -> None:
        path = self.repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.files_touched += 1

    def _modify(self, rel: str, tag: str) -> None:
        path = self.repo / rel
        old = path.read_text() if path.exists() else ""
        self._write(rel, old + f"{tag}\n" * self.rng.randint(1, 5))

    def agent(self, n: int) -> Callable[[], None]:
        def act() -> None:
            if n == self.big:
                for rel in self.pool[-BIG_PROMPT_FILES:]:
                    self._modify(rel, f"prompt {n} bulk edit")
                return
            for i in range(self.rng.randint(1, 10)):
                roll = self.rng.random()
                if roll < 0.7:
                    self._modify(self.rng.choice(self.pool[:-BIG_PROMPT_FILES]), f"prompt {n}")
                elif roll < 0.9:
                    rel = f"agent/p{n:03d}/new{i}.txt"
                    self._write(rel, f"made by prompt {n}\n" * 3)
                    self.pool.insert(0, rel)
                else:
                    rel = self.pool.pop(self.rng.randrange(len(self.pool) - BIG_PROMPT_FILES))
                    (self.repo / rel).unlink()
                    self.files_touched += 1

        return act

    def by_hand(self, n: int) -> None:
        """Between prompts: a new file, and two existing files edited, outside the agent."""
        self._write(f"notes/hand-{n:03d}.md", f"my notes before prompt {n}\n")
        for rel in self.rng.sample(self.pool[:-BIG_PROMPT_FILES], 2):
            self._modify(rel, f"edited by hand before prompt {n}")


def build_session(pi: FakePi, work: Workload, prompts: int, hand_every: int) -> list[str]:
    users = []
    for n in range(prompts):
        if n and n % hand_every == 0:
            work.by_hand(n)
        user, _ = pi.prompt(
            f"prompt {n}: change a few files ({'bulk' if n == work.big else n})", work.agent(n)
        )
        users.append(user)
    return users


def wait_for_own_feed(repo: Path, timeout: float = 120.0) -> float:
    """Until the bridge has started its own change feed (no shared watcher runs, so it does
    at its first event when ``hasUI``) and answers other processes' captures from it; the
    feed's walk finishes in the background while the first prompts run."""
    from ledger.bridge.snapshot_socket import find_repository, serving

    found = find_repository(repo)
    assert found is not None
    t0 = time.perf_counter()
    while not serving(*found):
        if time.perf_counter() - t0 > timeout:
            raise SystemExit("the bridge's change feed did not start")
        time.sleep(0.05)
    return time.perf_counter() - t0


# --- measuring ----------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(name: str, values: list[float], extra: str = "") -> str:
    return (
        f"  {name:38s} median {statistics.median(values):8.1f} ms  p90 {pct(values, 0.9):8.1f} ms"
        f"{extra}"
    )


def traced(path: Path, event: str) -> list[dict[str, Any]]:
    """The bridge's ``REWIND_TRACE`` records of ``event``, in order (read once the bridge has
    ended: a record is written after its result)."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return []
    records = [json.loads(line) for line in lines]
    return [r for r in records if r.get("event") == event]


def timed_event(
    pi: TimedPi, name: str, payload: dict[str, Any] | None = None
) -> tuple[float, Reply]:
    t0 = time.perf_counter()
    reply = pi.event(name, payload)
    elapsed = (time.perf_counter() - t0) * 1000
    if reply.error is not None:
        raise SystemExit(f"{name}: {reply.error}")
    return elapsed, reply


def measure_bridge(
    pi: TimedPi, users: list[str], runs: int, think: float, trace: Path
) -> dict[str, Any]:
    points = {"newest": users[-1], "middle": users[len(users) // 2], "oldest": users[0]}
    out: dict[str, Any] = {
        "list": [],
        "list_ms": [],
        "list_bridge": [],
        "list_waited": [],
        "list_bytes": 0,
        "points": 0,
        "own": 0,
    }
    for name in points:
        out[f"preview {name}"] = []
        out[f"preview {name} bytes"] = 0
        out[f"preview {name} files"] = 0
    for _ in range(runs):
        time.sleep(think)
        elapsed, reply = timed_event(pi, "rewind_list")
        listing = reply.result["list"]
        out["list"].append(elapsed)
        out["list_ms"].append(float(listing["ms"]))
        out["list_bytes"] = pi.last_bytes
        out["points"] = len(listing["points"])
        out["own"] = sum(1 for p in listing["points"] if p["own"])
        out["oldest_counts"] = listing["points"][-1]["counts"]["words"]
        for name, entry in points.items():
            time.sleep(think)
            elapsed, reply = timed_event(pi, "rewind_preview", {"entryId": entry})
            out[f"preview {name}"].append(elapsed)
            out[f"preview {name} bytes"] = pi.last_bytes
            counts = reply.result["preview"]["counts"]
            out[f"preview {name} files"] = counts["added"] + counts["modified"] + counts["deleted"]
    return out


def feed_status(repo: Path) -> str:
    """The fed/full capture counts the bridge's feed wrote when it ended (proof the captures of
    the timed events were fed)."""
    path = repo / ".git" / "pi-rewind" / "feed-status.json"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            status = json.loads(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.1)
            continue
        keys = ("mode", "fed", "full", "verified", "inconclusive", "fallbacks")
        return json.dumps({k: status.get(k) for k in keys})
    return "none written"


def cli_diff(repo: Path, agent: Path, session: Path, entry: str, runs: int) -> list[float]:
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent)}
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "ledger", "diff", str(session), entry],
            cwd=repo,
            env=env,
            capture_output=True,
        )
        times.append((time.perf_counter() - t0) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"rewind diff failed: {done.stderr.decode()}")
    return times


def open_engine(repo: Path, agent: Path, session: Path) -> Any:
    from ledger.engine import Engine, FileHost
    from ledger.git.repo import GitRepo
    from ledger.settings import load_settings

    git = GitRepo.discover(repo)
    settings, _ = load_settings(agent, git.root)
    return Engine(FileHost(session, agent / "sessions"), git, settings=settings)


def in_process_plans(engine: Any, users: list[str], runs: int) -> dict[str, list[float]]:
    """Every point's counts the way ``rewind diff`` gets them: a restore plan per point (one
    capture each), and the cheapest variant: one capture, then ``build_plan`` per point."""
    from ledger.engine import operations
    from ledger.git.capture.scan import capture_tree
    from ledger.git.restore.plan import build_plan, resolve_commit

    out: dict[str, list[float]] = {"plan per point": [], "one capture + build_plan": []}
    targets = [engine.resolve_point(u) for u in users]
    for _ in range(runs):
        t0 = time.perf_counter()
        for user in users:
            operations.diff(engine, user)
        out["plan per point"].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        captured = capture_tree(engine.repo, engine.settings.snapshot)
        for target in targets:
            if target is not None:
                build_plan(engine.repo, resolve_commit(engine.repo, target), captured)
        out["one capture + build_plan"].append((time.perf_counter() - t0) * 1000)
    return out


def profile_list(
    repo: Path, agent: Path, session: Path, leaf: str, top: int, oldest: str | None = None
) -> str:
    """One ``list_points`` in-process under cProfile on a fresh engine (a session's first list),
    with the change feed on and warm (its walk over, a base taken), as in the bridge; then, with
    ``oldest``, the preview of that point on another fresh engine."""
    from ledger.engine.preview import list_points, preview
    from ledger.git.capture.scan import capture_tree
    from ledger.git.feed import service as feed

    engine = open_engine(repo, agent, session)
    engine.host.leaf_id = lambda: leaf  # the branch the bridge was on
    feed.enable(verify=False)
    try:
        running = feed.feed_for(engine.repo)
        assert running is not None
        deadline = time.monotonic() + 120
        while not running.watcher.ready and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(2):  # a full scan (the base), then a fed capture
            capture_tree(engine.repo, engine.settings.snapshot)
        profiler = cProfile.Profile()
        t0 = time.perf_counter()
        profiler.enable()
        list_points(engine)
        profiler.disable()
        profiled = (time.perf_counter() - t0) * 1000
        counters = running.counters
        fed = f"feed: {counters.fed} fed, {counters.full} full captures"
        report = _stats(
            profiler,
            top,
            f"list_points in-process (first of an engine), "
            f"{profiled:.0f} ms under cProfile ({fed})",
        )
        if oldest is not None:
            engine = open_engine(repo, agent, session)
            engine.host.leaf_id = lambda: leaf
            profiler = cProfile.Profile()
            t0 = time.perf_counter()
            profiler.enable()
            preview(engine, oldest)
            profiler.disable()
            profiled = (time.perf_counter() - t0) * 1000
            report += _stats(
                profiler,
                top,
                f"preview of the oldest point in-process (first of "
                f"an engine), {profiled:.0f} ms under cProfile",
            )
    finally:
        feed.disable()
    return report


def _stats(profiler: cProfile.Profile, top: int, title: str) -> str:
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top // 2)
    return f"profile: {title}\n" + text.getvalue()


def resume(repo: Path, agent: Path, state: dict[str, Any]) -> TimedPi:
    """A fresh bridge over the saved session (as Pi resuming it: ``session_start``)."""
    pi = TimedPi(repo, agent, entries=state["entries"], session_file=Path(state["session"]))
    pi.header = state["header"]
    pi._ids = int(state["ids"]) + 1000
    return pi


# --- main ---------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k files, 40 prompts")
    parser.add_argument("--files", type=int, default=None, help="default 100000 (quick: 10000)")
    parser.add_argument("--prompts", type=int, default=None, help="default 200 (quick: 40)")
    parser.add_argument("--runs", type=int, default=None, help="default 5 (quick: 3)")
    parser.add_argument(
        "--think", type=float, default=None, help="idle seconds before each timed event"
    )
    parser.add_argument(
        "--ref-runs", type=int, default=None, help="runs of the all-points references (default 1)"
    )
    parser.add_argument("--hand-every", type=int, default=20, help="hand edits every N prompts")
    parser.add_argument("--profile", action="store_true", help="cProfile list_points in-process")
    parser.add_argument("--dir", default=None, help="build the repository and session here once")
    parser.add_argument(
        "--no-reference", action="store_true", help="skip the references (minutes at 100k)"
    )
    args = parser.parse_args()
    files = args.files or (10_000 if args.quick else 100_000)
    prompts = args.prompts or (40 if args.quick else 200)
    runs = args.runs or (3 if args.quick else 5)
    think = args.think if args.think is not None else (0.3 if args.quick else 2.5)
    hand_every = min(args.hand_every, max(2, prompts // 4))

    keep = args.dir is not None
    tmp = Path(args.dir) if keep else Path(tempfile.mkdtemp(prefix="bench-rewind-"))
    tmp.mkdir(parents=True, exist_ok=True)
    trace = tmp / "trace.jsonl"
    trace.unlink(missing_ok=True)
    os.environ["REWIND_TRACE"] = str(trace)
    key = f"{files} {prompts} {hand_every}"
    state = load_state(tmp, key) if keep else None
    agent = tmp / "agent"
    pi: TimedPi | None = None
    try:
        git_version = subprocess.run(["git", "version"], capture_output=True, text=True).stdout
        if state is None:
            shutil.rmtree(agent, ignore_errors=True)
            t0 = time.perf_counter()
            repo = build_repo(tmp, files, PER_DIR)
            built = time.perf_counter() - t0
            print(
                f"repository: {files} files, {PER_DIR} per directory, committed and packed "
                f"(built in {built:.0f} s); {git_version.strip()}; {os.cpu_count()} cpus, load "
                f"average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            pi = TimedPi(repo, agent)
            if pi.event("session_start", {"reason": "startup"}).error is not None:
                raise SystemExit("session_start failed")
            wait_for_own_feed(repo)
            work = Workload(repo, prompts)
            t0 = time.perf_counter()
            users = build_session(pi, work, prompts, hand_every)
            session_s = time.perf_counter() - t0
            session = pi.write_file()
            assistants = sum(
                1
                for e in pi.entries
                if e["type"] == "message" and e["message"]["role"] == "assistant"
            )
            print(
                f"session: {prompts} prompts through a real bridge (own change feed) in "
                f"{session_s:.0f} s ({session_s / prompts * 1000:.0f} ms a prompt): "
                f"{len(users)} user points, {assistants} assistant points, {work.files_touched} "
                f"file writes/deletes (one prompt {BIG_PROMPT_FILES} files), hand edits every "
                f"{hand_every} prompts; {len(pi.entries)} entries",
                flush=True,
            )
            save_state(tmp, pi, users, key, work.files_touched)
            pi.close()
            pi = None
            state = load_state(tmp, key)
            assert state is not None
        else:
            repo = tmp / f"feed-{files}"
            users = list(state["users"])
            session = Path(state["session"])
            print(
                f"repository and session reused from {tmp}: {files} files, {prompts} prompts, "
                f"{len(state['entries'])} entries; {git_version.strip()}; {os.cpu_count()} cpus, "
                f"load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        # The session's first list: a fresh bridge resumes it, as Pi does when it starts.
        # (Its own warm-up line, not the one of the bridge that built the session.)
        earlier_warm_ups = len(traced(trace, "warm-up"))
        pi = resume(repo, agent, state)
        t0 = time.perf_counter()
        if pi.event("session_start", {"reason": "resume"}).error is not None:
            raise SystemExit("session_start failed")
        started = (time.perf_counter() - t0) * 1000
        fed_in = wait_for_own_feed(repo)
        leaf = pi.leaf
        assert leaf is not None
        t0 = time.perf_counter()
        time.sleep(think)
        first, _ = timed_event(pi, "rewind_list")
        time.sleep(think)
        first_preview, reply = timed_event(pi, "rewind_preview", {"entryId": users[0]})
        counts = reply.result["preview"]["counts"]
        first_files = counts["added"] + counts["modified"] + counts["deleted"]
        verdict = {True: "met", False: "MISSED"}
        warmed = traced(trace, "warm-up")[earlier_warm_ups:]
        warm_up = (
            f"its warm-up {float(warmed[0]['ms']):.0f} ms, {warmed[0]['levels']} tree levels read"
            if warmed
            else "its warm-up not finished by the first preview"
        )
        print(
            f"a fresh bridge (session_start {started:.0f} ms, its feed serving after "
            f"{fed_in:.1f} s, then {think:g} s idle; {warm_up}), load "
            f"{os.getloadavg()[0]:.1f}:\n"
            f"  first rewind_list of the session      {first:8.1f} ms   (target "
            f"{TARGET_MS:.0f} ms: {verdict[first <= TARGET_MS]})\n"
            f"  first rewind_preview, oldest point    {first_preview:8.1f} ms   ({first_files} "
            f"files; target {TARGET_MS:.0f} ms: {verdict[first_preview <= TARGET_MS]})",
            flush=True,
        )
        if first > SLOW_LIST_MS and args.runs is None and runs > 3:
            runs = 3  # keeps the full mode within ~10 minutes while the list takes seconds
            print(f"  (over {SLOW_LIST_MS / 1000:.0f} s: {runs} timed runs instead of 5)")
        bridge = measure_bridge(pi, users, runs, think, trace)
        pi.close()
        pi = None
        lists = traced(trace, "rewind_list")[-runs:]  # the later ones (not the first)
        bridge["list_bridge"] = [float(r["ms"]) for r in lists]
        bridge["list_waited"] = [float(r["hostMs"]) for r in lists]
        status = feed_status(repo)

        print(
            f"/rewind later in the same bridge ({runs} runs, {think:g} s idle before each; wall time "
            "from sending the event to reading its result):"
        )
        lst = bridge["list"]
        print(
            row(
                "rewind_list (later)",
                lst,
                f"   ({bridge['points']} points, {bridge['own']} with own work, "
                f"{bridge['list_bytes'] / 1024:.0f} KiB answer; target {TARGET_MS:.0f} ms: "
                f"{'met' if statistics.median(lst) <= TARGET_MS else 'MISSED'})",
            )
        )
        print(row("  its own 'ms' (engine)", bridge["list_ms"]))
        if bridge["list_bridge"]:
            print(row("  bridge time (REWIND_TRACE)", bridge["list_bridge"]))
            print(row("  of which waiting for host calls", bridge["list_waited"]))
        for name in ("newest", "middle", "oldest"):
            key = f"preview {name}"
            print(
                row(
                    f"rewind_preview {name}",
                    bridge[key],
                    f"   ({bridge[key + ' files']} files, {bridge[key + ' bytes'] / 1024:.1f} KiB)",
                )
            )
        print(f"  oldest point restores: {bridge['oldest_counts']}")
        print(f"  bridge's feed at the end: {status}", flush=True)

        if not args.no_reference:
            print("reference (what a user had before /rewind):")
            middle = users[len(users) // 2]
            cli = cli_diff(repo, agent, session, middle, runs)
            print(row("rewind diff SESSION ENTRY (CLI, 1 point)", cli), flush=True)
            engine = open_engine(repo, agent, session)
            ref_runs = args.ref_runs or (3 if args.quick else 1)
            plans = in_process_plans(engine, users, ref_runs)
            for name, values in plans.items():
                print(row(f"{name}, all {len(users)} points", values, f"   ({ref_runs} runs)"))
            med_list = statistics.median(lst)
            print("ratios (reference median / rewind_list median; below 1: the list is slower):")
            ratios = {"rewind diff, one point": cli} | {
                f"{k}, all points": v for k, v in plans.items()
            }
            for name, values in ratios.items():
                print(f"  {name:40s} {statistics.median(values) / med_list:8.2f}x")
        if args.profile:
            print(profile_list(repo, agent, session, leaf, 25, oldest=users[0]))
        print(
            f"total {time.perf_counter() - t0:.0f} s of measuring; load average at the end "
            f"{os.getloadavg()[0]:.1f}",
            flush=True,
        )
    finally:
        if pi is not None:
            pi.close()
        leave_no_watcher(tmp / f"feed-{files}")
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
