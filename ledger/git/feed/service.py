"""The change feed: captures in O(changed) inside a long-lived process (``rewind serve``).

Why it exists: a capture with the private index (:mod:`ledger.git.capture.scan`) still costs git's
stat scan of the whole work tree. A process that lives as long as the agent's session can watch
the tree instead (:mod:`ledger.git.feed.inotify`) and, at each capture, look only at the paths
reported since the previous one: none → the previous tree; a few → hash them and edit the tree.

How a fed capture stays exact (docs/capture.md#a-fed-capture). The *base* is the tree of a
capture whose dirty set was taken at epoch E; every path changed since is in the watcher's dirty
set (inotify queues events inside the changing system call; :meth:`InotifyWatcher.sync` reads it
to the end). At epoch E, the work tree is base + the dirty paths re-read now
(:mod:`ledger.git.feed.tree`), each classified as ``git add -A`` into a fresh index would.
Anything the feed does not model (rule-file events, configuration or settings changes, nested
``.git``, gitlinks, protected directories, too-large or special files, names git reads
differently) means a full scan, which becomes the new base.

Trust but verify (docs/capture.md#verification): when the process is idle after a fed capture, a
verifier thread makes a fed capture F (under the capture lock), then a full scan S on its own
index (``<git-dir>/pi-rewind/verify/``) without the lock, and compares them only if nothing
changed or was taken in between (a capture still hashing a file it took is a change in flight,
not a miss). A difference (mmap writes, hard links from outside, another mount namespace …)
switches the feed off for the session (:func:`report`; the paths in ``feed-mismatch.json``);
``feed-status.json`` holds the mode and final counts.

Invariants:
- Nothing here runs unless :func:`enable` was called (``rewind serve`` does); one-shot commands
  never import this module.
- A fed capture writes only git objects; the verifier's scan, git objects and its own index.
- A base is set only under the capture lock (dropping one is safe anywhere); every change of
  the base is a new generation, and so is every take of a non-empty dirty set (in the same
  critical section of the watcher's lock as the take).
- Whoever empties the dirty set either publishes a base that includes those paths or leaves no
  base: a full scan drops the base before it clears the set, so a scan that fails cannot leave
  an old base trusted without the changes it took. A scan whose status started earlier
  (:mod:`ledger.git.feed.early_status`) clears nothing.
- The feed is used only while ``watcher.epoch`` equals the epoch its base was taken at, the
  watcher has not failed, and the environment signature (configuration files, ignore/attribute
  files outside the tree, environment, settings) is unchanged.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.git.capture import prefetch
from ledger.git.capture.index import VerifyIndex
from ledger.git.feed import early_status
from ledger.git.feed.environment import config_origins, env_signature
from ledger.git.feed.inotify import InotifyWatcher, lower_thread_priority, trim_heap
from ledger.git.feed.tree import KeptGit, NeedScan, bound_git_memory, fed_tree
from ledger.git.owned import replace_private_file
from ledger.git.private import private_dir
from ledger.git.runner import idle_priority_git
from ledger.git.trees import tree_changes

if TYPE_CHECKING:
    from ledger.git.capture.plan import SkippedPath
    from ledger.git.capture.scan import Capturer, CaptureResult
    from ledger.git.repo import GitRepo

VERIFY_IDLE_S = float(os.environ.get("REWIND_FEED_VERIFY_IDLE_S", "1.0"))
"""Seconds without a capture before the verifier runs."""
WALK_WAIT_S = 1.0  # at most this long, once, a full scan waits for a pi -p walk (wait_walk)
STATUS_FILE = "feed-status.json"
MISMATCH_FILE = "feed-mismatch.json"

_enabled = False
_verify = True
_feeds: dict[str, Feed] = {}
_armed: dict[str, Any] = {}  # settings arm() got for a work tree whose feed is not started
_guard = threading.Lock()


def enable(*, verify: bool = True) -> None:
    """Turn the feed on for this process (``rewind serve``)."""
    global _enabled, _verify
    _enabled, _verify = True, verify
    bound_git_memory()


def enabled() -> bool:
    return _enabled  # published after an adopted feed is registered (adopt)


def disable() -> None:
    """Stop every watcher and verifier (end of the bridge; tests)."""
    global _enabled
    _enabled = False
    with _guard:
        feeds = list(_feeds.values())
        _feeds.clear()
        _armed.clear()
    for feed in feeds:
        feed.close()


def feed_for(repo: GitRepo) -> Feed | None:
    """The feed of ``repo``'s work tree, started on first use; ``None`` when disabled."""
    if not _enabled:
        return None
    key = str(repo.root)
    with _guard:
        feed = _feeds.get(key)
        if feed is None:
            feed = _feeds[key] = Feed(repo.root, repo.git_dir, verify=_verify)
            feed.start()
            settings = _armed.pop(key, None)
            if settings is not None:
                feed.arm(settings)
    return feed


def adopt(repo: GitRepo, watcher: InotifyWatcher, *, enabling: bool | None = None) -> Feed | None:
    """The feed of ``repo``'s work tree around ``watcher``, an :class:`InotifyWatcher` of that
    root started before this module and pygit2 loaded (``pi -p``: ``ledger.cli.serve``), or
    ``None`` (disabled, another root, a feed exists: the watcher is stopped). Exact: only a scan
    started once the watcher is ready is a base (:meth:`Feed.before_full`). ``enabling``: turn
    the feed on too (``verify=enabling``), only once this feed is registered. Concurrency:
    enabled first, a capture in between started a second feed and this walk was wasted."""
    global _enabled, _verify
    key, feed = str(repo.root), None
    with _guard:
        _verify = _verify if enabling is None else enabling
        if (
            (_enabled or enabling is not None)
            and key not in _feeds
            and os.path.realpath(watcher.root) == os.path.realpath(key)
        ):
            feed = _feeds[key] = Feed(repo.root, repo.git_dir, verify=_verify, watcher=watcher)
            feed.start()
            settings = _armed.pop(key, None)
            if settings is not None:
                feed.arm(settings)
        _enabled = _enabled or enabling is not None  # published after the feed: see above
    if enabling is not None:
        bound_git_memory()
    if feed is None:
        watcher.stop()
    return feed


def arm(root: Path | str, settings: Any) -> None:
    """Take ``root``'s base scan in the background once its watcher is ready (the verifier's,
    under the capture lock: never two scans at once), with the snapshot ``settings`` its
    captures use, so that a session's first capture is fed (a feed not started yet: when it
    starts). The bridge calls it once ``session_start`` is answered."""
    with _guard:
        feed = _feeds.get(str(Path(root)))
        if feed is None:
            _armed.clear()  # one work tree per bridge: nothing older is wanted
            _armed[str(Path(root))] = settings
            return
    feed.arm(settings)


def start_for(path: Path | str) -> None:
    """Start the feed of the repository containing ``path`` in the background (no error if
    there is none): the watcher's start-up then happens before the first prompt."""

    def run() -> None:
        from ledger.git.repo import GitRepo

        with contextlib.suppress(Exception):
            feed_for(GitRepo.discover(path))

    threading.Thread(target=run, name="rewind-feed-start", daemon=True).start()


def report(root: Path | str) -> dict[str, Any] | None:
    """The feed's state for a footer or ``rewind doctor`` (``None``: no feed for ``root``)."""
    with _guard:
        feed = _feeds.get(str(Path(root)))
    return feed.describe() if feed is not None else None


def read_status_file(git_dir: Path) -> dict[str, Any] | None:
    """The last ``feed-status.json`` a bridge wrote (for ``rewind doctor``)."""
    try:
        data = json.loads((private_dir(git_dir) / STATUS_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class _Base:
    tree: str
    epoch: int
    skipped: tuple[SkippedPath, ...]
    env: tuple[Any, ...]
    settings: tuple[Any, ...]
    filemode: bool
    kept_protected: bool


@dataclass
class Counters:
    fed: int = 0
    full: int = 0
    verified: int = 0
    inconclusive: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)


class Feed:
    """The feed of one work tree (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        git_dir: Path,
        *,
        verify: bool = True,
        max_watches: int | None = None,
        watcher: InotifyWatcher | None = None,
    ) -> None:
        self.root = Path(root)
        self.git_dir = Path(git_dir)
        self.verify = verify
        env_max = os.environ.get("REWIND_FEED_MAX_WATCHES")
        self._adopted = watcher is not None
        self.watcher = watcher or InotifyWatcher(
            str(self.root),
            on_ready=self._request_verify,
            max_watches=max_watches
            if max_watches is not None
            else (int(env_max) if env_max else None),
        )
        self._base: _Base | None = None
        self._generation = 0
        self._git: KeptGit | None = None
        self.counters = Counters()
        self.disabled: str | None = None
        self.evidence: list[str] = []
        self.last_reason = "starting"
        self._settings: Any = None
        self._origins: list[str] = []
        self._identity: Any = None
        self._identity_env: tuple[Any, ...] | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._need_verify = False
        self._last_capture = 0.0
        self._verifier: threading.Thread | None = None
        self._walk_waited = False

    @property
    def base(self) -> _Base | None:
        return self._base

    @base.setter
    def base(self, value: _Base | None) -> None:
        # Every change of the base is a new generation: a verification that saw one happen
        # during its scan compares trees of different moments (inconclusive, not a mismatch).
        self._base = value
        self._generation += 1

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._adopted:
            # Started (see adopt()) before this feed existed: whether it became ready before
            # or after on_ready is set here, the verifier is asked once (twice is harmless).
            self.watcher.on_ready = self._request_verify
            if self.watcher.ready:
                self._request_verify()
        else:
            self.watcher.start()
        self._verifier = threading.Thread(
            target=self._verify_loop, name="rewind-feed-verify", daemon=True
        )
        self._verifier.start()

    def arm(self, settings: Any) -> None:
        """See :func:`arm`. Settings a capture gave win: they are the same or newer."""
        with self._cond:
            self._settings = self._settings or settings
        # Settings first, then ready: a watcher ready before is seen here, one ready later
        # wakes the verifier itself (before ready no scan can be a base).
        if self.watcher.ready:
            self._request_verify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self.watcher.stop()
        if self._verifier is not None and self._verifier is not threading.current_thread():
            self._verifier.join(timeout=30)
        self._drop_git()
        if self.counters.fed or self.counters.full:
            self.write_status()  # the session's final counts, for `rewind doctor`

    def describe(self) -> dict[str, Any]:
        if self.disabled or self.watcher.failed:
            mode = "full-scan"
        elif self.base is not None and self.watcher.ready:
            mode = "fed"
        else:
            mode = "starting"
        return {
            "mode": mode,
            "disabled": self.disabled,
            "watcherFailed": self.watcher.failed,
            "lastFallback": self.last_reason,
            "evidence": self.evidence[:50],
            "fed": self.counters.fed,
            "full": self.counters.full,
            "verified": self.counters.verified,
            "inconclusive": self.counters.inconclusive,
            "fallbacks": dict(self.counters.fallbacks),
            "events": self.watcher.events,
        }

    # --- the capture side (called under the private index lock) ----------------------------

    def try_fed(self, capturer: Capturer) -> CaptureResult | None:
        """A fed capture, or ``None`` (the caller then scans fully and calls
        :meth:`before_full` / :meth:`after_full`)."""
        from ledger.git.capture.scan import CaptureResult

        reason = self._untrusted(capturer)
        if reason is not None:
            self._fallback(reason)
            return None
        base = self.base
        assert base is not None
        with self.watcher.lock:
            self.watcher.sync()
            if self.watcher.stopped:  # closing: events after the stop go unread
                self._fallback("the feed is closing")
                return None
            if self.watcher.epoch != base.epoch or self.watcher.failed:
                self._fallback(self.watcher.failed or (self.watcher.reasons or ["?"])[-1])
                return None
            dirty = set(self.watcher.dirty)
            self.watcher.dirty.clear()
            if dirty:
                # Taken, not yet in a base: a new generation now, in the same critical section
                # as the take. The verifier's check that nothing happened during its scan reads
                # the dirty set and the generation under this lock; bumped only once the new
                # base is published, a change taken here looked like no change at all in
                # between, and a correct feed was switched off (docs/capture.md#races).
                self._generation += 1
        if not dirty:
            self.counters.fed += 1
            return CaptureResult(base.tree, base.skipped, False, 0)
        # The verifier runs at a lower priority, and so would every git process it starts: the
        # kept processes, which serve the prompts' captures, are never started (or used) there.
        git: KeptGit | None = None
        if threading.current_thread() is not self._verifier:
            if self._git is None:
                self._git = KeptGit(self.root, self.git_dir)
            git = self._git
        try:
            tree, count = fed_tree(capturer, base.tree, base.skipped, base.filemode, dirty, git)
        except NeedScan as exc:
            with self.watcher.lock:  # the paths are re-read by the full scan's status
                self.watcher.dirty |= dirty
            self._fallback(str(exc), exc.why)
            return None
        self.base = _Base(
            tree,
            base.epoch,
            base.skipped,
            base.env,
            base.settings,
            base.filemode,
            base.kept_protected,
        )
        self.counters.fed += 1
        self._request_verify()
        return CaptureResult(tree, base.skipped, False, count)

    def before_full(self) -> int | None:
        """Take the dirty set before a full scan; the epoch to arm with (``None``: the watcher
        is not ready, so the scan cannot be a base)."""
        # The scan replaces the base; the base goes first, before the dirty set is cleared
        # below: if the scan then fails (a dirty embedded repository, a full disk), the changes
        # taken here are in no base and no longer in the dirty set, so the old base must not
        # be trusted again (a new generation, too: the verifier's round becomes inconclusive).
        self.base = None
        if prefetch.pending():  # its status started before this capture: early_status.py
            return early_status.base_epoch(self.watcher)
        if not self._walk_waited and not self.watcher.ready:
            self._walk_waited = True  # once: a walk not over by then is long (ignored trees)
            self.watcher.wait_walk(WALK_WAIT_S, private_dir(self.git_dir) / "index")
        if not self.watcher.ready:
            # Not the watcher's lock: its walk takes it once per directory and Python's locks
            # are not fair: a capture would wait for the whole walk. Nothing is a base before.
            return None
        with self.watcher.lock:
            self.watcher.sync()
            self.watcher.dirty.clear()
            if not self.watcher.ready or self.watcher.failed or self.watcher.stopped:
                return None
            return self.watcher.epoch

    def _drop_git(self) -> None:
        """End the kept git processes: the rules they loaded may be stale after a fallback."""
        git, self._git = self._git, None
        if git is not None:
            git.close()

    def after_full(self, capturer: Capturer, result: CaptureResult, epoch: int | None) -> None:
        self.counters.full += 1
        self._drop_git()
        self.base = None
        self._settings = capturer.settings
        if epoch is None or self.disabled or capturer.facts_ignore_case:
            return
        state = capturer.last_state
        watch_index = bool(result.skipped) or bool(state is not None and state.kept_protected)
        self.base = _Base(
            result.tree,
            epoch,
            result.skipped,
            self._env_signature(capturer, True, watch_index),
            _settings_key(capturer),
            capturer.filemode,
            watch_index,
        )
        self._settings = capturer.settings

    def _fallback(self, reason: str, kind: str | None = None, *, keep: bool = False) -> None:
        """Count a reason to scan fully (the caller returns ``None``) by ``kind``, or by the reason
        up to its first colon; ``keep``: leave the kept git processes (no capture lock held)."""
        self.last_reason = reason
        if not keep:
            self._drop_git()
        key = (kind or reason.split(":")[0])[:60]
        self.counters.fallbacks[key] = self.counters.fallbacks.get(key, 0) + 1

    def _untrusted(self, capturer: Capturer) -> str | None:
        if self.disabled:
            return f"feed disabled: {self.disabled}"
        if self.watcher.failed:
            return self.watcher.failed
        if not self.watcher.ready:
            return "watcher not ready"
        base = self.base
        if base is None:
            return "no base scan yet"
        if _settings_key(capturer) != base.settings:
            return "settings changed"
        if self._env_signature(capturer, False, base.kept_protected) != base.env:
            return "configuration or ignore/attribute files outside the tree changed"
        return None

    # --- environment ------------------------------------------------------------------------

    def _env_signature(
        self, capturer: Capturer, refresh: bool, include_index: bool
    ) -> tuple[Any, ...]:
        """:func:`~ledger.git.feed.environment.env_signature`; ``refresh`` re-reads the
        configuration files' origins (one git call), kept between captures otherwise."""
        if refresh or not self._origins:
            self._origins = config_origins(capturer)
        return env_signature(self._origins, self.git_dir, capturer.repo.common_dir, include_index)

    def identity(self, compute: Callable[[], Any]) -> Any:
        """The committer identity, cached while the environment signature is unchanged."""
        base = self.base
        if base is None or self._identity is None or self._identity_env != base.env:
            self._identity = compute()
            self._identity_env = base.env if base is not None else None
        return self._identity

    # --- verification -----------------------------------------------------------------------

    def touch(self) -> None:
        """A capture is starting: the verifier waits for the next idle period."""
        with self._cond:
            self._last_capture = time.monotonic()

    def note_error(self, exc: BaseException) -> None:
        """An unexpected error in the fed path: this capture scans fully, and so does the next
        (the base is dropped)."""
        self.base = None
        self._fallback(f"feed error: {type(exc).__name__}: {exc}")

    def _request_verify(self) -> None:
        with self._cond:
            self._need_verify = True
            self._cond.notify_all()

    def _verify_loop(self) -> None:
        lower_thread_priority()  # its full scans must not slow a prompt's capture
        while True:
            with self._cond:
                while not self._closed and not self._need_verify:
                    self._cond.wait()
                if self._closed:
                    return
                idle = time.monotonic() - self._last_capture
                if idle < VERIFY_IDLE_S:
                    self._cond.wait(VERIFY_IDLE_S - idle)
                    continue
                self._need_verify = False
            if not self.verify and self.base is not None:
                continue
            try:
                self.verify_now()
            except Exception as exc:
                # Concurrency: no capture lock here, and the kept git processes may serve a
                # prompt's fed capture now: the next capture (no base) drops them under it.
                self.base = None
                why = f"verification failed to run: {type(exc).__name__}: {exc}"
                self._fallback(why, keep=True)
            # A round's full scan parsed the whole status (tens of MB at 100k files) in this
            # thread's malloc arena, freed now but kept by glibc: hand it back (idle time).
            trim_heap()

    def verify_now(self) -> bool | None:
        """Compare a fed capture with a full scan now (or arm the feed if it has no base).
        ``True``: equal; ``False``: they differed (the feed is now off); ``None``: nothing to
        compare, or a change or a capture came during the scan."""
        from ledger.git.capture.scan import Capturer
        from ledger.git.shadow.layout import reopen

        settings = self._settings
        if settings is None:
            return None  # no capture yet: its settings are unknown, the first one arms the feed
        repo = reopen(self.root, self.git_dir)  # our own handle: the engine's is not for threads
        capturer = Capturer(repo, settings, use_feed=False)
        scanner = Capturer(repo, settings, use_feed=False)
        scanner.index = VerifyIndex(self.git_dir)
        with capturer.index.locked():
            fed = self.try_fed(capturer) if self.base is not None else None
            if fed is None:
                capturer.capture_with(self)  # a base scan: arms the feed
                return None
            epoch = self.base.epoch if self.base is not None else -1
            generation = self._generation
            seed = scanner.index.copy_of(capturer.index)
        # The full scan runs on the verifier's own index, without the capture lock: a prompt's
        # capture meanwhile is not held up for a whole scan (seconds at 1M files); it changes
        # the base instead, and the comparison is then inconclusive.
        with scanner.index.locked(), idle_priority_git():  # nobody waits for this scan
            scanner.index.install(seed)
            scan = scanner.full_capture()
        with self.watcher.lock:
            self.watcher.sync()
            quiet = (
                not self.watcher.stopped  # closing: later events would go unread
                and not self.watcher.dirty
                and self.watcher.epoch == epoch
                and self._generation == generation
            )
        if not quiet:
            self.counters.inconclusive += 1
            self._request_verify()
            return None
        if scan.tree == fed.tree:
            self.counters.verified += 1
            return True
        self._mismatch(repo, fed.tree, scan.tree)
        return False

    def _mismatch(self, repo: GitRepo, fed: str, scan: str) -> None:
        paths: list[str] = []
        with contextlib.suppress(Exception):
            # The walk that skips equal subtrees (libgit2's tree diff visits every entry).
            paths = [change.path for change in tree_changes(repo.pygit2, fed, scan)]
        self.evidence = paths
        self.disabled = f"the fed tree differed from a full scan ({len(paths)} paths)"
        self.base = None
        evidence = {
            "time": time.time(),
            "pid": os.getpid(),
            "fedTree": fed,
            "scanTree": scan,
            "paths": paths,
            "watcherReasons": list(self.watcher.reasons),
            "events": self.watcher.events,
        }
        with contextlib.suppress(OSError):
            path = private_dir(self.git_dir) / MISMATCH_FILE
            path.write_text(json.dumps(evidence, indent=1), "utf-8")
        self.write_status()

    def write_status(self) -> None:
        with contextlib.suppress(OSError):
            data = {**self.describe(), "pid": os.getpid(), "time": time.time()}
            path = private_dir(self.git_dir) / STATUS_FILE
            replace_private_file(path, json.dumps(data).encode())


def _settings_key(capturer: Capturer) -> tuple[Any, ...]:
    s = capturer.settings
    return (s.max_untracked_file_bytes, tuple(sorted(s.protected_dirs)))
