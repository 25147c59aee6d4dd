"""A ``pi -p`` bridge's first ``git status``, started right after its walk, and the feed's base.

Why it exists (issue 34, the first ``pi -p`` of the day): the bridge starts the prompt's first
status as soon as its inotify walk is over, so that git runs while the engine loads
(:mod:`ledger.git.feed.early_status`). That scan is the change feed's base although its status
started before the capture: these tests pin that the capture takes it, that a change made after
the status started is in the next fed capture (the dirty set is not emptied), that a watcher
which did not start the status, or was untrusted meanwhile, never makes a base from it, and
that the real bridge holds the capture lock from its walk to its first capture only.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

import pytest

from ledger.bridge.print_mode import start_walk
from ledger.errors import LedgerError
from ledger.git.capture import prefetch
from ledger.git.capture.index import PrivateIndex
from ledger.git.capture.scan import Capturer
from ledger.git.feed import early_status, inotify, service
from ledger.git.feed.inotify import InotifyWatcher
from ledger.git.repo import GitRepo
from tests.bridgekit import FakePi, prompts_stay_exact
from tests.gitkit import fresh_tree
from tests.snapshotkit import NO_PROTECTION as NONE

pytestmark = pytest.mark.needs("change_feed")


def _files(repo: Path) -> GitRepo:
    for i in range(20):
        (repo / f"d{i % 4}").mkdir(exist_ok=True)
        (repo / f"d{i % 4}" / f"f{i}.txt").write_text(f"{i}\n")
    gitrepo = GitRepo.discover(repo)
    Capturer(gitrepo, NONE).capture()  # the private index of an earlier run
    return gitrepo


def _started(gitrepo: GitRepo) -> InotifyWatcher:
    """A walking watcher and the early status after it; waits until git is done."""
    watcher = InotifyWatcher(str(gitrepo.root), background=False)
    watcher.start()
    deadline = time.monotonic() + 30  # the bridge waits at most what a scan takes (~0 here)
    while not watcher.ready:
        assert time.monotonic() < deadline and watcher.failed is None
        time.sleep(0.01)
    assert early_status.start_after_walk(watcher, gitrepo.root, gitrepo.git_dir, 30.0)
    assert prefetch.pending()
    running = prefetch._current
    assert running is not None
    running.proc.wait(timeout=30)
    return watcher


def test_a_change_after_the_early_status_started_is_in_the_next_fed_capture(repo: Path) -> None:
    gitrepo = _files(repo)
    watcher = _started(gitrepo)
    at_status = fresh_tree(repo)
    (repo / "d1" / "f1.txt").write_text("after the status\n")  # its status read the old bytes
    (repo / "new.txt").write_text("new\n")
    service.enable(verify=False)
    try:
        feed = service.adopt(gitrepo, watcher)
        assert feed is not None
        first = Capturer(gitrepo, NONE).capture()
        assert first.tree == at_status, "the capture took the status started before it"
        assert feed.base is not None and feed.counters.full == 1
        assert not prefetch.pending() and not PrivateIndex(gitrepo.git_dir).locked_here()
        # Emptying the dirty set at the capture would lose both changes: the base has neither.
        assert Capturer(gitrepo, NONE).capture().tree == fresh_tree(repo)
        assert feed.counters.fed == 1 and feed.counters.full == 1
        (repo / "d2" / "f2.txt").write_text("later\n")
        assert Capturer(gitrepo, NONE).capture().tree == fresh_tree(repo)
        assert feed.counters.fed == 2
    finally:
        prefetch.stop()
        service.disable()


def test_a_feed_whose_watcher_did_not_start_the_status_scans_anew_and_makes_no_base(
    repo: Path,
) -> None:
    gitrepo = _files(repo)
    other = _started(gitrepo)  # the walk whose adoption lost the race: another feed captures
    (repo / "d0" / "f0.txt").write_text("after the status\n")
    service.enable(verify=False)
    try:
        feed = service.feed_for(gitrepo)
        assert feed is not None and feed.watcher is not other
        assert Capturer(gitrepo, NONE).capture().tree == fresh_tree(repo), "its own status"
        assert feed.base is None and not prefetch.pending()
    finally:
        prefetch.stop()
        other.stop()
        service.disable()


def test_a_watcher_untrusted_after_the_status_started_feeds_nothing_from_it(repo: Path) -> None:
    gitrepo = _files(repo)
    watcher = _started(gitrepo)
    (repo / "d3" / "f3.txt").write_text("missed, say\n")
    watcher.untrust("an overflow, say")  # empties the dirty set and moves the epoch
    service.enable(verify=False)
    try:
        feed = service.adopt(gitrepo, watcher)
        assert feed is not None
        Capturer(gitrepo, NONE).capture()
        assert Capturer(gitrepo, NONE).capture().tree == fresh_tree(repo)
        assert feed.counters.fed == 0 and feed.counters.full == 2, "the old epoch's base unused"
    finally:
        prefetch.stop()
        service.disable()


def test_no_early_status_without_a_private_index_or_when_turned_off(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gitrepo = GitRepo.discover(repo)
    watcher = InotifyWatcher(str(gitrepo.root), background=False)
    watcher.start()
    try:
        assert not early_status.start_after_walk(watcher, gitrepo.root, gitrepo.git_dir, 30.0)
        assert watcher.prefetch_epoch is None and not prefetch.pending()
        Capturer(gitrepo, NONE).capture()
        monkeypatch.setenv("REWIND_STATUS_PREFETCH", "0")
        assert not early_status.start_after_walk(watcher, gitrepo.root, gitrepo.git_dir, 30.0)
        assert not prefetch.pending()
    finally:
        watcher.stop()


def test_a_print_mode_bridge_holds_the_lock_from_its_walk_to_its_first_capture_only(
    repo: Path, isolated_env: Path
) -> None:
    """Through the real bridge process: after its first answer (no UI) the capture lock is
    busy (its status runs, or waits to be taken); the prompt's capture takes it and lets go,
    while the bridge lives on; and the prompts stay exact."""
    _files(repo)
    index = PrivateIndex(repo / ".git")
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    pi.has_ui = False
    try:
        assert pi.event("session_start", {"reason": "startup"}).error is None
        deadline = time.monotonic() + 30
        while not _lock_busy(index):
            assert time.monotonic() < deadline, "no status started after the bridge's walk"
            time.sleep(0.01)
        prompts_stay_exact(pi, 2, "print")
        assert not _lock_busy(index), "the first capture let go of the lock"
    finally:
        assert pi.close() == 0


def _lock_busy(index: PrivateIndex) -> bool:
    try:
        with index.locked(timeout_s=0.0):
            return False
    except LedgerError:
        return True


def test_a_walk_the_bridge_gave_up_on_is_not_waited_for_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bridge's wait for the walk and the capture's are one wait, not two: a walk longer
    than the scan it would save (bounded by the index's size) is not waited for again."""
    gitrepo = _files(repo)
    index = PrivateIndex(gitrepo.git_dir).index_path
    monkeypatch.setattr(inotify, "SCAN_S_PER_INDEX_BYTE", 0.3 / index.stat().st_size)
    watcher = InotifyWatcher(str(gitrepo.root), background=False)
    try:
        with watcher.lock:  # the walk cannot begin: it is never over here
            watcher.start()
            began = time.monotonic()
            assert not early_status.start_after_walk(watcher, gitrepo.root, gitrepo.git_dir, 30)
            assert time.monotonic() - began >= 0.25, "the bridge waited what the scan would take"
            began = time.monotonic()
            assert not watcher.wait_walk(30.0, index)
            assert time.monotonic() - began < 0.1, "the capture did not wait for it again"
        assert watcher.prefetch_epoch is None and not prefetch.pending()
    finally:
        watcher.stop()


def _watches(pid: int) -> int:
    """How many directories the process's inotify descriptors watch (``/proc/PID/fdinfo``)."""
    count = 0
    for info in Path(f"/proc/{pid}/fdinfo").iterdir():
        with contextlib.suppress(OSError):
            count += info.read_text().count("inotify wd:")
    return count


def test_a_bridge_spawned_for_print_mode_walks_before_its_first_event(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extension says at spawn that Pi has no UI (``REWIND_BRIDGE_NO_UI=1``): the walk
    starts before the first event is even read (Pi no longer waits for its answer)."""
    _files(repo)
    monkeypatch.setenv("REWIND_BRIDGE_NO_UI", "1")
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    pi.has_ui = False
    try:
        assert isinstance(pi.proc, subprocess.Popen)
        deadline = time.monotonic() + 30
        while _watches(pi.proc.pid) < 5:  # the root and its four directories
            assert time.monotonic() < deadline, "no walk before the first event"
            time.sleep(0.01)
        assert pi.event("session_start", {"reason": "startup"}).error is None
        prompts_stay_exact(pi, 2, "print")
    finally:
        assert pi.close() == 0


def test_a_walk_started_at_spawn_is_used_for_its_root_only_and_stopped_otherwise(
    repo: Path, tmp_path: Path
) -> None:
    gitrepo = _files(repo)
    early = start_walk(repo)
    walked = early._watcher
    assert walked is not None
    assert early.take(tmp_path / "elsewhere") is None, "a walk of another root is not handed out"
    assert walked.stopped and early.take(gitrepo.root) is None, "it was stopped, not kept"
    early = start_walk(repo / "d1")
    walking = early.take(gitrepo.root)
    assert walking is not None and not walking.stopped, "the repository's walk, from below"
    walking.stop()
    early = start_walk(repo)
    walked = early._watcher
    early.drop()
    assert walked is not None and walked.stopped and early.take(gitrepo.root) is None
