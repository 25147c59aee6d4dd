#!/usr/bin/env python3
"""Benchmark: does a CLI restore and its undo cost more as a session grows (issue 33)?

Why it exists: attribution (whose work a restore would overwrite) used to be recomputed from
every recorded point of the session and its neighbours at every plan, so ``rewind restore`` and
``rewind undo`` grew with the session's history (1.49x from prompt 20 to prompt 300 with 2,000
files). The authorship index (docs/authorship.md) answers by one lookup per path; the target is
that their cost at prompt 300 is at most 1.2x their cost at prompt 20.

What it times is what a user runs: whole CLI processes, each a first call (a CLI process has no
warm state), in a real git repository (``--files`` files) with one real session file built by
tests/enginekit.py's ``Agent`` (real engine, real captures). Each prompt the agent edits 3
files (and adds one every 10th prompt); the user edits one file by hand before every 4th prompt.
At prompt 20 and at prompt 300 (``--points``), ``--runs`` times: ``rewind restore SESSION ENTRY
--mode files --yes`` to the prompt ten back, then ``rewind undo SESSION --yes`` (which puts the
files back, so every run starts from the same tree; checked). Medians.

The reference, in the same run: the ledger of commit ``--old`` (default cfd1c9e, the commit
before the index was wired), extracted with ``git archive`` into a temp dir (no git state
changes) and run through ``PYTHONPATH``. It gets its own world, built by its own engine with the
same edits, because the new ledger appends index records the old one does not know. Both worlds
are built in child processes (``_build``) so that each ledger builds its own.

The floor: ``python -c "import ledger.cli.app"`` (interpreter and imports) and ``rewind status
SESSION`` (a CLI process that opens the session and captures the work tree, no plan).

Between building and timing, ``rewind sweep SESSION`` runs once (untimed) in each world, so the
store is packed as a user's would be; the automatic background upkeep is off
(``REWIND_AUTO_UPKEEP=0``) so that no background process competes with a timed one.

``--profile``: after the timings, one more restore and undo of the new ledger at the last point
under cProfile, the top functions by cumulative time printed.

Usage::

    python tools/bench_history_growth.py                       # 2,000 files, prompts 20 and 300
    python tools/bench_history_growth.py --runs 7 --profile
    python tools/bench_history_growth.py --old none            # the new ledger only

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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.2
BACK = 10
"""The restore goes this many prompts back."""


# --- the world (run in a child process, with the ledger under test on PYTHONPATH) -------------


def _edit_agent(repo: Path, files: int, p: int) -> None:
    for k in range(3):
        n = (p * 7 + k * 613) % files
        (repo / f"d{n % 40}" / f"f{n}.txt").write_text(f"file {n}: prompt {p} edit {k}\n")
    if p % 10 == 0:
        (repo / "new").mkdir(exist_ok=True)
        (repo / "new" / f"p{p}.txt").write_text(f"added by prompt {p}\n")


def _edit_user(repo: Path, files: int, p: int) -> None:
    n = (p * 31 + 5) % files
    (repo / f"d{n % 40}" / f"f{n}.txt").write_text(f"file {n}: the user's edit before {p}\n")


def build_child(world: Path, files: int, upto: int) -> None:
    """Extend the world's session to ``upto`` prompts (create it first if needed)."""
    from tests.enginekit import Agent  # the ledger on PYTHONPATH

    repo, agent_dir, state_file = world / "repo", world / "agent", world / "state.json"
    if not state_file.exists():
        repo.mkdir(parents=True)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        for n in range(files):
            d = repo / f"d{n % 40}"
            d.mkdir(exist_ok=True)
            (d / f"f{n}.txt").write_text(f"file {n}\n")
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        subprocess.run(["git", "commit", "-qm", "base"], cwd=repo, check=True)
        agent = Agent.start(repo, agent_dir)
        state: dict[str, Any] = {"session": str(agent.session_file), "users": []}
    else:
        state = json.loads(state_file.read_text())
        agent = Agent(repo, agent_dir, Path(state["session"]))
        agent.engine.session_start("resume")
    users: list[str] = state["users"]
    for p in range(len(users) + 1, upto + 1):
        if p % 4 == 0:
            _edit_user(repo, files, p)
        user_id, _ = agent.prompt(f"prompt {p}", lambda r, p=p: _edit_agent(r, files, p))
        users.append(user_id)
    state_file.write_text(json.dumps(state))


# --- the parent ------------------------------------------------------------------------------


class World:
    """One ledger's world: its source tree, repository, agent dir and session."""

    def __init__(
        self, name: str, source: Path, base: Path, files: int, env: dict[str, str], point: int
    ) -> None:
        self.name, self.source, self.files, self.point = name, source, files, point
        self.dir = base / name.replace(" ", "-").replace("@", "at")
        self.env = {**env, "PYTHONPATH": str(source)}

    @property
    def repo(self) -> Path:
        return self.dir / "repo"

    def state(self) -> dict[str, object]:
        return json.loads((self.dir / "state.json").read_text())

    def build(self, upto: int) -> float:
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, __file__, "_build", str(self.dir), str(self.files), str(upto)],
            cwd=self.dir.parent,
            env=self.env,
            check=True,
        )
        return time.perf_counter() - started

    def run(self, *args: str, check: bool = True) -> float:
        """One ``rewind`` process (``python -m ledger``, the console script's code), in ms."""
        cmd = [sys.executable, "-m", "ledger", "--agent-dir", str(self.dir / "agent"), *args]
        started = time.perf_counter()
        done = subprocess.run(cmd, cwd=self.repo, env=self.env, capture_output=True, text=True)
        ms = (time.perf_counter() - started) * 1000
        if check and done.returncode != 0:
            raise SystemExit(
                f"{self.name}: rewind {' '.join(args)} exit {done.returncode}:\n"
                f"{done.stdout}{done.stderr}"
            )
        return ms

    def startup(self) -> float:
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "import ledger.cli.app"], cwd=self.repo, env=self.env, check=True
        )
        return (time.perf_counter() - started) * 1000

    def work_tree(self) -> str:
        """The work tree's content as a tree id (a fresh temp index; the user's is untouched)."""
        index = self.dir / "check-index"
        env = {**self.env, "GIT_INDEX_FILE": str(index)}
        try:
            subprocess.run(["git", "add", "-A"], cwd=self.repo, env=env, check=True)
            return subprocess.run(
                ["git", "write-tree"],
                cwd=self.repo,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
        finally:
            index.unlink(missing_ok=True)


def extract(commit: str, into: Path) -> Path:
    """The ledger of ``commit`` as plain files (``git archive``: no worktree, no git state)."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def compile_bytecode(source: Path, env: dict[str, str]) -> None:
    """Bytecode caches for ``source``'s ledger, written before anything is timed."""
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


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def measure(worlds: list[World], runs: int) -> dict[str, dict[str, float]]:
    """Medians of restore, undo, their sum and the floor, per world, all worlds interleaved."""
    samples: dict[str, dict[str, list[float]]] = {
        w.name: {"restore": [], "undo": [], "both": [], "status": [], "python": []} for w in worlds
    }
    targets = {}
    for w in worlds:
        w.run("sweep", str(w.state()["session"]))  # packed as a user's store would be
        users = w.state()["users"]
        assert isinstance(users, list) and len(users) == w.point
        targets[w.name] = (str(w.state()["session"]), users[w.point - BACK - 1], w.work_tree())
    for w in worlds:  # untimed: the file system cache and every module's bytecode warm
        session, entry, _tree = targets[w.name]
        w.run("status", session)
        w.run("restore", session, entry, "--mode", "files", "--yes")
        w.run("undo", session, "--yes")
    for _ in range(runs):
        # Interleaved: a busy moment of the shared machine hits every world alike, so the
        # ratios (prompt 300 / prompt 20, new / old) hold even when the absolute times drift.
        for w in worlds:
            session, entry, _tree = targets[w.name]
            s = samples[w.name]
            s["python"].append(w.startup())
            s["status"].append(w.run("status", session))
            restore = w.run("restore", session, entry, "--mode", "files", "--yes")
            undo = w.run("undo", session, "--yes")
            s["restore"].append(restore)
            s["undo"].append(undo)
            s["both"].append(restore + undo)
    for w in worlds:
        if w.work_tree() != targets[w.name][2]:
            raise SystemExit(f"{w.name}: the undo did not bring the work tree back")
    return {name: {k: median(v) for k, v in s.items()} for name, s in samples.items()}


def per_function(
    stats: object, repeat: int, calls: dict[str, float] | None = None
) -> dict[str, float]:
    """Mean cumulative seconds per process by function, module bodies left out (imports do not
    grow with a session) and built-ins named without their addresses (they differ by process)."""
    import re

    out: dict[str, float] = {}
    for (file, line, name), row in stats.stats.items():  # type: ignore[attr-defined]
        if name == "<module>" or name.startswith("<frozen") or file.startswith("<frozen"):
            continue
        key = re.sub(r" at 0x[0-9a-f]+", "", f"{Path(file).name}:{line}({name})")
        out[key] = out.get(key, 0.0) + row[3] / repeat
        if calls is not None:
            calls[key] = calls.get(key, 0.0) + row[1] / repeat
    return out


def profile(first: World, last: World, out: Path, top: int, repeat: int = 3) -> None:
    """``repeat`` restores and undos of each world under cProfile; printed: the functions whose
    cumulative time grew most from ``first`` to ``last`` (per command), then ``last``'s top."""
    import pstats

    def run(w: World, label: str) -> pstats.Stats:
        session = str(w.state()["session"])
        entry = w.state()["users"][w.point - BACK - 1]  # type: ignore[index]
        files = []
        for n in range(repeat):
            for name, args in (
                ("restore", ["restore", session, str(entry), "--mode", "files", "--yes"]),
                ("undo", ["undo", session, "--yes"]),
            ):
                prof = out / f"{w.dir.name}-{name}-{n}.prof"
                cmd = [
                    sys.executable,
                    "-m",
                    "cProfile",
                    "-o",
                    str(prof),
                    "-m",
                    "ledger",
                    "--agent-dir",
                    str(w.dir / "agent"),
                    *args,
                ]
                subprocess.run(cmd, cwd=w.repo, env=w.env, check=True, capture_output=True)
                if name == label:
                    files.append(str(prof))
        return pstats.Stats(*files)

    for label in ("restore", "undo"):
        a, b = run(first, label), run(last, label)
        calls: dict[str, float] = {}
        cum_a, cum_b = per_function(a, repeat), per_function(b, repeat, calls)
        total_a = max(cum_a.values())
        total_b = max(cum_b.values())
        grown = sorted(cum_b, key=lambda k: cum_b[k] - cum_a.get(k, 0.0), reverse=True)
        print(
            f"\n-- cProfile ({repeat} runs each, mean ms per process): rewind {label}, "
            f"prompt {first.point} -> prompt {last.point}: {total_a * 1000:.0f} -> "
            f"{total_b * 1000:.0f} ms; the functions whose cumulative time grew most --"
        )
        for key in grown[:top]:
            before, after = cum_a.get(key, 0.0) * 1000, cum_b[key] * 1000
            where = key
            print(
                f"  {before:8.1f} -> {after:8.1f}  (+{after - before:7.1f}, "
                f"{after / (total_b * 1000):5.1%} of the process at {last.point}, "
                f"{calls.get(key, 0):4.0f} calls)  {where}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--points", default="20,300", help="prompts at which to time (20,300)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--old", default="cfd1c9e", help="reference commit, or 'none'")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    points = sorted(int(p) for p in args.points.split(","))
    assert points[0] > BACK, f"the first point must be past prompt {BACK}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-growth-"))
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
    head = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    ledgers = [("new", ROOT)]
    if args.old != "none":
        ledgers.append((f"old {args.old}", extract(args.old, tmp / "old-src")))
    # One world per ledger and point, all alive at once, so that every timing is interleaved.
    worlds = [
        World(f"{name} @{point}", source, tmp, args.files, env, point)
        for name, source in ledgers
        for point in points
    ]
    for _name, source in ledgers:
        compile_bytecode(source, {**env, "PYTHONPATH": str(source)})
    print(
        f"new: {ROOT} ({head}); {args.files} files; restore {BACK} prompts back, then undo; "
        f"median of {args.runs}; {os.cpu_count()} cpus (shared machine)"
    )
    try:
        for w in worlds:
            w.dir.mkdir()
            took = w.build(w.point)
            print(f"  {w.name}: built in {took:.0f} s", flush=True)
        results = measure(worlds, args.runs)
        print(f"\nms (median of {args.runs})      restore     undo  restore+undo   status   python")
        for w in worlds:
            r = results[w.name]
            print(
                f"  {w.name:<18} {r['restore']:8.0f} {r['undo']:8.0f} {r['both']:13.0f} "
                f"{r['status']:8.0f} {r['python']:8.0f}",
                flush=True,
            )
        first, last = points[0], points[-1]
        print(f"\ngrowth, prompt {last} / prompt {first} (target <= {TARGET}x for restore+undo):")
        for name, _ in ledgers:
            a, b = results[f"{name} @{first}"], results[f"{name} @{last}"]
            print(
                f"  {name:<16} restore {b['restore'] / a['restore']:.2f}x  undo "
                f"{b['undo'] / a['undo']:.2f}x  restore+undo {b['both'] / a['both']:.2f}x"
                f"   (floor: status {b['status'] / a['status']:.2f}x)"
            )
        if len(ledgers) > 1:
            for point in points:
                new = results[f"new @{point}"]["both"]
                old = results[f"{ledgers[1][0]} @{point}"]["both"]
                print(f"  prompt {point}: restore+undo new / old = {new / old:.2f}")
        print(
            "\nfloor: 'python' = python -c 'import ledger.cli.app'; 'status' = rewind status "
            "(session opened, work tree captured, no plan)"
        )
        if args.profile:
            by_name = {w.name: w for w in worlds}
            profile(by_name[f"new @{first}"], by_name[f"new @{last}"], tmp, args.top)
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "_build":
        build_child(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        sys.exit(0)
    sys.exit(main())
