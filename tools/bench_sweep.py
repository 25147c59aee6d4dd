#!/usr/bin/env python3
"""Benchmark: a ``repo-sessions`` retention sweep, ours vs the reference's method, same run.

Setup (issue 5): one repository whose store keeps 5,000 snapshot commits; 1,000 session files
of that repository, 900 without rewind records (40 messages each) and 100 with (a
``rewind-turn`` per prompt binding 50 snapshots in all); retention ``maxSnapshots`` 2,000.

- ours: :func:`ledger.retention.sweep.run_sweep` (header-only fast path for files without
  ``"rewind-``, pygit2 existence checks and keepalive commits, one compare-and-swap).
- reference method (docs/design.md#the-references-methods): parse every file line by line, one
  ``git cat-file -e`` per pinned/live commit, one ``git commit-tree`` per keepalive, then
  ``update-ref``.

The store ref is reset to the original chain before every run. Target: ours ≤ 2 s.
Not a test: nothing here asserts a time.

Usage: python tools/bench_sweep.py [--runs 5] [--reference-runs 1]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pygit2

from ledger.clock import iso_from_ms
from ledger.git.repo import GitRepo
from ledger.git.store.chain import STORE_REF
from ledger.git.store.rewrite import rewrite_store
from ledger.record_models import build_turn
from ledger.records import TURN, custom_entry, serialize_entry
from ledger.retention.plan import Policy
from ledger.retention.sweep import run_sweep
from ledger.session.store import encode_cwd

SNAPSHOTS, SESSIONS, WITH_RECORDS, PER_LEDGER, MAX_SNAPSHOTS = 5000, 1000, 100, 50, 2000


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    return (
        subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )


def build(root: Path) -> tuple[Path, Path, Path, str]:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "Bench")
    git(repo, "config", "user.email", "bench@example.com")
    r = pygit2.Repository(str(repo))
    sig = pygit2.Signature("Bench", "bench@example.com", 1_790_000_000, 0)
    shas = []
    for i in range(SNAPSHOTS):
        builder = r.TreeBuilder()
        builder.insert("f.txt", r.create_blob(f"state {i}\n".encode()), pygit2.GIT_FILEMODE_BLOB)
        shas.append(
            str(r.create_commit(None, sig, sig, "pi rewind snapshot\n", builder.write(), []))
        )
    gitrepo = GitRepo.discover(repo)
    rewrite_store(gitrepo, shas, since=None, now_ms=1_790_000_000_000)
    head = git(repo, "rev-parse", STORE_REF)
    agent = root / "agent"
    sessions = agent / "sessions" / encode_cwd(str(repo))
    sessions.mkdir(parents=True)
    now = int(time.time() * 1000)
    start = None
    for n in range(SESSIONS):
        lines = [
            json.dumps(
                {
                    "type": "session",
                    "version": 3,
                    "id": f"s{n:05d}",
                    "timestamp": iso_from_ms(now),
                    "cwd": str(repo),
                }
            ).encode()
        ]
        parent = None
        for m in range(40):
            entry_id = f"{n:04x}{m:04x}"
            lines.append(
                json.dumps(
                    {
                        "type": "message",
                        "id": entry_id,
                        "parentId": parent,
                        "timestamp": iso_from_ms(now - (SESSIONS - n) * 60_000 + m),
                        "message": {
                            "role": "user" if m % 2 == 0 else "assistant",
                            "content": f"message {m} of session {n}",
                            "timestamp": now,
                        },
                    }
                ).encode()
            )
            parent = entry_id
            if n < WITH_RECORDS and m % 2 == 1 and m // 2 < PER_LEDGER:
                k = (n * PER_LEDGER + m // 2) % SNAPSHOTS
                pairs = [(f"{n:04x}{m - 1:04x}", shas[k]), (entry_id, shas[(k + 1) % SNAPSHOTS])]
                record = custom_entry(
                    TURN,
                    build_turn(pairs).to_data(),
                    f"r{n:03x}{m:04x}",
                    parent,
                    iso_from_ms(now - (SESSIONS - n) * 60_000 + m),
                )
                lines.append(serialize_entry(record))
                parent = record["id"]
        path = sessions / f"2026-11-22T00-00-00-000Z_s{n:05d}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        if n == 0:
            start = path
    assert start is not None
    return repo, agent, start, head


def ours(repo: Path, agent: Path, start: Path, *, count_objects: bool = False) -> float:
    t0 = time.perf_counter()
    report = run_sweep(
        GitRepo.discover(repo),
        start,
        agent,
        scan_mode="repo-sessions",
        policy=Policy(max_snapshots=MAX_SNAPSHOTS),
        count_objects=count_objects,
    )
    elapsed = (time.perf_counter() - t0) * 1000
    assert report.rewritten and report.sessions_read == SESSIONS, report.to_json()
    assert report.unreachable_objects > 0 or not count_objects
    return elapsed


def reference(repo: Path, agent: Path) -> float:
    """The reference's method: full parse of every file; cat-file -e and commit-tree per commit."""
    t0 = time.perf_counter()
    latest: dict[str, int] = {}
    current: list[str] = []
    for path in sorted((agent / "sessions").rglob("*.jsonl")):
        lines = path.read_text().split("\n")
        header = json.loads(lines[0])
        if not str(header.get("cwd", "")).startswith(str(repo)):
            continue
        for line in lines[1:]:
            if not line.strip():
                continue
            entry = json.loads(line)
            if entry.get("type") == "custom" and entry.get("customType") in (
                "rewind-turn",
                "rewind-op",
            ):
                data = entry["data"]
                ms = int(
                    time.mktime(time.strptime(entry["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) * 1000
                )
                for _, index in data.get("bindings", []):
                    sha = data["snapshots"][index]
                    latest[sha] = max(latest.get(sha, 0), ms)
                if isinstance(data.get("current"), int):
                    current.append(data["snapshots"][data["current"]])
    candidates = sorted(latest, key=lambda s: -latest[s])[:MAX_SNAPSHOTS]
    live = list(dict.fromkeys(current + candidates))
    live = [
        sha
        for sha in live
        if subprocess.run(
            ["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=repo, check=False
        ).returncode
        == 0
    ]
    empty = git(repo, "hash-object", "-t", "tree", "-w", "/dev/null")
    parent = None
    for sha in live:
        args = [
            "commit-tree",
            empty,
            *(["-p", parent] if parent else []),
            "-p",
            sha,
            "-m",
            "pi rewind store",
        ]
        parent = git(repo, *args)
    old = git(repo, "rev-parse", STORE_REF)
    git(repo, "update-ref", STORE_REF, parent or "", old)
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--reference-runs", type=int, default=1)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        t0 = time.perf_counter()
        repo, agent, start, head = build(root)
        print(
            f"built {SNAPSHOTS} snapshots and {SESSIONS} session files ({WITH_RECORDS} with records) "
            f"in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        mine, counted, theirs = [], [], []
        for _ in range(args.runs):
            git(repo, "update-ref", STORE_REF, head)
            mine.append(ours(repo, agent, start))
            git(repo, "update-ref", STORE_REF, head)
            counted.append(ours(repo, agent, start, count_objects=True))
        for _ in range(args.reference_runs):
            git(repo, "update-ref", STORE_REF, head)
            theirs.append(reference(repo, agent))
        m, c, r = statistics.median(mine), statistics.median(counted), statistics.median(theirs)
        print(
            f"repo-sessions sweep, {SESSIONS} files / {SNAPSHOTS} snapshots, maxSnapshots {MAX_SNAPSHOTS}"
        )
        print(
            f"  ours (median of {args.runs})          {m:8.0f} ms   target <= 2000 ms {'ok' if m <= 2000 else 'MISSED'}"
        )
        print(
            f"  ours + gc-reclaimable object count (rewind sweep) {c:6.0f} ms   target <= 2000 ms "
            f"{'ok' if c <= 2000 else 'MISSED'}"
        )
        print(
            f"  reference method (median of {args.reference_runs}) {r:8.0f} ms   ours/reference = {m / r:.3f}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    sys.exit(main())
