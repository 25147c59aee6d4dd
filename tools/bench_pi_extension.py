#!/usr/bin/env python3
"""Benchmark: what the extension adds to a prompt of the real Pi, and the bridge's own overhead.

1. Real Pi 0.73.1 (print mode, scripted offline model) on a synthetic 10k-file repository: a
   prompt with two tool turns that each write a file, with and without
   ``tools/pi-extension/rewind-ledger.ts`` loaded; median wall time of the whole ``pi -p`` run
   and the difference (bridge start, round trips, one pre-prompt and two post-turn captures, the
   ``rewind-turn`` record).
2. The bridge alone (``rewind serve --stdio`` over pipes): median round trip of events that do no
   git work (``ping``, ``message_end``, ``before_agent_start``) — the protocol's own cost, target
   ≤ 5 ms — and of ``turn_start`` (one session call and a capture) on the same repository,
   against the same capture made in-process (``take_snapshot``): the difference is the bridge's
   overhead on an event that does git work.

Needs node and npm (Pi is installed into the cache as the end-to-end tests do).
Not a test: nothing here asserts a time.

Usage: python tools/bench_pi_extension.py [--files 10000] [--runs 5]
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

from tests.e2e.pikit import PiRunner, RpcPi, ensure_pi, turns, write


def build_repo(parent: Path, files: int) -> Path:
    repo = parent / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for i in range(files):
        d = repo / f"d{i // 1000:02d}" / f"s{(i // 100) % 10}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i % 100:03d}.txt").write_text(f"file {i}\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", "-c", "user.name=B", "-c", "user.email=b@e", "commit", "-qm", "base"],
        cwd=repo,
        check=True,
    )
    return repo


def pi_prompts(cli: Path, repo: Path, agent: Path, runs: int, extension: bool) -> list[float]:
    runner = PiRunner(cli, repo, agent, extension=extension)
    times = []
    for n in range(runs + 1):
        prompt = f"bench {n} " + turns(
            [write(f"bench/a{n}.txt", f"{n}\n")], [write(f"bench/b{n}.txt", f"{n}\n")]
        )
        t0 = time.perf_counter()
        runner.run(prompt, *([] if n == 0 else ["-c"]))
        if n:  # the first run creates the session (and our private index)
            times.append((time.perf_counter() - t0) * 1000)
    return times


def rpc_prompts(cli: Path, repo: Path, agent: Path, runs: int, extension: bool) -> list[float]:
    """One long-lived Pi (RPC mode, as interactive use): the bridge starts once per session."""
    rpc = RpcPi(cli, repo, agent, extension=extension)
    times = []
    try:
        for n in range(runs + 1):
            prompt = f"rpc {n} " + turns(
                [write(f"rpc/a{n}.txt", f"{n}\n")], [write(f"rpc/b{n}.txt", f"{n}\n")]
            )
            t0 = time.perf_counter()
            rpc.prompt(prompt)
            if extension:  # done when the prompt's rewind-turn record is in the session
                path = Path(rpc.state()["sessionFile"])
                while path.read_text().count('"customType":"rewind-turn"') < n + 1:
                    time.sleep(0.002)
            if n:
                times.append((time.perf_counter() - t0) * 1000)
    finally:
        rpc.close()
    return times


class Bridge:
    def __init__(self, repo: Path, agent: Path) -> None:
        env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ledger", "serve", "--stdio"],
            cwd=repo,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.repo = repo
        self.entries: list[dict] = []
        self.header = {
            "type": "session",
            "version": 3,
            "id": "bench",
            "timestamp": "2026-11-23T00:00:00.000Z",
            "cwd": str(repo),
        }
        self.ids = 0

    def event(self, name: str, payload: dict) -> float:
        assert self.proc.stdin and self.proc.stdout
        self.ids += 1
        t0 = time.perf_counter()
        self.proc.stdin.write(
            (
                json.dumps(
                    {
                        "type": "event",
                        "id": self.ids,
                        "event": name,
                        "payload": payload,
                        "ctx": {
                            "hasUI": False,
                            "cwd": str(self.repo),
                            "sessionFile": None,
                            "leafId": self.entries[-1]["id"] if self.entries else None,
                        },
                    }
                )
                + "\n"
            ).encode()
        )
        self.proc.stdin.flush()
        while True:
            message = json.loads(self.proc.stdout.readline())
            if message["type"] == "call":
                result = {
                    "header": self.header,
                    "entries": self.entries[message["params"].get("from", 0) :],
                    "total": len(self.entries),
                    "leafId": self.entries[-1]["id"] if self.entries else None,
                    "sessionFile": None,
                }
                self.proc.stdin.write(
                    (
                        json.dumps({"type": "reply", "id": message["id"], "result": result}) + "\n"
                    ).encode()
                )
                self.proc.stdin.flush()
                continue
            assert message["id"] == self.ids and message["type"] == "result", message
            return (time.perf_counter() - t0) * 1000

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cli = ensure_pi()
    tmp = Path(tempfile.mkdtemp(prefix="bench-pi-"))
    try:
        repo = build_repo(tmp, args.files)
        print(
            f"repository: {args.files} files; Pi 0.73.1 print mode, scripted model, 2 tool turns per prompt",
            flush=True,
        )
        without = pi_prompts(cli, repo, tmp / "agent-plain", args.runs, extension=False)
        with_ext = pi_prompts(cli, repo, tmp / "agent-rewind", args.runs, extension=True)
        a, b = statistics.median(without), statistics.median(with_ext)
        print(f"  pi -p without the extension   {a:8.0f} ms (median of {args.runs})")
        print(
            f"  pi -p with rewind-ledger       {b:8.0f} ms   added {b - a:+.0f} ms per prompt "
            "(a new Pi process per prompt: includes starting the bridge)"
        )
        c = statistics.median(
            rpc_prompts(cli, repo, tmp / "agent-rpc-plain", args.runs, extension=False)
        )
        d = statistics.median(
            rpc_prompts(cli, repo, tmp / "agent-rpc-rewind", args.runs, extension=True)
        )
        print(f"  one Pi session (rpc), without  {c:8.0f} ms per prompt")
        print(
            f"  one Pi session (rpc), with     {d:8.0f} ms per prompt   added {d - c:+.0f} ms "
            "(3 captures, round trips, the record)"
        )
        from ledger.git.repo import GitRepo
        from ledger.git.store.snapshot import take_snapshot

        git_repo = GitRepo.discover(str(repo))
        bridge = Bridge(repo, tmp / "agent-bridge")
        bridge.event("session_start", {"reason": "startup"})
        samples: dict[str, list[float]] = {
            "ping": [],
            "message_end": [],
            "before_agent_start": [],
            "turn_start": [],
        }
        direct = []
        for n in range(200):
            samples["ping"].append(bridge.event("ping", {}))
            samples["message_end"].append(bridge.event("message_end", {"role": "user"}))
            samples["before_agent_start"].append(
                bridge.event("before_agent_start", {"prompt": f"p{n}"})
            )
            if n < 40:  # interleaved with the same capture in-process, so that load drifts hit both
                samples["turn_start"].append(bridge.event("turn_start", {"turnIndex": 0}))
                bridge.event("agent_end", {})
                t0 = time.perf_counter()
                take_snapshot(git_repo)
                direct.append((time.perf_counter() - t0) * 1000)
        bridge.close()
        print("bridge round trips (rewind serve --stdio over pipes, medians)")
        for name, values in samples.items():
            note = (
                "  (one session call + a capture of the work tree)"
                if name == "turn_start"
                else "  target <= 5 ms"
            )
            print(f"  {name:20s} {statistics.median(values):7.2f} ms{note}")
        capture = statistics.median(direct)
        print(
            f"  {'same capture in-process':20s} {capture:7.2f} ms  -> bridge overhead on turn_start "
            f"{statistics.median(samples['turn_start']) - capture:+.2f} ms  target <= 5 ms"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
