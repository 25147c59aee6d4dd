#!/usr/bin/env python3
"""Benchmark: the CLI pair ``rewind restore`` + ``rewind undo`` ten prompts back, whole processes.

Why it exists: issue 34's target for a user who goes back from the shell and changes their mind:
at prompt 20 of a session on a 2,000-file repository, ``rewind restore SESSION ENTRY --mode
files --yes`` to the prompt ten back, then ``rewind undo SESSION --yes``, ≤ 300 ms for the pair
(1,568 ms before issue 34). Its floor on this machine: two interpreter starts and two stat scans
of the repository (:mod:`bench_floors`), printed beside it with the other floors and the load.

Setup (a temporary directory, removed at the end): a committed, packed repository of
``--files`` files (``tools/bench_feed.py``'s generator, 10 per directory); a real session of
``--prompts`` prompts through a real bridge (:class:`tests.bridgekit.FakePi`; local captures and
no UI, so that no watcher starts), each prompt editing, adding or deleting 1–6 files, and a hand
edit every 5 prompts; the session is then written to disk as Pi does and the bridge ends.

Timed, ``--runs`` rounds, each the two processes one after the other (the pair: restore, then
undo; the work tree is back at the session's last state after each pair), then a floors sample:

- phase 1, cold: nobody watches the repository, ``REWIND_SERVED=0``;
- phase 2: a ``rewind serve --watch`` runs for the repository (idle-time verification off; its
  feed armed first), the same pair without ``REWIND_SERVED``.

The first pair of each phase is printed apart from the median of the later ones. Every pair is
checked: the restore changed files and the undo brought the work tree back (``git status`` of a
fresh-index capture against the tree before).

Usage::

    python tools/bench_restore_undo.py                 # 2,000 files, 20 prompts, 7 runs
    python tools/bench_restore_undo.py --runs 3
    python tools/bench_restore_undo.py --files 5000    # another size
    python tools/bench_restore_undo.py --install /tmp/ui-venv/bin/rewind --compare /tmp/old/bin/rewind

``--install``: every child runs that regular install (what users run: the extension's
``.rewind-venv`` or ``pip install``) instead of this checkout through the editable venv, whose
``site`` alone costs ~10 ms per process. ``--compare``: another install (an older commit's),
whose pair runs right after this one's in every cold round, on the same session.

Every child runs without ``PYTHONDONTWRITEBYTECODE`` (bytecode precompiled first) and with
``PYTHONPATH`` starting at this checkout. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_floors import child_env, describe, floors, load, medians, precompile
from bench_restore import Series, rewind_cmd, start_watcher, stop_watchers

TARGET_MS = 300.0
BACK = 10
"""The restore goes this many prompts back."""
PER_DIR = 10


def fresh_tree(repo: Path) -> str:
    """The work tree's tree id by a fresh-index capture (what every check compares)."""
    with tempfile.TemporaryDirectory(prefix="bench-undo-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
        out = subprocess.run(
            ["git", "write-tree"], cwd=repo, env=env, capture_output=True, text=True, check=True
        )
    return out.stdout.strip()


def build_session(repo: Path, agent: Path, prompts: int) -> tuple[Path, list[str]]:
    """A real session of ``prompts`` prompts: ``(its file, the user entries in order)``."""
    from tests.bridgekit import FakePi

    rng = random.Random(34)
    names = subprocess.run(
        ["git", "ls-files", "-z", "d*"], cwd=repo, capture_output=True, check=True
    ).stdout.split(b"\0")
    pool = [n.decode() for n in names if n.endswith(b".txt")]

    def act(n: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(rng.randint(1, 6)):
                roll = rng.random()
                if roll < 0.7:
                    path = repo / rng.choice(pool)
                    path.write_text(path.read_text() + f"prompt {n} edit {i}\n")
                elif roll < 0.9:
                    rel = f"agent/p{n:03d}/new{i}.txt"
                    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
                    (repo / rel).write_text(f"made by prompt {n}\n")
                    pool.append(rel)
                else:
                    (repo / pool.pop(rng.randrange(len(pool)))).unlink()

        return run

    os.environ["REWIND_SERVED"] = "0"  # this bridge starts no watcher
    try:
        pi = FakePi(repo, agent)
        pi.has_ui = False
        if pi.event("session_start", {"reason": "startup"}).error is not None:
            raise SystemExit("session_start failed")
        users = []
        for n in range(prompts):
            if n and n % 5 == 0:  # the user's own edit between prompts
                path = repo / rng.choice(pool)
                path.write_text(path.read_text() + f"by hand before prompt {n}\n")
            users.append(pi.prompt(f"prompt {n}", act(n))[0])
        session = pi.write_file()
        pi.close()
    finally:
        os.environ.pop("REWIND_SERVED")
    return session, users


def pair(
    repo: Path,
    agent: Path,
    session: Path,
    entry: str,
    env: dict[str, str],
    expected: str,
    rewind: list[str] | None = None,
) -> Callable[[], tuple[float, float]]:
    common = [*(rewind or rewind_cmd()), "--agent-dir", str(agent)]
    restore = [*common, "restore", str(session), entry, "--mode", "files", "--yes", "--json"]
    undo = [*common, "undo", str(session), "--yes", "--json"]

    def run() -> tuple[float, float]:
        times = []
        for cmd in (restore, undo):
            started = time.perf_counter()
            done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
            times.append((time.perf_counter() - started) * 1000.0)
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(cmd[-6:])} failed: {done.stderr.strip()}")
            report = json.loads(done.stdout.splitlines()[0])
            if not report.get("changed"):
                print(f"  WARNING: {cmd[len(common)]} changed nothing: {report}", flush=True)
        if fresh_tree(repo) != expected:
            raise SystemExit("the undo did not bring the work tree back")
        return times[0], times[1]

    return run


def env_for(env: dict[str, str], cmd: list[str] | None) -> dict[str, str]:
    """The child environment for this install (``cmd is None``) or for ``--compare``'s, which
    runs its own copy of the package: no ``PYTHONPATH`` towards this checkout."""
    if cmd is None:
        return env
    return {k: v for k, v in env.items() if k != "PYTHONPATH"}


def measure(repo: Path, agent: Path, prompts: int, runs: int, compare: Path | None = None) -> None:
    stop_watchers(repo)
    session, users = build_session(repo, agent, prompts)
    entry = users[-min(BACK, len(users))]
    expected = fresh_tree(repo)
    print(f"  session {session.name}: {len(users)} prompts; restoring to prompt {prompts - BACK}")
    samples: list[dict[str, float]] = []
    phases: list[tuple[str, Series, Series, Series]] = []

    def rounds(title: str, env: dict[str, str], comparing: bool) -> None:
        # With --compare, each cold round runs the other install's pair right after this one's,
        # on the same session and work tree (both see the session grow alike). Not beside a
        # watcher: that watcher runs this install's code, which the other's client may not speak.
        kinds: list[tuple[str, list[str] | None]] = [(title, None)]
        if comparing and compare is not None:
            kinds.append((f"{title}, COMPARE {compare}", [str(compare)]))
        series = {
            name: (Series("restore + undo"), Series("  restore"), Series("  undo"))
            for name, _ in kinds
        }
        runners = {
            name: pair(repo, agent, session, entry, env_for(env, cmd), expected, cmd)
            for name, cmd in kinds
        }
        for i in range(runs):
            for name, _ in kinds:
                both, rest, und = series[name]
                r, u = runners[name]()
                rest.times.append(r)
                und.times.append(u)
                both.times.append(r + u)
                tag = "" if name == title else " (compare)"
                print(
                    f"  round {i + 1}{tag}: restore {r:.1f} ms + undo {u:.1f} ms = "
                    f"{r + u:.1f} ms   ({load()})",
                    flush=True,
                )
            samples.append(floors(repo))
        for name, _ in kinds:
            phases.append((name, *series[name]))

    print(f"\nphase 1: nobody watches the repository, REWIND_SERVED=0   ({load()})", flush=True)
    rounds("cold (REWIND_SERVED=0)", child_env({"REWIND_SERVED": "0"}), True)
    print(f"\nphase 2: rewind serve --watch runs   ({load()})", flush=True)
    os.environ["REWIND_FEED_VERIFY"] = "0"
    server = start_watcher(repo)
    try:
        rounds("rewind serve --watch runs", child_env(), False)
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
        print(f"  watcher: {err.strip()}", flush=True)
        stop_watchers(repo)

    floor = medians(samples)
    pair_floor = 2 * (floor["python -c pass"] + floor["stat scan"])
    print(
        f"\nrewind restore + rewind undo, {BACK} prompts back at prompt {prompts}: first pair, "
        f"median of the later ones ({runs} runs)"
    )
    print(f"  {'':40s} {'first':>11s} {'median':>11s}  target / floor")
    for title, both, rest, und in phases:
        print(f"  {title}")
        for s in (both, rest, und):
            note = ""
            if s is both and s.later is not None:
                note = f"  ≤{TARGET_MS:.0f} ms " + ("ok" if s.later <= TARGET_MS else "MISSED")
                note += f"; {s.later / pair_floor:.1f}x the floor"
            first = "-" if s.first is None else f"{s.first:8.1f} ms"
            later = "-" if s.later is None else f"{s.later:8.1f} ms"
            print(f"  {'  ' + s.name:40s} {first:>11s} {later:>11s}{note}")
    print(f"  floors (medians over every round): {describe(floor)}")
    print(f"  pair floor (two interpreter starts + two stat scans): {pair_floor:.1f} ms; {load()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--files", type=int, default=2_000, help="synthetic repository size")
    parser.add_argument("--prompts", type=int, default=20, help="prompts in the session")
    parser.add_argument("--runs", type=int, default=7, help="timed pairs per phase")
    parser.add_argument(
        "--install",
        type=Path,
        help="a regular (non-editable) install's `rewind` script (e.g. /tmp/ui-venv/bin/rewind): "
        "every child runs it instead of this checkout through the editable venv",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        help="another install's `rewind` script (e.g. of an older commit), its pair run right "
        "after this one's in every round",
    )
    args = parser.parse_args(argv)
    if args.install is not None:
        import bench_floors
        import bench_restore

        bench_restore._INSTALL.append(args.install.absolute())
        bench_floors.INSTALL_PYTHON = str(args.install.absolute().parent / "python")
        os.environ["BRIDGEKIT_BRIDGE_CMD"] = json.dumps(
            [str(args.install.absolute()), "serve", "--stdio"]
        )
    if args.prompts < 2:
        parser.error("--prompts must be at least 2")
    env = child_env()  # every child runs the code beside this script, with bytecode caches
    os.environ.clear()
    os.environ.update(env)
    if args.install is None:
        precompile()
    import ledger

    git_version = subprocess.run(["git", "version"], capture_output=True, text=True).stdout
    head = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    install = (
        f"REGULAR install {args.install}"
        if args.install is not None
        else f"EDITABLE venv {sys.executable}, PYTHONPATH {ROOT}"
    )
    print(f"children run: {install}", flush=True)
    print(
        f"ledger {Path(ledger.__file__).parent} ({head}); {git_version.strip()}; python "
        f"{sys.version.split()[0]}; {load()}",
        flush=True,
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench-restore-undo-"))
    try:
        from bench_feed import build_repo

        agent = tmp / "agent"
        os.environ["PI_CODING_AGENT_DIR"] = str(agent)  # every child's (never ~/.pi)
        repo = build_repo(tmp, args.files, PER_DIR).resolve()
        compare = args.compare.absolute() if args.compare is not None else None
        measure(repo, agent, args.prompts, args.runs, compare)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
