#!/usr/bin/env python3
"""Benchmark: a restore where 1 file differs, the way users run it, against the reference's.

Why it exists: issue 34 ("every entry point at the floor"). What a user waits for is a whole
process (``rewind restore`` in a shell) or the round trip of ``/rewind`` → "files only" inside
Pi (the bridge over its pipe), not the library call. So each entry point is timed as it is
used, interleaved run by run with the reference's restore (also a whole process chain), and
printed beside its ratio to the reference and beside the machine's floors measured in the same
run (:mod:`bench_floors`: ``python -c pass``, one stat scan, ``git status``, one blob write) and
the load average.

The reference (docs/design.md#the-references-methods), as one ``sh -c`` chain of git processes:
a fresh-index capture (``GIT_INDEX_FILE`` in a temp file, ``git -c core.autocrlf=false add -A``,
``write-tree``), ``commit-tree`` for the undo snapshot, the delete list (``git diff
--name-only --diff-filter=D -z``, removed with ``rm``), then ``git restore --source=<c>
--worktree -- .`` at the root against the user's index (see :func:`reference_restore`).

Setup: a committed, packed repository of ``--files`` files (``tools/bench_feed.py``'s
generator, 10 per directory; ``--repo`` reuses one built before). Two real sessions, each one
prompt through a real bridge (:class:`tests.bridgekit.FakePi`): session A is written to disk
for the CLI (made with ``REWIND_SERVED=0`` and no UI, so no watcher starts); session B lives in
a bridge for phase 2. Each timed run first changes one tracked file (a different one each
time), then restores the prompt's point (the tree before the change). Every result is checked
(the file is back; the CLI says it modified exactly that file).

Phase 1, nobody watches the repository (a watcher left serving it is stopped first), rounds of:
the reference; ``rewind restore A ENTRY --mode files --yes --json`` cold (``REWIND_SERVED=0``);
the same without its status prefetch (``REWIND_STATUS_PREFETCH=0``, a breakdown row:
docs/capture.md#status-prefetch); ``restore_commit`` in-process (a breakdown row only: no process, no session, no attribution);
two floors of this design (``tools/bench_cold_floor.py``: the capture's ``git status`` alone, and
an interpreter running it while loading pygit2 and orjson); the machine's floors.

Phase 2, a ``rewind serve --watch`` runs for the repository (idle-time verification off, it
would compete for the CPUs; its feed armed by served ``rewind snapshot`` calls before the timed
runs, as a session's prompts arm it), rounds of: the reference; the same CLI restore (served
when the CLI asks the watcher); ``/rewind`` "files only" in a spawned bridge (``rewind serve
--stdio``, the event ``rewind_apply {action: "files", entryId}`` the extension sends,
ledger/bridge/rewind_events.py), whose captures go to the watcher as in Pi; the same in a
session hosted by the watcher (its bridge socket, as a later Pi session runs); the floors.

The **first** call of each entry point (first process after the setup, first event of a bridge
session) is printed apart from the median of the later ones.

Targets at 100k files (ratio of the median to the reference's median of the same phase):
cold ≤ 0.15, with a watcher running ≤ 0.05, inside the bridge ≤ 0.01.

Usage::

    python tools/bench_restore.py                          # 100k files (built in a temp dir)
    python tools/bench_restore.py --files 5000 --runs 3    # a quick check
    python tools/bench_restore.py --repo /tmp/bench-100k/feed-100000 --runs 9
    python tools/bench_restore.py --repo … --runs 5 --cold-only   # phase 1 alone

Every child runs without ``PYTHONDONTWRITEBYTECODE`` (bytecode precompiled first) and with
``PYTHONPATH`` starting at this checkout: the code measured is the code beside this script,
through the interpreter running the script, by default the development venv, an **editable**
install (``pip install -e``, whose ``site`` imports its finder at every start). Users run a
**regular** install (the extension's ``.rewind-venv``, ``pip install <package root>``):
``--install VENV/bin/rewind`` runs every child (the CLI, the watcher, the spawned bridges, and
the ``python -c pass`` floor) from that install instead, without ``PYTHONPATH``; the reference
still runs interleaved in the same run, so the ratios of the two runs compare. Build one with
``python3 -m venv /tmp/ui-venv && /tmp/ui-venv/bin/pip install .``, then precompile its
``site-packages/ledger`` (``python -m compileall -q``). The figures printed say which install.
Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import bench_floors
from bench_cold_floor import python_status_imports, status_alone
from bench_floors import child_env, describe, floors, load, medians, precompile

TARGETS = {"cold": 0.15, "watcher": 0.05, "bridge": 0.01}
PER_DIR = 10

REFERENCE = r"""set -e
target="$1"
index="$(mktemp -u)"
GIT_INDEX_FILE="$index" git -c core.autocrlf=false add -A
current="$(GIT_INDEX_FILE="$index" git write-tree)"
rm -f "$index"
target_tree="$(git show -s --format=%T "$target")"
[ "$current" = "$target_tree" ] && exit 0
git -c user.name=Bench -c user.email=bench@example.com commit-tree "$current" \
    -m "pi rewind snapshot" >/dev/null
git diff --name-only --diff-filter=D -z "$current" "$target_tree" -- | xargs -0 -r rm -rf --
git restore --source="$target" --worktree -- .
"""


def reference_restore(repo: Path, target: str) -> float:
    """The reference's restore (docs/design.md#the-references-methods) as it runs it, from the
    repository root, as one process chain; its wall time in ms."""
    started = time.perf_counter()
    subprocess.run(["sh", "-c", REFERENCE, "reference", target], cwd=repo, check=True)
    return (time.perf_counter() - started) * 1000.0


_INSTALL: list[Path] = []
"""``--install``: a regular install's ``rewind`` script, used instead of this interpreter's."""


def rewind_cmd() -> list[str]:
    """``rewind`` as a user runs it: the console script beside this python (else ``-m``)."""
    if _INSTALL:
        return [str(_INSTALL[0])]
    script = Path(sys.executable).parent / "rewind"
    return [str(script)] if script.exists() else [sys.executable, "-m", "ledger"]


@dataclass
class Series:
    """One entry point's times: the first call apart from the later ones."""

    name: str
    target: float | None = None
    times: list[float] = field(default_factory=list)

    @property
    def first(self) -> float | None:
        return self.times[0] if self.times else None

    @property
    def later(self) -> float | None:
        rest = self.times[1:] or self.times
        return statistics.median(rest) if rest else None


class Bench:
    def __init__(self, repo: Path, agent: Path) -> None:
        self.repo = repo
        self.agent = agent
        names = subprocess.run(
            ["git", "ls-files", "-z", "d*"], cwd=repo, capture_output=True, check=True
        ).stdout.split(b"\0")
        self.pool = [n.decode() for n in names if n.endswith(b".txt")][:400]
        self.originals = {rel: (repo / rel).read_bytes() for rel in self.pool}
        self.step = 0
        self.floor_samples: list[dict[str, float]] = []

    def change_one(self) -> str:
        """Change one tracked file (a different one each time): what the restore undoes."""
        self.step += 1
        rel = self.pool[self.step % len(self.pool)]
        (self.repo / rel).write_bytes(self.originals[rel] + f"bench {self.step}\n".encode())
        return rel

    def check(self, who: str, rel: str) -> None:
        if (self.repo / rel).read_bytes() != self.originals[rel]:
            print(f"  WARNING: {who} did not restore {rel}", flush=True)
            (self.repo / rel).write_bytes(self.originals[rel])

    def put_back(self) -> None:
        for rel, data in self.originals.items():
            path = self.repo / rel
            if path.read_bytes() != data:
                path.write_bytes(data)

    def cli_restore(self, session: Path, entry: str, env: dict[str, str]) -> Callable[[], float]:
        cmd = [
            *rewind_cmd(),
            "--agent-dir",
            str(self.agent),
            "restore",
            str(session),
            entry,
            "--mode",
            "files",
            "--yes",
            "--json",
        ]

        def run() -> float:
            rel = self.change_one()
            started = time.perf_counter()
            done = subprocess.run(cmd, cwd=self.repo, env=env, capture_output=True, text=True)
            elapsed = (time.perf_counter() - started) * 1000.0
            if done.returncode != 0:
                raise SystemExit(f"rewind restore failed: {done.stderr.strip()}")
            report = json.loads(done.stdout.splitlines()[0])
            if report.get("modified") != [rel] or report.get("added") or report.get("deleted"):
                print(f"  WARNING: the CLI restored more than {rel}: {report}", flush=True)
            self.check("rewind restore", rel)
            return elapsed

        return run

    def one_change(self, timed: Callable[[], float]) -> Callable[[], float]:
        """``timed`` run with one file changed, as every restore here is (the file put back
        after: a floor restores nothing)."""

        def run() -> float:
            rel = self.change_one()
            try:
                return timed()
            finally:
                (self.repo / rel).write_bytes(self.originals[rel])

        return run

    def reference(self, target: str) -> Callable[[], float]:
        def run() -> float:
            rel = self.change_one()
            elapsed = reference_restore(self.repo, target)
            self.check("the reference", rel)
            return elapsed

        return run

    def rounds(self, runs: int, cases: list[tuple[Series, Callable[[], float]]]) -> None:
        """``runs`` rounds of every case in turn, then a floors sample (interleaved: a change of
        load hits every case alike)."""
        for i in range(runs):
            for series, run in cases:
                series.times.append(run())
            self.floor_samples.append(floors(self.repo))
            print(
                f"  round {i + 1}: "
                + "   ".join(f"{s.name} {s.times[-1]:.1f}" for s, _ in cases)
                + f"   (ms; {load()})",
                flush=True,
            )


def in_process(bench: Bench, target: str) -> Callable[[], float]:
    """``restore_commit`` in this process: the engine's restore alone (a breakdown row)."""
    from ledger.git.repo import GitRepo
    from ledger.git.restore.run import restore_commit
    from ledger.settings import SnapshotSettings

    gitrepo = GitRepo.discover(bench.repo)
    settings = SnapshotSettings()

    def run() -> float:
        rel = bench.change_one()
        started = time.perf_counter()
        restore_commit(gitrepo, target, settings, last_exact=None)
        elapsed = (time.perf_counter() - started) * 1000.0
        bench.check("restore_commit", rel)
        return elapsed

    return run


def bridge_restore(bench: Bench, pi: object, entry: str) -> Callable[[], float]:
    """``/rewind`` → "files only": the extension's ``rewind_apply`` event, round trip."""
    from tests.bridgekit import FakePi

    assert isinstance(pi, FakePi)

    def run() -> float:
        rel = bench.change_one()
        started = time.perf_counter()
        reply = pi.event("rewind_apply", {"action": "files", "entryId": entry})
        elapsed = (time.perf_counter() - started) * 1000.0
        if reply.error is not None:
            raise SystemExit(f"rewind_apply failed: {reply.error}")
        pi.write_file()  # Pi saves the appended op record (else a CLI sees the restore unrecorded)
        bench.check("/rewind files only", rel)
        return elapsed

    return run


def one_prompt_session(repo: Path, agent: Path, *, ui: bool, hosted: Path | None = None) -> object:
    """A real session with one prompt (its user entry has a rewind point: the tree now)."""
    from tests.bridgekit import FakePi

    pi = FakePi(repo, agent, hosted=hosted)
    pi.has_ui = ui
    if pi.event("session_start", {"reason": "startup"}).error is not None:
        raise SystemExit("session_start failed")
    pi.prompt("bench: the point to restore")
    pi.write_file()
    return pi


def stop_watchers(repo: Path) -> None:
    """Stop a watcher that serves ``repo`` (one a bridge of this benchmark started, or left by an
    earlier run): the cold figures need nobody watching. A bridge serving it is not stopped."""
    from ledger.git.private import serving_pid

    git_dir = Path(
        subprocess.run(
            ["git", "rev-parse", "--absolute-git-dir"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    if serving_pid(git_dir) is None:
        return
    done = subprocess.run(
        [*rewind_cmd(), "serve", "--stop"],
        cwd=repo,
        env=child_env(),
        capture_output=True,
        text=True,
    )
    print(f"  {(done.stdout or done.stderr).strip()}", flush=True)
    if serving_pid(git_dir) is not None:
        raise SystemExit(f"{repo} is still served by process {serving_pid(git_dir)}: end it first")


def start_watcher(repo: Path) -> subprocess.Popen[str]:
    """``rewind serve --watch`` with its idle-time verification off, its feed armed: served
    ``rewind snapshot`` calls until two in a row are fed (a few ms in the watcher)."""
    # The watcher's environment is the bridges' (set in os.environ by the caller): a watcher
    # hosts only the sessions of its own environment.
    server = subprocess.Popen(
        [*rewind_cmd(), "serve", "--watch"],
        cwd=repo,
        env=child_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    print(f"  {server.stderr.readline().strip()}", flush=True)
    started = time.monotonic()
    fast = 0
    first: float | None = None
    while fast < 2 and time.monotonic() - started < 120:
        done = subprocess.run(
            [*rewind_cmd(), "snapshot", "--json"],
            cwd=repo,
            env=child_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        ms = float(json.loads(done.stdout)["ms"])
        first = ms if first is None else first
        fast = fast + 1 if ms <= max(10.0, first / 5) else 0
        time.sleep(0.5)
    print(f"  watcher armed after {time.monotonic() - started:.1f} s", flush=True)
    return server


def fmt(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:8.1f} ms"


def report(
    files: int,
    runs: int,
    phases: list[tuple[str, Series, list[Series]]],
    floor: dict[str, float],
) -> None:
    print(
        f"\nrestore, 1 file differs, {files} files: first call, median of the later ones "
        f"({runs} runs), ratio of that median to the reference of the same phase"
    )
    print(f"  {'entry point':48s} {'first':>11s} {'median':>11s} {'/ref':>7s}  target")
    for title, ref, rows in phases:
        print(f"  {title}")
        ref_ms = statistics.median(ref.times) if ref.times else None
        print(f"  {'  ' + ref.name:48s} {'':11s} {fmt(ref_ms)} {1.0:7.3f}")
        for s in rows:
            ratio = s.later / ref_ms if s.later is not None and ref_ms else None
            verdict = ""
            if s.target is not None and ratio is not None:
                verdict = f"≤{s.target:.2f} " + ("ok" if ratio <= s.target else "MISSED")
            text = "-" if ratio is None else f"{ratio:7.3f}"
            print(f"  {'  ' + s.name:48s} {fmt(s.first)} {fmt(s.later)} {text:>7s}  {verdict}")
    if floor:
        cold = floor["python -c pass"] + floor["stat scan"]
        print(f"  floors (medians over every round): {describe(floor)}")
        print(
            f"  cold floor (interpreter start + one stat scan): {cold:.1f} ms; "
            f"the targets are for 100k files; {load()}"
        )


def measure(repo: Path, runs: int, tmp: Path, *, cold_only: bool = False) -> None:
    agent = tmp / "agent"
    os.environ["PI_CODING_AGENT_DIR"] = str(agent)  # every child's, as in Pi (never ~/.pi)
    bench = Bench(repo, agent)
    stop_watchers(repo)
    # Session A, for the CLI: written by a bridge that starts no watcher (no UI, local captures).
    os.environ["REWIND_SERVED"] = "0"
    pi_a = one_prompt_session(repo, agent, ui=False)
    os.environ.pop("REWIND_SERVED")
    from tests.bridgekit import FakePi

    assert isinstance(pi_a, FakePi)
    entry_a = next(e["id"] for e in pi_a.entries if e.get("message", {}).get("role") == "user")
    session_a = pi_a.write_file()
    pi_a.close()
    target = subprocess.run(
        [
            *rewind_cmd(),
            "--agent-dir",
            str(agent),
            "restore",
            str(session_a),
            entry_a,
            "--mode",
            "files",
            "--dry-run",
            "--json",
        ],
        cwd=repo,
        env=child_env({"REWIND_SERVED": "0"}),
        capture_output=True,
        text=True,
        check=True,
    )
    target_commit = str(json.loads(target.stdout.splitlines()[0])["target"])
    print(f"  session A {session_a.name}, point {target_commit[:12]} (entry {entry_a})")

    print(f"\nphase 1: nobody watches the repository   ({load()})", flush=True)
    ref1 = Series("reference (sh: git add -A … git restore)")
    cold = Series("rewind restore, cold (REWIND_SERVED=0)", TARGETS["cold"])
    unfetched = Series("  breakdown: cold, no status prefetch")
    lib = Series("  breakdown: restore_commit in-process")
    # What this design cannot avoid (tools/bench_cold_floor.py): the capture's status, and an
    # interpreter that runs it while loading pygit2 and orjson.
    status = Series("  floor: the capture's git status alone")
    least = Series("  floor: python + that status + pygit2/orjson")
    python = bench_floors.INSTALL_PYTHON or sys.executable
    no_prefetch = {"REWIND_SERVED": "0", "REWIND_STATUS_PREFETCH": "0"}
    bench.rounds(
        runs,
        [
            (ref1, bench.reference(target_commit)),
            (cold, bench.cli_restore(session_a, entry_a, child_env({"REWIND_SERVED": "0"}))),
            (unfetched, bench.cli_restore(session_a, entry_a, child_env(no_prefetch))),
            (lib, in_process(bench, target_commit)),
            (status, bench.one_change(status_alone(repo, tmp))),
            (least, bench.one_change(python_status_imports(repo, tmp, python))),
        ],
    )
    phase1 = [cold, unfetched, lib, status, least]

    if cold_only:
        bench.put_back()
        report(
            len(bench_files(repo)),
            runs,
            [("phase 1: nobody watches", ref1, phase1)],
            medians(bench.floor_samples),
        )
        return

    print(f"\nphase 2: rewind serve --watch runs   ({load()})", flush=True)
    # No idle-time verification (full scans in the background would compete for the CPUs).
    os.environ["REWIND_FEED_VERIFY"] = "0"
    server = start_watcher(repo)
    ref2 = Series("reference (sh: git add -A … git restore)")
    served = Series("rewind restore, watcher running", TARGETS["watcher"])
    spawned = Series("/rewind files only, spawned bridge", TARGETS["bridge"])
    hosted = Series("/rewind files only, session hosted by watcher", TARGETS["bridge"])
    pis: list[FakePi] = []
    try:
        pi_b = one_prompt_session(repo, agent, ui=True)
        assert isinstance(pi_b, FakePi)
        pis.append(pi_b)
        cases: list[tuple[Series, Callable[[], float]]] = [
            (ref2, bench.reference(target_commit)),
            (served, bench.cli_restore(session_a, entry_a, child_env())),
            (spawned, bridge_restore(bench, pi_b, _user(pi_b))),
        ]
        try:
            from ledger.bridge.hosted import socket_path
            from ledger.git.repo import GitRepo

            sock = socket_path(GitRepo.discover(repo).git_dir)
            pi_c = one_prompt_session(repo, agent, ui=True, hosted=sock)
            assert isinstance(pi_c, FakePi)
            pis.append(pi_c)
            cases.append((hosted, bridge_restore(bench, pi_c, _user(pi_c))))
        except Exception as exc:  # an older or newer watcher that hosts no sessions
            print(f"  (no hosted session: {type(exc).__name__}: {exc})", flush=True)
        bench.rounds(runs, cases)
    finally:
        for pi in pis:
            pi.close()
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
        print(f"  watcher: {err.strip()}", flush=True)
        bench.put_back()
        stop_watchers(repo)
    rows2 = [served, spawned] + ([hosted] if hosted.times else [])
    report(
        len(bench_files(repo)),
        runs,
        [
            ("phase 1: nobody watches", ref1, phase1),
            ("phase 2: rewind serve --watch runs", ref2, rows2),
        ],
        medians(bench.floor_samples),
    )


def _user(pi: object) -> str:
    from tests.bridgekit import FakePi

    assert isinstance(pi, FakePi)
    return next(e["id"] for e in pi.entries if e.get("message", {}).get("role") == "user")


def bench_files(repo: Path) -> list[bytes]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True)
    return [n for n in out.stdout.split(b"\0") if n]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--files", type=int, default=100_000, help="synthetic repository size")
    parser.add_argument("--repo", type=Path, help="reuse this repository (bench_feed build_repo)")
    parser.add_argument("--runs", type=int, default=7, help="timed rounds per phase")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic repository")
    parser.add_argument(
        "--cold-only", action="store_true", help="phase 1 only (no watcher, no bridge)"
    )
    parser.add_argument(
        "--install",
        type=Path,
        help="a regular (non-editable) install's `rewind` script (e.g. /tmp/ui-venv/bin/rewind): "
        "every child runs it instead of this checkout through the editable venv",
    )
    args = parser.parse_args(argv)
    if args.install is not None:
        _INSTALL.append(args.install.absolute())
        bench_floors.INSTALL_PYTHON = str(args.install.absolute().parent / "python")
        # FakePi (tests/bridgekit.py) spawns this argv for the bridges.
        os.environ["BRIDGEKIT_BRIDGE_CMD"] = json.dumps([str(_INSTALL[0]), "serve", "--stdio"])
    # Every child (the CLI, the bridges, the watcher) runs the code beside this script, with
    # bytecode caches, as on a user's machine.
    env = child_env()
    os.environ.clear()
    os.environ.update(env)
    if not _INSTALL:
        precompile()
    import ledger

    git_version = subprocess.run(["git", "version"], capture_output=True, text=True).stdout
    head = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    install = (
        f"REGULAR install {_INSTALL[0]}"
        if _INSTALL
        else f"EDITABLE venv {sys.executable}, PYTHONPATH {ROOT}"
    )
    print(f"children run: {install}", flush=True)
    print(
        f"ledger {Path(ledger.__file__).parent} ({head}); {git_version.strip()}; python "
        f"{sys.version.split()[0]}; {load()}",
        flush=True,
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench-restore-"))
    try:
        repo = args.repo
        if repo is None:
            from bench_feed import build_repo

            print(f"building a synthetic repository of {args.files} files …", flush=True)
            started = time.perf_counter()
            repo = build_repo(tmp, args.files, PER_DIR)
            print(f"  built in {time.perf_counter() - started:.0f} s", flush=True)
        measure(repo.resolve(), args.runs, tmp, cold_only=args.cold_only)
    finally:
        if args.keep and args.repo is None:
            print(f"repository kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
