"""Kill campaign: ``kill -9`` a real ``rewind restore`` process group at many moments and check
that every byte comes back.

Each run starts from the same pre-restore state (files at "v2"), runs ``rewind restore SESSION
ENTRY --mode files --yes`` to an older point ("v1") in its own process group, kills the group with
SIGKILL after a delay spread over the restore's measured duration, and then does what a user
would: ``rewind doctor``, and ``rewind undo SESSION --yes`` when the doctor reports an
interrupted restore or the restore completed. The work tree must then equal the pre-restore state
byte for byte (contents, modes, symlinks, no extra files).

Prints one line per run and a summary: ``runs, interrupted, recovered exactly, lost``.

    python tools/fault_campaign.py --files 5000 --runs 20
    python tools/fault_campaign.py --files 200 --file-bytes 1000000 --runs 10
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger.clock import SystemClock, iso_from_ms
from ledger.engine.engine import Engine
from ledger.engine.host import FileHost
from ledger.git.repo import GitRepo
from ledger.session.store import SessionAppender, create_session_file


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=_env()
    ).stdout


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def snapshot_files(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every path under ``root`` but ``.git``: (kind+mode, content or link target)."""
    out: dict[str, tuple[str, bytes]] = {}
    for directory, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(directory, root)
        if rel_dir == ".git" or rel_dir.startswith(".git" + os.sep):
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not (rel_dir == "." and d == ".git")]
        for name in dirs:
            full = os.path.join(directory, name)
            if os.path.islink(full):
                out[os.path.normpath(os.path.join(rel_dir, name))] = (
                    "link",
                    os.fsencode(os.readlink(full)),
                )
        for name in files:
            full = os.path.join(directory, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            st = os.lstat(full)
            if os.path.islink(full):
                out[rel] = ("link", os.fsencode(os.readlink(full)))
            else:
                with open(full, "rb") as handle:
                    out[rel] = (f"file {st.st_mode & 0o111:o}", handle.read())
    return out


@dataclass
class World:
    root: Path
    repo: Path
    agent_dir: Path
    session: Path
    entry: str
    before: dict[str, tuple[str, bytes]] = field(default_factory=dict)


def build_world(base: Path, files: int, file_bytes: int) -> World:
    """A repository whose session has a point at "v1" (the restore target) and whose work tree is
    at "v2" (every file changed, some added and deleted, a mode change and a symlink)."""
    repo, agent_dir = base / "repo", base / "agent"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.name", "Campaign")
    _git(repo, "config", "user.email", "campaign@example.com")
    rng = random.Random(7)

    def content(i: int, version: str) -> bytes:
        line = f"{version} file {i} ".encode()
        body = (line * (file_bytes // len(line) + 1))[:file_bytes]
        return body + bytes([rng.randrange(256)])

    def write_version(version: str) -> None:
        for i in range(files):
            path = repo / f"d{i % 50:02d}" / f"f{i:05d}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content(i, version))

    write_version("v1")
    (repo / "tool.sh").write_text("#!/bin/sh\necho v1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "v1")
    now = SystemClock().now_ms()
    session = create_session_file(
        agent_dir / "sessions",
        str(repo),
        [
            {
                "type": "model_change",
                "id": "m0000001",
                "parentId": None,
                "timestamp": iso_from_ms(now),
                "provider": "campaign",
                "modelId": "campaign-1",
            }
        ],
    )
    host = FileHost(session, agent_dir / "sessions")
    engine = Engine(host, GitRepo.discover(repo))
    engine.session_start("startup")
    writer = SessionAppender(session)

    def prompt(text: str, change: object) -> str:
        engine.before_agent_start(text)
        engine.turn_start(0)
        user = writer.append_entry(
            {
                "type": "message",
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": text}],
                    "timestamp": SystemClock().now_ms(),
                },
            }
        )["id"]
        if callable(change):
            change()
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": "done"}],
            "api": "campaign",
            "provider": "campaign",
            "model": "campaign-1",
            "stopReason": "stop",
            "timestamp": SystemClock().now_ms(),
        }
        writer.append_entry({"type": "message", "message": message})
        engine.turn_end(0, message=message)
        engine.agent_end()
        return str(user)

    def to_v2() -> None:
        write_version("v2")
        (repo / "tool.sh").chmod(0o755)
        for i in range(0, files, 97):
            (repo / f"d{i % 50:02d}" / f"f{i:05d}.txt").unlink()
        for i in range(20):
            (repo / "new" / f"n{i}.txt").parent.mkdir(exist_ok=True)
            (repo / "new" / f"n{i}.txt").write_text(f"new {i}\n")
        os.symlink("tool.sh", repo / "link-to-tool")

    entry = prompt("change everything", to_v2)  # its point is the state before: v1
    world = World(base, repo, agent_dir, session, entry)
    world.before = snapshot_files(repo)
    return world


def rewind(world: World, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", *args],
        cwd=world.repo,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**_env(), "PI_CODING_AGENT_DIR": str(world.agent_dir)},
        stdin=subprocess.DEVNULL,
    )


def measure_restore(world: World) -> float:
    """Seconds one whole restore process takes (then undone, back to the pre-restore state)."""
    started = time.perf_counter()
    result = rewind(world, "restore", str(world.session), world.entry, "--mode", "files", "--yes")
    took = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"restore failed: {result.stderr}")
    undo = rewind(world, "undo", str(world.session), "--yes")
    if undo.returncode != 0 or snapshot_files(world.repo) != world.before:
        raise SystemExit(f"undo did not bring the state back: {undo.stderr}")
    return took


@dataclass
class Outcome:
    delay: float
    interrupted: bool
    completed: bool
    exact: bool
    doctor_code: int
    detail: str = ""


def kill_run(world: World, delay: float) -> Outcome:
    """One restore killed (process group, SIGKILL) after ``delay`` seconds, then the user's
    recovery; the pre-restore state must come back exactly."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ledger",
            "restore",
            str(world.session),
            world.entry,
            "--mode",
            "files",
            "--yes",
        ],
        cwd=world.repo,
        env={**_env(), "PI_CODING_AGENT_DIR": str(world.agent_dir)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(delay)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    code = proc.wait()
    doctor = rewind(world, "doctor")
    interrupted = "interrupted" in doctor.stderr
    now = snapshot_files(world.repo)
    completed = code == 0
    detail = ""
    if interrupted or now != world.before:
        undo = rewind(world, "undo", str(world.session), "--yes")
        if undo.returncode != 0:
            detail = (
                undo.stderr.strip().splitlines()[-1]
                if undo.stderr.strip()
                else f"undo exit {undo.returncode}"
            )
    after = snapshot_files(world.repo)
    if after != world.before and not detail:
        wrong = sorted(
            k for k in set(after) | set(world.before) if after.get(k) != world.before.get(k)
        )
        detail = f"{len(wrong)} paths differ, e.g. {wrong[:3]}"
    return Outcome(delay, interrupted, completed, after == world.before, doctor.returncode, detail)


def campaign(
    base: Path, *, files: int, file_bytes: int, runs: int, seed: int = 1, echo: bool = True
) -> list[Outcome]:
    world = build_world(base, files, file_bytes)
    duration = measure_restore(world)
    if echo:
        print(
            f"{files} files of ~{file_bytes} bytes; one restore process takes {duration * 1000:.0f} ms"
        )
    rng = random.Random(seed)
    outcomes = []
    for i in range(runs):
        delay = duration * (0.15 + 0.9 * (i + rng.random()) / runs)
        outcome = kill_run(world, delay)
        outcomes.append(outcome)
        if echo:
            state = (
                "interrupted"
                if outcome.interrupted
                else "completed"
                if outcome.completed
                else "not started"
            )
            print(
                f"run {i + 1:>3}: kill at {delay * 1000:6.0f} ms  {state:<12} doctor exit {outcome.doctor_code}  "
                f"{'recovered exactly' if outcome.exact else 'LOST ' + outcome.detail}"
            )
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--file-bytes", type=int, default=64)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rewind-campaign-"))
    try:
        outcomes = campaign(
            base, files=args.files, file_bytes=args.file_bytes, runs=args.runs, seed=args.seed
        )
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    interrupted = sum(o.interrupted for o in outcomes)
    exact = sum(o.exact for o in outcomes)
    print(
        f"runs {len(outcomes)}, interrupted {interrupted}, recovered exactly {exact}, lost {len(outcomes) - exact}"
    )
    return 0 if exact == len(outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
