"""Benchmark: ``rewind export`` and ``rewind import`` of a session with 500 snapshots (target:
export + import <= 5 s), next to a plain reference in the same run (``git bundle create`` of a
ref over the same commits + ``tar`` of the session file; ``git fetch`` from that bundle).

Usage: .venv/bin/python tools/bench_portable.py [--snapshots 500] [--files 2000] [--runs 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pygit2

from ledger.clock import SystemClock
from ledger.git.repo import GitRepo
from ledger.git.store.snapshot import commit_snapshot
from ledger.portable import export_archive, import_archive
from ledger.record_models import build_turn
from ledger.records import TURN
from ledger.session.store import SessionAppender, create_session_file


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def build(root: Path, snapshots: int, files: int) -> tuple[Path, Path, list[str]]:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for i in range(files):
        d = repo / f"d{i % 50:02}"
        d.mkdir(exist_ok=True)
        (d / f"f{i}.txt").write_text(f"file {i}\n" * 10)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=b", "-c", "user.email=b@e", "commit", "-qm", "base")
    r = GitRepo.discover(repo)
    pg = r.pygit2
    tree = pg.revparse_single("HEAD^{tree}")
    shas = []
    for n in range(snapshots):
        d = f"d{n % 50:02}"
        sub = pg.TreeBuilder(tree[d])
        sub.insert(
            f"f{n % files}.txt",
            pg.create_blob(f"snapshot {n}\n".encode()),
            pygit2.enums.FileMode.BLOB,
        )
        top = pg.TreeBuilder(tree)
        top.insert(d, sub.write(), pygit2.enums.FileMode.TREE)
        tree = pg.get(top.write())
        shas.append(commit_snapshot(r, str(tree.id), last_exact=None).commit)
    path = create_session_file(root / "agent" / "sessions", str(repo))
    writer = SessionAppender(path)
    now = SystemClock().now_ms()
    for p in range(0, snapshots, 2):
        user = writer.append_entry(
            {"type": "message", "message": {"role": "user", "content": f"p{p}", "timestamp": now}}
        )
        reply = writer.append_entry(
            {"type": "message", "message": {"role": "assistant", "content": "ok", "timestamp": now}}
        )
        pair = [(user["id"], shas[p])] + ([(reply["id"], shas[p + 1])] if p + 1 < snapshots else [])
        writer.append_custom(TURN, build_turn(pair).to_data())
    return repo, path, shas


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--snapshots", type=int, default=500)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-portable-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        repo, session, shas = build(root, args.snapshots, args.files)
        print(
            f"setup: {args.files} files, {args.snapshots} snapshots in {time.perf_counter() - start:.1f} s"
        )
        ours_export, ours_import, ref_export, ref_import = [], [], [], []
        for run in range(args.runs):
            archive = root / f"s{run}.rewind"
            t = time.perf_counter()
            export_archive(GitRepo.discover(repo), session, archive)
            ours_export.append(time.perf_counter() - t)
            clone = root / f"clone{run}"
            git(root, "clone", "-q", str(repo), str(clone))
            t = time.perf_counter()
            report = import_archive(GitRepo.discover(clone), root / f"agent{run}", archive)
            ours_import.append(time.perf_counter() - t)
            assert report.appended == len(set(shas)), report
            # reference: a ref over the snapshots (the store), git bundle create + tar; git fetch
            ref_archive = root / f"ref{run}.tar"
            t = time.perf_counter()
            git(repo, "bundle", "create", str(root / f"ref{run}.bundle"), "refs/pi-rewind/store")
            with tarfile.open(ref_archive, "w") as tar:
                tar.add(root / f"ref{run}.bundle", "b.bundle")
                tar.add(session, "s.jsonl")
            ref_export.append(time.perf_counter() - t)
            clone2 = root / f"refclone{run}"
            git(root, "clone", "-q", str(repo), str(clone2))
            t = time.perf_counter()
            with tarfile.open(ref_archive) as tar:
                tar.extractall(root / f"refx{run}", filter="data")
            git(
                clone2,
                "fetch",
                "-q",
                str(root / f"refx{run}" / "b.bundle"),
                "refs/pi-rewind/store:refs/pi-rewind/store",
            )
            ref_import.append(time.perf_counter() - t)
            shutil.rmtree(clone)
            shutil.rmtree(clone2)
        med = statistics.median
        print(
            f"rewind export ({args.snapshots} snapshots): median {med(ours_export):.3f} s, "
            f"archive {archive.stat().st_size} bytes"
        )
        print(f"rewind import ({args.snapshots} snapshots): median {med(ours_import):.3f} s")
        print(
            f"export + import: median {med(ours_export) + med(ours_import):.3f} s (target <= 5 s)"
        )
        print(
            f"reference git bundle create + tar: median {med(ref_export):.3f} s; "
            f"untar + git fetch: median {med(ref_import):.3f} s"
        )


if __name__ == "__main__":
    main()
