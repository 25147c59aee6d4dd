"""A ``pi -p`` bridge's feed: a watcher started before the feed module loads, adopted by it.

Why it exists: issue 34 (the first ``pi -p`` of the day). The bridge starts the inotify walk
right after its first answer and adopts the walking watcher once the feed module (and pygit2)
have loaded (``ledger.git.feed.service.adopt``). These tests pin that an adopted watcher gives
the same exact captures as a feed's own, that only a scan started after the walk is a base,
that a watcher of another root is refused and stopped, and that a watcher stops at once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ledger.git.capture.scan import Capturer
from ledger.git.feed import inotify, service
from ledger.git.feed.inotify import InotifyWatcher
from ledger.git.repo import GitRepo
from tests.gitkit import fresh_tree
from tests.snapshotkit import NO_PROTECTION as NONE

pytestmark = pytest.mark.needs("change_feed")


def _ready(watcher: InotifyWatcher) -> None:
    deadline = time.monotonic() + 10
    while not watcher.ready and not watcher.failed:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert watcher.failed is None


def test_an_adopted_walking_watcher_feeds_exact_captures_after_a_base_scan(repo: Path) -> None:
    for i in range(5):
        (repo / f"d{i}").mkdir()
        (repo / f"d{i}" / "f.txt").write_text(f"{i}\n")
    gitrepo = GitRepo.discover(repo)
    watcher = InotifyWatcher(str(gitrepo.root), background=False)
    watcher.start()
    service.enable(verify=False)
    try:
        feed = service.adopt(gitrepo, watcher)
        assert feed is not None and feed.watcher is watcher
        assert service.feed_for(gitrepo) is feed, "the work tree's feed is the adopted one"
        _ready(watcher)
        assert Capturer(gitrepo, NONE).capture().tree == fresh_tree(repo)
        assert feed.counters.full == 1 and feed.base is not None
        (repo / "d1" / "f.txt").write_text("changed\n")
        (repo / "new.txt").write_text("n\n")
        assert Capturer(gitrepo, NONE).capture().tree == fresh_tree(repo)
        assert feed.counters.fed == 1 and feed.counters.full == 1
    finally:
        service.disable()
    assert not watcher.alive()


def test_a_pi_p_bridges_first_full_scan_waits_for_its_walk_and_is_the_base(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``pi -p`` run's first capture came before its walk was over: it scanned fully and was
    no base, so the first turn scanned the whole tree again (~0.4 s at 100k files). It now
    waits for the walk, once, and is the base. The bound of that wait (what the scan is
    expected to take, ~60 ms for this index) is the next test's: here it is lifted, since a
    loaded machine walks 2,000 directories more slowly than that (CI's full run once did)."""
    monkeypatch.setattr(inotify, "SCAN_S_PER_INDEX_BYTE", 1e-5)
    monkeypatch.setattr(service, "WALK_WAIT_S", 60.0)
    for i in range(2000):
        leaf = repo / f"d{i // 100}" / f"e{i}"
        leaf.mkdir(parents=True)
        for j in range(10):
            (leaf / f"f{j}.txt").write_text(f"{i}.{j}\n")
    gitrepo = GitRepo.discover(repo)
    Capturer(gitrepo, NONE).capture()  # the private index of earlier days (~2 MB: ~60 ms)
    (repo / "d0" / "e0" / "f0.txt").write_text("since\n")
    watcher = InotifyWatcher(str(gitrepo.root), background=False)
    watcher.start()
    service.enable(verify=False)
    try:
        feed = service.adopt(gitrepo, watcher)
        assert feed is not None
        assert not watcher.ready, "the walk of 2,000 directories is still running"
        assert Capturer(gitrepo, NONE).capture().tree == fresh_tree(repo)
        assert watcher.ready and feed.base is not None and feed.counters.full == 1
        (repo / "d0" / "e0" / "f1.txt").write_text("changed\n")
        assert Capturer(gitrepo, NONE).capture().tree == fresh_tree(repo)
        assert feed.counters.fed == 1 and feed.counters.full == 1
    finally:
        service.disable()


def test_a_walk_longer_than_a_scan_is_not_waited_for(repo: Path) -> None:
    """An ignored tree the walk visits and the scan skips (a ``node_modules``): the wait is
    bounded by the scan it could save, so a small repository's capture does not wait."""
    (repo / ".gitignore").write_text("deps/\n")
    for i in range(8000):
        (repo / "deps" / f"p{i // 100}" / f"m{i}" / "x").mkdir(parents=True)
    gitrepo = GitRepo.discover(repo)
    Capturer(gitrepo, NONE).capture()
    watcher = InotifyWatcher(str(gitrepo.root), background=False)
    # The time spent waiting for the walk, not the whole capture's (which a loaded machine
    # may make longer than the bound for reasons of its own).
    waits: list[float] = []
    wait_walk = watcher.wait_walk

    def timed(timeout_s: float, index: Path) -> bool:
        started = time.monotonic()
        try:
            return wait_walk(timeout_s, index)
        finally:
            waits.append(time.monotonic() - started)

    watcher.wait_walk = timed  # type: ignore[method-assign]
    watcher.start()
    service.enable(verify=False)
    try:
        feed = service.adopt(gitrepo, watcher)
        assert feed is not None and not watcher.ready
        assert Capturer(gitrepo, NONE).capture().tree == fresh_tree(repo)
        assert feed.base is None and feed.counters.full == 1, "it scanned before the walk ended"
        assert len(waits) == 1, "the capture asked once whether the walk was over"
        assert waits[0] < service.WALK_WAIT_S / 2, f"waited {waits[0]:.3f} s for a walk it skips"
    finally:
        service.disable()


def test_a_scan_that_starts_before_the_adopted_watcher_is_ready_is_no_base(repo: Path) -> None:
    gitrepo = GitRepo.discover(repo)
    watcher = InotifyWatcher(str(gitrepo.root))  # not started: never ready during the scan
    service.enable(verify=False)
    try:
        feed = service.adopt(gitrepo, watcher)
        assert feed is not None
        assert Capturer(gitrepo, NONE).capture().tree == fresh_tree(repo)
        assert feed.base is None and feed.counters.full == 1
    finally:
        service.disable()


def test_a_capture_while_print_mode_turns_its_feed_on_gets_the_walking_watchers_feed(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pi -p``: the feed was turned on, and only then the walking watcher adopted. A prompt's
    capture in between (here: from inside the turning on) started a second feed with a walk of
    its own; the walk started at the first answer was stopped and every capture of the run
    scanned fully. Now the feed is on only once the adopted one is registered."""
    from ledger.bridge import print_mode

    gitrepo = GitRepo.discover(repo)
    made: list[InotifyWatcher] = []
    asked: list[service.Feed | None] = []

    class Recorded(InotifyWatcher):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

    bound = service.bound_git_memory

    def capture_meanwhile() -> None:
        asked.append(service.feed_for(gitrepo))  # what a prompt's capture would use
        bound()

    monkeypatch.setattr(inotify, "InotifyWatcher", Recorded)
    monkeypatch.setattr(print_mode, "InotifyWatcher", Recorded)
    monkeypatch.setattr(service, "bound_git_memory", capture_meanwhile)
    try:
        print_mode.print_mode_feed(repo, gitrepo.root, gitrepo.git_dir, None)  # adopts in a thread
        deadline = time.monotonic() + 30
        while not asked:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        (walking,) = made
        feed = service.feed_for(gitrepo)
        assert feed is not None and asked == [feed]
        assert feed.watcher is walking and not walking.stopped
    finally:
        service.disable()


def test_a_watcher_of_another_root_is_refused_and_stopped(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    watcher = InotifyWatcher(str(other))
    watcher.start()
    service.enable(verify=False)
    try:
        assert service.adopt(GitRepo.discover(repo), watcher) is None
        assert watcher.stopped and not watcher.alive()
    finally:
        service.disable()


def test_nothing_is_adopted_while_the_feed_is_off(repo: Path) -> None:
    watcher = InotifyWatcher(str(GitRepo.discover(repo).root))
    watcher.start()
    assert not service.enabled()
    assert service.adopt(GitRepo.discover(repo), watcher) is None
    assert watcher.stopped and not watcher.alive()


def test_a_watcher_stops_without_waiting_out_its_poll_interval(repo: Path) -> None:
    """The reader thread waits in poll(200 ms); a stop wakes it (a bridge's end, which Pi waits
    for, took up to 200 ms more)."""
    times = []
    for _ in range(3):
        watcher = InotifyWatcher(str(repo))
        watcher.start()
        _ready(watcher)
        time.sleep(0.02)  # inside its poll now
        started = time.monotonic()
        watcher.stop()
        times.append(time.monotonic() - started)
        assert not watcher.alive()
    assert min(times) < 0.1, times


def test_the_start_up_walk_skips_listing_leaf_directories_and_still_sees_what_comes_later(
    repo: Path,
) -> None:
    """On a file system whose directories count their subdirectories in their link count
    (ext4, xfs, tmpfs), the start-up walk watches a directory without listing it when that
    count is 2 (most of the walk's time at 100k files); a subdirectory made in it after its
    watch is seen as an event, as in any watched directory."""
    for i in range(30):
        (repo / "a" / f"leaf{i}").mkdir(parents=True)
        (repo / "a" / f"leaf{i}" / "f.txt").write_text(f"{i}\n")
    watcher = InotifyWatcher(str(repo), background=False)
    watcher.start()
    try:
        _ready(watcher)
        if not watcher._leaves_by_links:
            pytest.skip("this file system's link counts do not count subdirectories")
        watched = set(watcher._path_wd)
        assert {f"a/leaf{i}" for i in range(30)} <= watched and "a" in watched
        (repo / "a" / "leaf7" / "inner").mkdir()
        (repo / "a" / "leaf7" / "inner" / "new.txt").write_text("n\n")
        deadline = time.monotonic() + 10
        while "a/leaf7/inner/new.txt" not in watcher.dirty and time.monotonic() < deadline:
            watcher.sync()
            time.sleep(0.01)
        assert "a/leaf7/inner" in watcher._path_wd, "the new subdirectory is watched"
        assert {"a/leaf7/inner", "a/leaf7/inner/new.txt"} <= watcher.dirty
    finally:
        watcher.stop()
