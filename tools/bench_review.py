"""Benchmark: ``rewind log --patch`` over 200 turns and ``rewind report`` of a 200-turn session
on a synthetic 10k-file repository (target: each <= 2 s). Prints medians.

Usage: .venv/bin/python tools/bench_review.py [--files 10000] [--turns 200] [--runs 3]
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger.cli import main
from ledger.clock import SystemClock
from ledger.git.repo import GitRepo
from ledger.git.store.snapshot import take_snapshot
from ledger.record_models import build_turn
from ledger.records import TURN
from ledger.session.store import SessionAppender, create_session_file


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def build(root: Path, files: int, turns: int) -> tuple[Path, Path]:
    """A repo of ``files`` files and a session whose every prompt has one turn editing 3 files."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for i in range(files):
        d = repo / f"pkg{i % 100:02}"
        d.mkdir(exist_ok=True)
        (d / f"m{i}.py").write_text("".join(f"value_{j} = {i * j}\n" for j in range(20)))
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=b", "-c", "user.email=b@e", "commit", "-qm", "base")
    agent = root / "agent"
    path = create_session_file(agent / "sessions", str(repo))
    writer = SessionAppender(path)
    r = GitRepo.discover(repo)
    now = SystemClock().now_ms()
    prompts = max(1, turns // 2)
    for p in range(prompts):
        before = take_snapshot(r, last_exact=None).commit
        user = writer.append_entry(
            {
                "type": "message",
                "message": {"role": "user", "content": f"prompt {p}", "timestamp": now},
            }
        )
        bound = [(user["id"], before)]
        for t in range(2):
            for k in range(3):
                f = (
                    repo
                    / f"pkg{(p * 7 + t * 3 + k) % 100:02}"
                    / f"m{(p * 31 + t * 11 + k * 97) % files}.py"
                )
                if f.exists():
                    text = f.read_text().splitlines(keepends=True)
                    text[(p + k) % len(text)] = f"changed_{p}_{t} = {k}\n"
                    f.write_text("".join(text))
            after = take_snapshot(r, last_exact=None).commit
            reply = writer.append_entry(
                {
                    "type": "message",
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": f"turn {t} of prompt {p}"}],
                        "timestamp": now,
                    },
                }
            )
            bound.append((reply["id"], after))
        writer.append_custom(TURN, build_turn(bound).to_data())
    return repo, path


def timed(argv: list[str], cwd: Path, runs: int) -> float:
    import os

    times = []
    for _ in range(runs):
        old = os.getcwd()
        os.chdir(cwd)
        start = time.perf_counter()
        with redirect_stdout(io.StringIO()):
            code = main(argv)
        times.append(time.perf_counter() - start)
        os.chdir(old)
        assert code == 0, argv
    return statistics.median(times)


def main_bench() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-review-") as tmp:
        start = time.perf_counter()
        repo, session = build(Path(tmp), args.files, args.turns)
        print(
            f"setup: {args.files} files, {args.turns} turns in {time.perf_counter() - start:.1f} s"
        )
        agent = ["--agent-dir", str(Path(tmp) / "agent")]
        log = timed(["log", str(session), "--patch", "--no-color", *agent], repo, args.runs)
        print(f"rewind log --patch ({args.turns} turns): median {log:.3f} s (target <= 2 s)")
        out = Path(tmp) / "r.html"
        report = timed(["report", str(session), "-o", str(out), *agent], repo, args.runs)
        print(
            f"rewind report ({args.turns} turns): median {report:.3f} s (target <= 2 s), {out.stat().st_size} bytes"
        )


if __name__ == "__main__":
    main_bench()
