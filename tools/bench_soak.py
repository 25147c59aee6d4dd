#!/usr/bin/env python3
"""Benchmark: a simulated long life of rewind inside Pi (issue 26) — what grows, and how fast.

Why it exists: the other benches time one operation on a fresh store. Months of use add up:
thousands of snapshots, loose objects, session files, forks and resumes. This drives a REAL
bridge (``python -m ledger serve --stdio``, spoken to as tests/bridgekit.py's FakePi does, with
``hasUI`` true so the change feed runs as inside Pi) through many prompts and, at checkpoints,
measures the store on disk and the cost of every command a user runs.

Two scenarios, each from scratch in a temp dir (its own HOME and agent dir; never ~/.pi):

- ``repo``: a git repository (``--files`` text files, committed and packed);
- ``shadow``: the same tree as a plain directory (snapshots in a shadow repository under the
  agent dir: docs/shadow.md).

One prompt = Pi's events ``before_agent_start``, ``turn_start`` (the pre-prompt snapshot), the
agent's edits, ``turn_end`` (a capture) and ``agent_end`` (a capture). The mix (seeded): 1–10
text files edited per turn; adds (30 %), deletes (10 %), renames (8 %); a user's own edit between
prompts (10 %); a 1 MB random binary rewritten (2 %); a generated 400-file turn every
``--gen-every`` prompts. Sessions last 60–240 prompts, then end (``session_shutdown``) and the
next one is a new session (45 %), a resumed earlier one (30 %: a new bridge on its file) or a fork
of the current one (25 %: ``session_before_fork`` "Conversation only", then the child's
``session_start{fork}``: tests/bridgekit.py fork_child). Before every new bridge, ``rewind
sweep`` runs as a new process; with ``--retention`` (default ``{}``: on, with this version's
defaults) the bridge itself sweeps at session start, every 50 snapshots and at shutdown
(ledger/retention/scheduler.py).

At each checkpoint (prompt 100, then every ``--every`` prompts, and the last) the session ends;
then: the bridge's RSS (VmRSS/VmHWM, read just before it ends) and the shared watcher's, cold ``rewind snapshot``
(``REWIND_SERVED=0``, a new process, ``--cli-samples`` times, one file changed before each),
``rewind restore SESSION ENTRY --mode files --yes`` to ~10 prompts back and ``rewind undo
SESSION --yes``, ``rewind sweep SESSION``, ``rewind doctor``, and the store on disk: loose
objects (count, bytes, du), packs (count, bytes), temporary files left by git or by us
(``tmp_pack_*``, ``tmp_obj_*``, ``tmp_idx_*``, ``.tmp-*``), our private files
(``<git-dir>/pi-rewind/``), the whole shadow home, session files. Capture times are those of the
prompts since the previous checkpoint, measured in this process from sending ``turn_end`` to its
result. The session then resumes on a new bridge. At the end a copy of the git directory is
compacted with ``git gc --aggressive --prune=now`` for comparison.

Usage::

    python tools/bench_soak.py --quick                      # ~2k files, 200 prompts, < 2 min
    python tools/bench_soak.py --prompts 1000 --files 20000 --json soak.json
    python tools/bench_soak.py                              # 5,000 prompts, 20k files, both

Not a test: nothing here asserts a time. The machine is usually shared: timings are medians and
percentiles of one run, not controlled measurements.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger.engine import messages as M
from tests.bridgekit import FakePi, fork_child
from tools.soak_world import Mutator, build_tree

RESTORE_BACK = 10
"""A checkpoint restores the files to this many prompts back."""
TMP_PREFIXES = ("tmp_pack_", "tmp_obj_", "tmp_idx_", ".tmp-", "tmp_rev_", "tmp_bitmap_")


@dataclass
class Knobs:
    prompts: int
    files: int
    every: int
    gen_every: int
    cli_samples: int
    retention: dict[str, Any] | None
    gc: bool
    keep: bool
    seed: int
    session_range: tuple[int, int]


# --- the store on disk ----------------------------------------------------------------------


def _walk(root: Path) -> tuple[int, int, int]:
    """(files, bytes, du bytes) under ``root``."""
    n = size = du = 0
    for base, _dirs, names in os.walk(root):
        for name in names:
            try:
                st = os.lstat(os.path.join(base, name))
            except OSError:
                continue
            n, size, du = n + 1, size + st.st_size, du + st.st_blocks * 512
    return n, size, du


def store_usage(git_dir: Path, home: Path | None, sessions: Path) -> dict[str, int]:
    objects = git_dir / "objects"
    out: dict[str, int] = collections.defaultdict(int)
    for base, _dirs, names in os.walk(git_dir):
        for name in names:
            if name.startswith(TMP_PREFIXES):
                out["tmp_files"] += 1
                out["tmp_bytes"] += os.lstat(os.path.join(base, name)).st_size
    for sub in objects.iterdir() if objects.is_dir() else ():
        if len(sub.name) == 2 and sub.is_dir():
            for entry in os.scandir(sub):
                if not entry.name.startswith("tmp_"):
                    st = entry.stat(follow_symlinks=False)
                    out["loose"] += 1
                    out["loose_bytes"] += st.st_size
                    out["loose_du"] += st.st_blocks * 512
    pack_dir = objects / "pack"
    for entry in os.scandir(pack_dir) if pack_dir.is_dir() else ():
        if entry.name.startswith(TMP_PREFIXES):
            continue
        st = entry.stat(follow_symlinks=False)
        out["packs"] += entry.name.endswith(".pack")
        out["pack_bytes"] += st.st_size  # .pack, .idx, .rev, .bitmap: the packs' whole cost
    out["private_files"], out["private_bytes"], _ = _walk(git_dir / "pi-rewind")
    _, out["git_dir_bytes"], out["git_dir_du"] = _walk(git_dir)
    if home is not None:
        _, out["home_bytes"], out["home_du"] = _walk(home)
    out["session_files"], out["session_bytes"], _ = _walk(sessions)
    return dict(out)


# --- the Pi side ----------------------------------------------------------------------------


def _drain(stream: IO[bytes] | None, tail: collections.deque[bytes]) -> None:
    """Read the bridge's stderr so that it can never fill the pipe and block the bridge."""
    if stream is None:
        return
    try:
        for line in stream:
            tail.append(line)
    except (OSError, ValueError):
        pass


def rss_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in kB, (0, 0) when it is gone."""
    found = {"VmRSS:": 0, "VmHWM:": 0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key = line.split(maxsplit=1)[0] if line else ""
            if key in found:
                found[key] = int(line.split()[1])
    except OSError:
        pass
    return found["VmRSS:"], found["VmHWM:"]


def watchers(work: Path) -> list[int]:
    """Pids of ``rewind serve --watch`` processes of ``work`` (a bridge may start one: the
    shared watcher, docs/capture.md#shared-watcher); they are this run's own processes."""
    here, found = os.path.realpath(work), []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            if b"--watch" in command and b"serve" in command and os.readlink(proc / "cwd") == here:
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


@dataclass
class Window:
    """Samples since the previous checkpoint."""

    turn_start: list[float] = field(default_factory=list)
    turn_end: list[float] = field(default_factory=list)
    agent_end: list[float] = field(default_factory=list)
    session_start: list[float] = field(default_factory=list)
    shutdown: list[float] = field(default_factory=list)
    sweep_cli: list[float] = field(default_factory=list)
    warnings: collections.Counter[str] = field(default_factory=collections.Counter)


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Life:
    """One scenario's life: the tree, the agent dir, the current Pi session and its bridge."""

    def __init__(self, kind: str, base: Path, knobs: Knobs) -> None:
        self.kind, self.knobs = kind, knobs
        self.rng = random.Random(knobs.seed)
        self.work = base / "work"
        self.agent = base / "agent"
        self.agent.mkdir(parents=True)
        self.work.mkdir()
        if knobs.retention is not None:
            settings = {"rewind": {"retention": knobs.retention}}
            (self.agent / "settings.json").write_text(json.dumps(settings))
        t0 = time.perf_counter()
        paths = build_tree(self.work, knobs.files, self.rng)
        if kind == "repo":
            self.git("init", "-q")
            self.git("add", "-A")
            self.git("commit", "-qm", "initial")
            self.git("repack", "-adq")
        self.build_s = time.perf_counter() - t0
        self.mutator = Mutator(self.work, paths, self.rng, knobs.gen_every)
        self.env = {**os.environ, "PI_CODING_AGENT_DIR": str(self.agent)}
        self.pi: FakePi | None = None
        self.users: list[str] = []  # the current session's user entries
        self.ended: list[Path] = []  # session files that ended, for resumes
        self.window = Window()
        self.stderr_tail: collections.deque[bytes] = collections.deque(maxlen=20)
        self.git_dir: Path | None = None
        self.home: Path | None = None
        self.session_left = 0

    def git(self, *args: str, git_dir: Path | None = None) -> str:
        pre = [f"--git-dir={git_dir}"] if git_dir else []
        return subprocess.run(
            ["git", *pre, *args], cwd=self.work, capture_output=True, text=True, check=True
        ).stdout

    def rewind(self, *args: str, env: dict[str, str] | None = None) -> tuple[float, int, str]:
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "ledger", *args],
            cwd=self.work,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
        )
        ms = (time.perf_counter() - t0) * 1000
        if done.returncode != 0:
            first = (done.stderr.strip() or done.stdout.strip()).splitlines()[:1]
            self.window.warnings[f"rewind {args[0]} exit {done.returncode}: {first}"] += 1
        return ms, done.returncode, done.stdout

    def locate(self) -> None:
        """The git directory that holds the snapshots (and, for a shadow, its home)."""
        if self.kind == "repo":
            self.git_dir = self.work / ".git"
            return
        homes = list((self.agent / "rewind" / "shadow").glob("*/git"))
        if len(homes) == 1:
            self.git_dir, self.home = homes[0], homes[0].parent

    # --- sessions ---------------------------------------------------------------------------

    def _started(self, pi: FakePi, reason: str, previous: Path | None = None) -> None:
        threading.Thread(
            target=_drain, args=(pi.proc.stderr, self.stderr_tail), daemon=True
        ).start()
        payload: dict[str, Any] = {"reason": reason}
        if previous is not None:
            payload["previousSessionFile"] = str(previous)
        t0 = time.perf_counter()
        try:
            self.note(pi.event("session_start", payload))
        except EOFError:
            time.sleep(0.5)
            tail = b"".join(self.stderr_tail).decode(errors="replace")
            raise SystemExit(f"the bridge ended at session_start ({reason}):\n{tail}") from None
        self.window.session_start.append((time.perf_counter() - t0) * 1000)
        self.pi = pi
        lo, hi = self.knobs.session_range
        self.session_left = self.rng.randint(lo, hi)
        if self.git_dir is None:
            self.locate()

    def note(self, reply: Any) -> None:
        for notice in reply.notices:
            if notice["level"] != "info":
                self.window.warnings[notice["text"][:160]] += 1
        if reply.error is not None:
            self.window.warnings[f"bridge error: {reply.error}"[:160]] += 1

    def sweep_cli(self, session: Path | None) -> None:
        if self.git_dir is not None:  # a shadow exists only after the first bridge made it
            self.window.sweep_cli.append(
                self.rewind("sweep", *([str(session)] if session else []))[0]
            )

    def start_new(self) -> None:
        self.sweep_cli(self.ended[-1] if self.ended else None)
        pi = FakePi(self.work, self.agent)
        self.users = []
        self._started(pi, "new" if self.ended else "startup")

    def resume(self, path: Path) -> None:
        self.sweep_cli(path)
        lines = path.read_bytes().splitlines()
        entries = [orjson.loads(line) for line in lines[1:] if line.strip()]
        pi = FakePi(self.work, self.agent, entries=entries, session_file=path)
        pi.header = orjson.loads(lines[0])
        ids = [int(e["id"], 16) for e in entries if _is_hex(e.get("id"))]
        pi._ids = max(ids, default=0) + 1
        self.users = [
            e["id"]
            for e in entries
            if e["type"] == "message" and e["message"].get("role") == "user"
        ]
        self._started(pi, "resume")

    def end(self, reason: str = "quit") -> Path:
        pi = self.pi
        assert pi is not None
        t0 = time.perf_counter()
        self.note(pi.event("session_shutdown", {"reason": reason}))
        pi.close()  # the bridge ends after its shutdown sweep: part of the cost
        self.window.shutdown.append((time.perf_counter() - t0) * 1000)
        path = pi.write_file()
        if path not in self.ended:
            self.ended.append(path)
        self.pi = None
        return path

    def fork(self) -> None:
        parent = self.pi
        assert parent is not None and len(self.users) > 2
        target = self.rng.choice(self.users[len(self.users) // 2 :])
        parent.choices = [M.FORK_CONVERSATION_ONLY]
        self.note(parent.event("session_before_fork", {"entryId": target, "position": "before"}))
        self.end("fork")
        at = next(i for i, e in enumerate(parent.entries) if e["id"] == target)
        child = fork_child(parent, parent.entries[:at])
        self.users = self.users[: self.users.index(target)]
        self.sweep_cli(parent.session_file)
        self._started(child, "fork", parent.session_file)

    def next_session(self) -> None:
        roll = self.rng.random()
        if roll < 0.25 and len(self.users) > 2:
            self.fork()
            return
        self.end()
        if roll < 0.55 and len(self.ended) > 1:
            self.resume(self.rng.choice(self.ended))
        else:
            self.start_new()

    def prompt(self, n: int) -> None:
        pi = self.pi
        assert pi is not None
        if self.rng.random() < 0.10:
            self.mutator.user_edit()
        w = self.window
        self.note(pi.event("before_agent_start", {"prompt": f"prompt {n}"}))
        t0 = time.perf_counter()
        self.note(pi.event("turn_start", {"turnIndex": 0}))
        w.turn_start.append((time.perf_counter() - t0) * 1000)
        self.users.append(pi.user(f"prompt {n}"))
        self.mutator.turn(n)
        pi.assistant(f"done {n}")
        t0 = time.perf_counter()
        self.note(pi.event("turn_end", {"turnIndex": 0, "role": "assistant"}))
        w.turn_end.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        self.note(pi.event("agent_end", {}))
        w.agent_end.append((time.perf_counter() - t0) * 1000)
        self.session_left -= 1

    # --- checkpoints ------------------------------------------------------------------------

    def checkpoint(self, n: int, elapsed: float, baseline: dict[str, int]) -> dict[str, Any]:
        pi = self.pi
        assert pi is not None and isinstance(pi.proc, subprocess.Popen)  # a bridge process
        rss, hwm = rss_kb(pi.proc.pid)
        watcher_kb = [rss_kb(pid)[0] for pid in watchers(self.work)]
        cold = []
        for _ in range(self.knobs.cli_samples):
            self.mutator.user_edit()
            cold.append(self.rewind("snapshot", env={"REWIND_SERVED": "0"})[0])
        target = self.users[-min(RESTORE_BACK, len(self.users))]
        path = self.end()
        restore_ms, code, _ = self.rewind("restore", str(path), target, "--mode", "files", "--yes")
        undo_ms, code2, _ = self.rewind("undo", str(path), "--yes")
        sweep_ms = self.rewind("sweep", str(path))[0]
        doctor_ms, _, _ = self.rewind("doctor")
        assert self.git_dir is not None
        usage = store_usage(self.git_dir, self.home, self.agent / "sessions")
        store = self.git("rev-list", "--count", "refs/pi-rewind/store", git_dir=self.git_dir)
        w = self.window
        total = usage["git_dir_bytes"] + usage["session_bytes"]
        # From the end of prompt 1: the first snapshot (a shadow's whole tree) is shown apart.
        grown = total - baseline.get("git_dir_bytes", 0) - baseline.get("session_bytes", 0)
        row = {
            "prompt": n,
            "elapsed_s": round(elapsed, 1),
            "sessions": len(self.ended),
            "branch_prompts": len(self.users),
            "store_commits": int(store.strip()),
            **usage,
            "bytes_per_prompt": round(grown / max(1, n - 1)),
            "turn_end_p50": pct(w.turn_end, 0.5),
            "turn_end_p99": pct(w.turn_end, 0.99),
            "turn_end_max": max(w.turn_end, default=None),
            "turn_start_p50": pct(w.turn_start, 0.5),
            "turn_start_p99": pct(w.turn_start, 0.99),
            "agent_end_p50": pct(w.agent_end, 0.5),
            "session_start_p50": pct(w.session_start, 0.5),
            "shutdown_p50": pct(w.shutdown, 0.5),
            "shutdown_max": max(w.shutdown, default=None),
            "cli_snapshot_ms": cold,
            "cli_snapshot_p50": statistics.median(cold) if cold else None,
            "restore_ms": restore_ms,
            "undo_ms": undo_ms,
            "restore_ok": code == 0 and code2 == 0,
            "sweep_ms": sweep_ms,
            "sweep_cli_ms": [*w.sweep_cli, sweep_ms],
            "doctor_ms": doctor_ms,
            "rss_kb": rss,
            "hwm_kb": hwm,
            "watcher_rss_kb": watcher_kb,
            "warnings": dict(w.warnings),
        }
        self.window = Window()
        self.resume(path)
        return row

    def compact(self) -> dict[str, Any]:
        """``git gc --aggressive --prune=now`` on a copy of the git directory."""
        assert self.git_dir is not None
        copy = self.work.parent / "gc-copy.git"
        shutil.copytree(self.git_dir, copy, symlinks=True)
        before = store_usage(copy, None, self.agent / "sessions")
        t0 = time.perf_counter()
        self.git("gc", "--aggressive", "--prune=now", "-q", git_dir=copy)
        seconds = time.perf_counter() - t0
        after = store_usage(copy, None, self.agent / "sessions")
        shutil.rmtree(copy)

        def objects(u: dict[str, int]) -> int:
            return u.get("loose_bytes", 0) + u.get("pack_bytes", 0)

        def disk(u: dict[str, int]) -> int:  # loose objects cost whole blocks
            return u.get("loose_du", 0) + u.get("pack_bytes", 0)

        return {
            "before": before,
            "after": after,
            "objects_before": objects(before),
            "objects_after": objects(after),
            "ratio": objects(before) / max(1, objects(after)),
            "disk_before": disk(before),
            "disk_after": disk(after),
            "disk_ratio": disk(before) / max(1, disk(after)),
            "seconds": round(seconds, 1),
        }


def _is_hex(value: Any) -> bool:
    try:
        int(value, 16)
    except (TypeError, ValueError):
        return False
    return True


# --- the run --------------------------------------------------------------------------------


def checkpoints(prompts: int, every: int) -> list[int]:
    marks = set(range(every, prompts + 1, every)) | {prompts}
    if prompts >= 100 and every > 100:
        marks.add(100)
    return sorted(marks)


def run(kind: str, tmp: Path, knobs: Knobs) -> dict[str, Any]:
    base = tmp / kind
    life = Life(kind, base, knobs)
    print(f"\n== {kind}: {knobs.files} files (built in {life.build_s:.1f} s)", flush=True)
    print(HEADER, flush=True)
    marks = set(checkpoints(knobs.prompts, knobs.every))
    life.mutator.avoid = {m - k for m in marks for k in range(RESTORE_BACK + 2)}
    life.start_new()
    assert life.git_dir is not None, f"no git directory found for {kind}"
    before = store_usage(life.git_dir, life.home, life.agent / "sessions")
    baseline: dict[str, int] = {}
    rows = []
    t_start = time.perf_counter()
    for n in range(1, knobs.prompts + 1):
        life.prompt(n)
        if n == 1:
            baseline = store_usage(life.git_dir, life.home, life.agent / "sessions")
            first = {k: baseline.get(k, 0) - before.get(k, 0) for k in baseline}
            print(
                f"  first snapshot: +{first.get('loose', 0)} loose objects, "
                f"+{mb(first.get('git_dir_bytes', 0))} MB (du +{mb(first.get('git_dir_du', 0))} "
                f"MB); turn_start of prompt 1 {life.window.turn_start[0]:.0f} ms",
                flush=True,
            )
        if n in marks:
            rows.append(life.checkpoint(n, time.perf_counter() - t_start, baseline))
            print(format_row(rows[-1]), flush=True)
        elif life.session_left <= 0:
            life.next_session()
    life.end()
    feed_status = _feed_status(life.git_dir)
    result: dict[str, Any] = {
        "scenario": kind,
        "files": knobs.files,
        "before_first_prompt": before,
        "after_first_prompt": baseline,
        "rows": rows,
        "feed_status": feed_status,
        "stderr_tail": [line.decode(errors="replace").rstrip() for line in life.stderr_tail],
    }
    warnings: collections.Counter[str] = collections.Counter()
    for row in rows:
        warnings.update(row["warnings"])
    if warnings:
        print("  warnings/errors seen (count: text):")
        for text_, count in warnings.most_common(8):
            print(f"    {count:5d}: {text_}")
    if feed_status:
        keys = ("mode", "fed", "full", "verified", "inconclusive", "fallbacks", "lastFallback")
        print(f"  feed status (last bridge): {json.dumps({k: feed_status.get(k) for k in keys})}")
    for pid in watchers(life.work):  # one a bridge of this run started: stop it by its pid
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGINT)
    if knobs.gc:
        result["gc"] = gc = life.compact()
        print(
            f"  git gc --aggressive on a copy ({gc['seconds']} s): objects "
            f"{mb(gc['objects_before'])} MB ({gc['before'].get('loose', 0)} loose, "
            f"{gc['before'].get('packs', 0)} packs) -> {mb(gc['objects_after'])} MB "
            f"({gc['after'].get('packs', 0)} packs), ratio {gc['ratio']:.1f}x; on disk "
            f"{mb(gc['disk_before'])} -> {mb(gc['disk_after'])} MB, {gc['disk_ratio']:.1f}x",
            flush=True,
        )
    if not knobs.keep:
        shutil.rmtree(base, ignore_errors=True)
    result["wall_s"] = round(time.perf_counter() - t_start, 1)
    print(f"  {kind}: {result['wall_s']:.0f} s from the first prompt to the end", flush=True)
    return result


def _feed_status(git_dir: Path | None) -> dict[str, Any] | None:
    try:
        return json.loads((git_dir / "pi-rewind" / "feed-status.json").read_text())  # type: ignore[operator]
    except (OSError, ValueError, TypeError):
        return None


def mb(value: int | None) -> str:
    return "-" if value is None else f"{value / 1e6:.1f}"


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


HEADER = (
    f"{'prompt':>6} {'min':>5} {'branch':>6} {'snaps':>6} {'loose':>7} {'looseMB':>7} {'du MB':>6} "
    f"{'packs':>5} {'packMB':>6} {'tmp':>4} {'privMB':>6} {'homeMB':>6} {'sessMB':>6} "
    f"{'B/prompt':>8} {'te50':>5} {'te99':>5} {'ts50':>5} {'cli':>5} {'rest':>5} {'undo':>5} "
    f"{'sweep':>6} {'doctor':>6} {'start':>5} {'rssMB':>5} {'hwmMB':>5} {'wrssMB':>6}"
)


def format_row(r: dict[str, Any]) -> str:
    home = r.get("home_du", r.get("git_dir_du"))
    return (
        f"{r['prompt']:>6} {r['elapsed_s'] / 60:>5.1f} {r['branch_prompts']:>6} "
        f"{r['store_commits']:>6} "
        f"{r.get('loose', 0):>7} {mb(r.get('loose_bytes', 0)):>7} {mb(r.get('loose_du', 0)):>6} "
        f"{r.get('packs', 0):>5} {mb(r.get('pack_bytes', 0)):>6} {r.get('tmp_files', 0):>4} "
        f"{mb(r.get('private_bytes', 0)):>6} {mb(home):>6} {mb(r.get('session_bytes', 0)):>6} "
        f"{r['bytes_per_prompt']:>8} {ms(r['turn_end_p50']):>5} {ms(r['turn_end_p99']):>5} "
        f"{ms(r['turn_start_p50']):>5} {ms(r['cli_snapshot_p50']):>5} {ms(r['restore_ms']):>5} "
        f"{ms(r['undo_ms']):>5}{'' if r['restore_ok'] else '!'} {ms(r['sweep_ms']):>6} "
        f"{ms(r['doctor_ms']):>6} {ms(r['session_start_p50']):>5} {r['rss_kb'] / 1024:>5.0f} "
        f"{r['hwm_kb'] / 1024:>5.0f} {watcher_mb(r):>6}"
    )


def watcher_mb(r: dict[str, Any]) -> str:
    """The shared watcher's VmRSS in MB (``-``: none ran; a sum if a restart left two)."""
    found = r.get("watcher_rss_kb") or []
    return f"{sum(found) / 1024:.0f}" if found else "-"


LEGEND = """columns: prompt; min = minutes since the first prompt; branch = prompts on the
branch of the session restored (restore and undo read the whole branch); snaps = commits in
refs/pi-rewind/store (snapshots + keepalives); loose / looseMB / du MB = loose objects (count,
bytes, disk blocks); packs / packMB = packs (count; .pack+.idx+.rev bytes); tmp = temporary
files left in the git dir (tmp_pack_*, tmp_obj_*, .tmp-*); privMB = <git-dir>/pi-rewind/;
homeMB = disk use of the shadow's home (repo: of .git); sessMB = session files; B/prompt =
(git dir + session files - after prompt 1) / (prompts - 1); te50/te99 = turn_end p50/p99 ms (bridge,
prompts since the last row); ts50 = turn_start p50 ms; cli = cold `rewind snapshot` p50 ms;
rest/undo = `rewind restore --mode files --yes` / `rewind undo --yes` ms (! = one failed);
sweep/doctor = `rewind sweep` / `rewind doctor` ms; start = session_start p50 ms; rssMB/hwmMB =
the bridge's VmRSS / VmHWM just before its session ended; wrssMB = the VmRSS of the repository's
shared watcher (`rewind serve --watch`, started by the first bridge: it serves the bridges'
captures and lives on), read at the same moment."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI size: 2k files, 200 prompts")
    parser.add_argument("--prompts", type=int, help="prompts per scenario (default 5000)")
    parser.add_argument("--files", type=int, help="files in the tree (default 20000)")
    parser.add_argument("--every", type=int, help="prompts between checkpoints (default 500)")
    parser.add_argument("--gen-every", type=int, help="a 400-file turn every N prompts (300)")
    parser.add_argument("--cli-samples", type=int, default=3, help="cold snapshots per row")
    parser.add_argument(
        "--scenario", choices=("repo", "shadow", "both"), default="both", help="default both"
    )
    parser.add_argument(
        "--retention",
        default="{}",
        help="rewind.retention as JSON in the agent settings, or 'off' (default {}: on)",
    )
    parser.add_argument("--no-gc", action="store_true", help="skip git gc --aggressive at the end")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (path printed)")
    parser.add_argument("--json", type=Path, help="write every number to this file")
    args = parser.parse_args(argv)
    quick = args.quick
    knobs = Knobs(
        prompts=args.prompts or (200 if quick else 5000),
        files=args.files or (2000 if quick else 20000),
        every=args.every or (100 if quick else 500),
        gen_every=args.gen_every if args.gen_every is not None else (60 if quick else 300),
        cli_samples=args.cli_samples,
        retention=None if args.retention == "off" else json.loads(args.retention),
        gc=not args.no_gc,
        keep=args.keep,
        seed=args.seed,
        session_range=(15, 60) if quick else (60, 240),
    )
    kinds = ["repo", "shadow"] if args.scenario == "both" else [args.scenario]
    tmp = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    home = tmp / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Bench\n\temail = bench@example.com\n")
    # Never the real HOME, ~/.pi or the user's git config: every process of the run sees these.
    # PYTHONPATH: the bridges and CLI runs use the ledger of this checkout, the one this script
    # imports, not whatever copy the interpreter has installed (an editable install elsewhere).
    os.environ.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "PYTHONPATH": os.pathsep.join(
                [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
    )
    for key in ("PI_CODING_AGENT_DIR", "REWIND_FEED", "REWIND_SERVED", "REWIND_HOSTED"):
        os.environ.pop(key, None)
    # Bytecode caches, as an installed package has them: with PYTHONDONTWRITEBYTECODE every
    # bridge and CLI process compiles every module it imports (most of a cold command's time).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "ledger")], capture_output=True
    )
    git_version = subprocess.run(["git", "version"], capture_output=True, text=True).stdout
    head = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    print(f"ledger: {ROOT} ({head or 'not a git checkout'})")
    print(
        f"soak: {knobs.prompts} prompts, {knobs.files} files, checkpoints "
        f"{checkpoints(knobs.prompts, knobs.every)[:3]}…, retention "
        f"{json.dumps(knobs.retention) if knobs.retention is not None else 'off'}; "
        f"{git_version.strip()}; {os.cpu_count()} cpus (shared machine: timings are one run's)",
        flush=True,
    )
    print(LEGEND)
    results = []
    t0 = time.perf_counter()
    try:
        for kind in kinds:
            results.append(run(kind, tmp, knobs))
    finally:
        if args.keep:
            print(f"kept: {tmp} (HOME={home}; agent dirs under <scenario>/agent)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    for result in results:
        summary(result)
    if args.json:
        args.json.write_text(json.dumps({"knobs": knobs.__dict__, "results": results}, indent=1))
    return 0


def summary(result: dict[str, Any]) -> None:
    """Growth between the first and the last row (prompt 100 or the first checkpoint)."""
    rows = result["rows"]
    if len(rows) < 2:
        return
    a, b = rows[0], rows[-1]
    per = (b["prompt"] - a["prompt"]) or 1

    def growth(key: str) -> str:
        return f"{(b.get(key, 0) - a.get(key, 0)) / per:.1f}/prompt"

    print(
        f"{result['scenario']}: prompt {a['prompt']} -> {b['prompt']}: loose objects "
        f"{growth('loose')}, git dir {growth('git_dir_bytes')} B, session files "
        f"{growth('session_bytes')} B; turn_end p99 {ms(a['turn_end_p99'])} -> "
        f"{ms(b['turn_end_p99'])} ms; cold snapshot {ms(a['cli_snapshot_p50'])} -> "
        f"{ms(b['cli_snapshot_p50'])} ms; doctor {ms(a['doctor_ms'])} -> {ms(b['doctor_ms'])} ms; "
        f"bridge RSS {a['rss_kb'] // 1024} -> {b['rss_kb'] // 1024} MB"
        + (
            f"; watcher RSS {sum(a['watcher_rss_kb']) // 1024} -> "
            f"{sum(b['watcher_rss_kb']) // 1024} MB"
            if b["watcher_rss_kb"]
            else ""
        )
    )


if __name__ == "__main__":
    sys.exit(main())
