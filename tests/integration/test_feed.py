"""The change feed's fallbacks and verification, on real repositories and real inotify.

Each test arms a feed (:class:`ledger.git.feed.service.Feed`) on a temporary repository, breaks it the
way the issue lists (queue overflow, watch limit, a dead watcher thread, rule-file edits, a
write through ``mmap`` that inotify cannot see), and checks that every capture still equals a
fresh-index ``git add -A`` tree and that the feed says why it stopped trusting itself. The last
tests run the real ``rewind serve --stdio`` process with the feed on, and the CLI on a full disk.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pytest

from ledger.git.capture.index import VerifyIndex
from ledger.git.capture.scan import Capturer
from ledger.git.feed.inotify import BACKGROUND_NICE, lower_thread_priority
from ledger.git.feed.service import Feed
from ledger.git.repo import GitRepo
from ledger.git.runner import GitRunner, idle_priority_git
from ledger.records import TURN
from tests.bridgekit import FakePi
from tests.gitkit import fresh_tree, git
from tests.snapshotkit import NO_PROTECTION as NONE

pytestmark = pytest.mark.needs("change_feed")


def _arm(repo: Path, **kwargs: object) -> tuple[Feed, GitRepo]:
    gitrepo = GitRepo.discover(repo)
    feed = Feed(gitrepo.root, gitrepo.git_dir, verify=False, **kwargs)  # type: ignore[arg-type]
    feed.start()
    deadline = time.monotonic() + 10
    while not feed.watcher.ready and not feed.watcher.failed:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return feed, gitrepo


def _capture(feed: Feed, gitrepo: GitRepo) -> str:
    return Capturer(gitrepo, NONE).capture_with(feed).tree


@pytest.fixture
def armed(repo: Path) -> Iterator[tuple[Feed, GitRepo]]:
    for i in range(5):
        (repo / f"d{i}").mkdir()
        (repo / f"d{i}" / "f.txt").write_text(f"{i}\n")
    feed, gitrepo = _arm(repo)
    assert _capture(feed, gitrepo) == fresh_tree(repo)
    yield feed, gitrepo
    feed.close()


def test_small_changes_are_fed_and_exact(repo: Path, armed: tuple[Feed, GitRepo]) -> None:
    feed, gitrepo = armed
    full = feed.counters.full
    assert _capture(feed, gitrepo) == fresh_tree(repo)
    (repo / "d1" / "f.txt").write_text("changed\n")
    (repo / "new").mkdir()
    (repo / "new" / "n.txt").write_text("n\n")
    assert _capture(feed, gitrepo) == fresh_tree(repo)
    assert feed.counters.full == full and feed.counters.fed == 2


def test_a_directory_moved_away_and_made_again_loses_its_old_files(
    repo: Path, armed: tuple[Feed, GitRepo]
) -> None:
    # The watcher names only the moved directory, not the files it held (found by the property
    # test: rename dir → new, then write dir/c.txt; the fed tree kept the old dir/ files).
    feed, gitrepo = armed
    (repo / "d1" / "sub").mkdir()
    (repo / "d1" / "sub" / "deep.txt").write_text("deep\n")
    assert _capture(feed, gitrepo) == fresh_tree(repo)
    (repo / "d1").rename(repo / "moved")
    (repo / "d1").mkdir()
    (repo / "d1" / "other.txt").write_text("other\n")
    fed = feed.counters.fed
    assert _capture(feed, gitrepo) == fresh_tree(repo)
    assert feed.counters.fed == fed + 1


def test_queue_overflow_falls_back_and_rearms(repo: Path, armed: tuple[Feed, GitRepo]) -> None:
    feed, gitrepo = armed
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 100_000:
        pytest.skip(f"fs.inotify.max_queued_events is {limit}: too many files to overflow it")
    spill = repo / "spill"
    spill.mkdir()
    _capture(feed, gitrepo)
    with feed.watcher.lock:  # the reader thread waits: the kernel queue fills up
        for i in range(limit + 100):
            (spill / f"{i}").touch()
        (repo / "d0" / "f.txt").write_text("after the flood\n")
    assert _capture(feed, gitrepo) == fresh_tree(repo)
    assert "overflow" in feed.last_reason
    (repo / "d2" / "f.txt").write_text("fed again\n")
    fed = feed.counters.fed
    assert _capture(feed, gitrepo) == fresh_tree(repo)
    assert feed.counters.fed == fed + 1


def test_watch_limit_means_full_scans(repo: Path) -> None:
    for i in range(6):
        (repo / f"d{i}").mkdir()
    feed, gitrepo = _arm(repo, max_watches=3)
    try:
        assert feed.watcher.failed and "watch limit" in feed.watcher.failed
        for i in range(3):
            (repo / f"d{i}" / "x.txt").write_text(f"{i}\n")
            assert _capture(feed, gitrepo) == fresh_tree(repo)
        assert feed.counters.fed == 0 and feed.describe()["mode"] == "full-scan"
    finally:
        feed.close()


def test_a_capture_during_the_watchers_walk_does_not_wait_for_it(repo: Path) -> None:
    # The walk takes the watcher's lock once per directory, and Python's locks are not fair: a
    # capture that waited for that lock waited for the whole walk (2 s at 100k files, seen in
    # tools/bench_feed.py). Here the lock is held for as long as the capture may take.
    (repo / "a.txt").write_text("a\n")
    gitrepo = GitRepo.discover(repo)
    feed = Feed(gitrepo.root, gitrepo.git_dir, verify=False)
    feed.watcher.lock.acquire()  # the walk cannot finish: ready stays False
    try:
        feed.start()
        done: list[str] = []
        worker = threading.Thread(target=lambda: done.append(_capture(feed, gitrepo)))
        worker.start()
        worker.join(timeout=30)
        assert done == [fresh_tree(repo)], "the capture waited for the watcher's walk"
        assert not feed.watcher.ready and feed.counters.full == 1 and feed.base is None
    finally:
        feed.watcher.lock.release()
        feed.close()


def test_a_dead_watcher_thread_means_full_scans(repo: Path, armed: tuple[Feed, GitRepo]) -> None:
    feed, gitrepo = armed
    feed.watcher.crash_thread()
    deadline = time.monotonic() + 5
    while feed.watcher.alive():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (repo / "d3" / "f.txt").write_text("unseen by a dead watcher\n")
    fed = feed.counters.fed
    assert _capture(feed, gitrepo) == fresh_tree(repo)
    assert feed.counters.fed == fed and "died" in (feed.watcher.failed or "")


def test_rule_file_edits_fall_back(repo: Path, armed: tuple[Feed, GitRepo]) -> None:
    feed, gitrepo = armed
    (repo / "d1" / ".gitignore").write_text("f.txt\n")
    assert _capture(feed, gitrepo) == fresh_tree(repo)
    assert ".gitignore" in feed.last_reason
    git(repo, "config", "core.excludesFile", str(repo / "d4" / "f.txt"))
    assert _capture(feed, gitrepo) == fresh_tree(repo)
    assert "configuration" in feed.last_reason


def test_an_edit_of_the_excludes_file_outside_the_tree_falls_back(
    repo: Path, tmp_path: Path
) -> None:
    # core.excludesFile and core.attributesFile name files no watch sees: their stat data is
    # part of the environment signature, so an edit sends the next capture to a full scan.
    excludes = tmp_path / "global-excludes"
    excludes.write_text("*.tmp\n")
    git(repo, "config", "core.excludesFile", str(excludes))
    (repo / "d1").mkdir()
    (repo / "d1" / "f.txt").write_text("tracked until ignored\n")
    feed, gitrepo = _arm(repo)
    try:
        assert _capture(feed, gitrepo) == fresh_tree(repo)
        excludes.write_text("*.tmp\nd1/\n")
        assert _capture(feed, gitrepo) == fresh_tree(repo)
        assert "configuration" in feed.last_reason
    finally:
        feed.close()


def test_an_mmap_write_is_caught_by_verification(repo: Path, armed: tuple[Feed, GitRepo]) -> None:
    feed, gitrepo = armed
    target = repo / "d2" / "f.txt"
    target.write_text("0123456789\n")
    _capture(feed, gitrepo)
    with open(target, "r+b") as handle:
        mapped = mmap.mmap(handle.fileno(), 0)
    try:
        time.sleep(0.02)
        mapped[0:4] = b"MMAP"  # no inotify event: the fd is closed, the mapping stays open
        mapped.flush()
        assert feed.verify_now() is False
    finally:
        mapped.close()
    assert feed.disabled and feed.evidence == ["d2/f.txt"]
    evidence = json.loads((gitrepo.git_dir / "pi-rewind" / "feed-mismatch.json").read_text())
    assert evidence["paths"] == ["d2/f.txt"]
    status = json.loads((gitrepo.git_dir / "pi-rewind" / "feed-status.json").read_text())
    assert status["mode"] == "full-scan"
    (repo / "d0" / "f.txt").write_text("later\n")
    fed = feed.counters.fed
    assert _capture(feed, gitrepo) == fresh_tree(repo)
    assert feed.counters.fed == fed


def test_verification_agrees_when_the_feed_is_right(
    repo: Path, armed: tuple[Feed, GitRepo]
) -> None:
    feed, gitrepo = armed
    (repo / "d0" / "f.txt").write_text("x\n")
    (repo / "d9").mkdir()
    (repo / "d9" / "g.txt").write_text("g\n")
    _capture(feed, gitrepo)
    assert feed.verify_now() is True and not feed.disabled


def test_a_capture_during_verification_is_not_held_up_nor_a_mismatch(
    repo: Path, armed: tuple[Feed, GitRepo]
) -> None:
    # The verifier's full scan (seconds at 1M files) runs on its own index, without the capture
    # lock. Holding that index's lock here keeps the verifier inside its scan for as long as the
    # prompt's capture may take.
    feed, gitrepo = armed
    (repo / "d1" / "f.txt").write_text("before the verification\n")
    fed = feed.counters.fed
    scan_lock = VerifyIndex(gitrepo.git_dir).locked()
    scan_lock.__enter__()
    try:
        results: list[bool | None] = []
        verifier = threading.Thread(target=lambda: results.append(feed.verify_now()))
        verifier.start()
        deadline = time.monotonic() + 10
        while feed.counters.fed == fed:  # its fed capture F is made: it waits for the scan now
            assert time.monotonic() < deadline
            time.sleep(0.01)
        (repo / "d2" / "f.txt").write_text("during the verification\n")
        done: list[str] = []
        prompt = threading.Thread(target=lambda: done.append(_capture(feed, gitrepo)))
        prompt.start()
        prompt.join(timeout=30)
        assert done == [fresh_tree(repo)], "the capture waited for the verifier's scan"
    finally:
        scan_lock.__exit__(None, None, None)
    verifier.join(timeout=60)
    assert results == [None] and feed.counters.inconclusive == 1 and not feed.disabled
    assert feed.verify_now() is True


def _git_policy(gitrepo: GitRepo) -> int:
    """The scheduling policy of a process git starts (a shell alias reading its own stat)."""
    runner = GitRunner(gitrepo.root, gitrepo.git_dir)
    result = runner.run(["policy"], config=[("alias.policy", "!cat /proc/self/stat")])
    return int(result.text.rsplit(")", 1)[1].split()[38])  # field 41: policy


def test_the_verifiers_scan_runs_git_at_idle_priority_and_nothing_else_does(
    repo: Path, armed: tuple[Feed, GitRepo]
) -> None:
    # A verification's lock-free full scan must not slow a prompt's capture: its git processes
    # run SCHED_IDLE (preempted at once by any normal task). Everything else keeps the normal
    # policy, the verifier's other git work included: a prompt may wait for its base scan.
    if shutil.which("chrt") is None:
        pytest.skip("util-linux chrt is not installed: the verifier's git runs at nice 10 only")
    _feed, gitrepo = armed
    seen: list[int] = []

    def verifier() -> None:
        lower_thread_priority()  # what the verifier thread does first
        seen.append(_git_policy(gitrepo))
        with idle_priority_git():
            seen.append(_git_policy(gitrepo))
        seen.append(_git_policy(gitrepo))
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    thread = threading.Thread(target=verifier)
    thread.start()
    thread.join(timeout=30)
    assert seen == [os.SCHED_OTHER, os.SCHED_IDLE, os.SCHED_OTHER, BACKGROUND_NICE]
    assert _git_policy(gitrepo) == os.SCHED_OTHER  # this thread: a prompt's capture


def test_only_the_verifiers_lock_free_scan_runs_git_at_idle_priority(
    repo: Path, armed: tuple[Feed, GitRepo], monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("chrt") is None:
        pytest.skip("util-linux chrt is not installed: the verifier's git runs at nice 10 only")
    feed, gitrepo = armed
    started: list[tuple[str, bool]] = []  # (git subcommand, under chrt --idle)
    command = GitRunner.command

    def observed(
        self: GitRunner, args: Sequence[str], config: Iterable[tuple[str, str]] = ()
    ) -> list[str]:
        cmd = command(self, args, config)
        started.append((args[0], Path(cmd[0]).name == "chrt"))
        return cmd

    monkeypatch.setattr(GitRunner, "command", observed)
    (repo / "d9").mkdir()
    (repo / "d9" / "g.txt").write_text("g\n")
    Capturer(gitrepo, NONE).full_capture()  # a prompt's full scan
    prompt = list(started)
    started.clear()
    assert feed.verify_now() is True
    assert prompt and not any(idle for _, idle in prompt)
    assert ("status", True) in started, started


def _snapshot_trees(pi: FakePi) -> list[str]:
    commits = [t["snapshots"][i] for t in pi.custom(TURN) for _, i in t["bindings"]]
    return [git(pi.cwd, "rev-parse", f"{c}^{{tree}}").strip() for c in commits]


def test_the_bridge_process_captures_through_the_feed(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWIND_FEED_VERIFY_IDLE_S", "0.2")
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    try:
        assert pi.event("session_start", {"reason": "startup"}).error is None
        time.sleep(0.5)  # the watcher starts with the process; the verifier arms it when idle
        expected = []
        for i in range(4):

            def act(i: int = i) -> None:
                (repo / "src").mkdir(exist_ok=True)
                (repo / "src" / f"m{i}.py").write_text(f"print({i})\n")
                (repo / "README.md").write_text(f"v{i}\n")

            expected.append(fresh_tree(repo))
            pi.prompt(f"prompt {i}", act)
            expected.append(fresh_tree(repo))
            time.sleep(0.4)  # idle: the verifier compares the fed tree with a full scan
        assert _snapshot_trees(pi) == expected
    finally:
        assert pi.close() == 0
    status = (
        json.loads((repo / ".git" / "pi-rewind" / "feed-status.json").read_text())
        if (repo / ".git" / "pi-rewind" / "feed-status.json").exists()
        else None
    )
    assert status is None or status["mode"] != "full-scan", status


def test_a_full_disk_is_a_clear_error_not_an_internal_one(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    mnt = tmp_path / "small"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        work = mnt / "repo"
        work.mkdir()
        git(work, "init", "-q")
        (work / "a.txt").write_text("a\n")
        filler = mnt / "filler"
        with open(filler, "wb", buffering=0) as handle:  # fill the file system to the last block
            try:
                while True:
                    handle.write(os.urandom(64 * 1024))
                    handle.flush()
            except OSError:
                pass
        with open(mnt / f"tail-{uuid.uuid4().hex}", "wb", buffering=0) as handle:
            try:
                while True:
                    handle.write(b"x")
                    handle.flush()
            except OSError:
                pass
        proc = subprocess.run(
            [sys.executable, "-m", "ledger", "snapshot"],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
        assert proc.stderr.startswith("error: "), proc.stderr
        assert "hint: free some disk space" in proc.stderr, proc.stderr
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
