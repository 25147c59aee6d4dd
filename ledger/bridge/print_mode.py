"""A ``pi -p`` bridge's own change feed: its inotify walk, the first capture's ``git status``
right after that walk, and the feed that adopts the walking watcher.

Why it exists (issue 34, the first ``pi -p`` of the day): print mode has no idle time. Pi sends
the prompt's events right after ``session_start`` and, since stop 46, no longer waits for the
bridge before asking the model (docs/design.md, "Pi's events and their order"); what a tool of
the prompt waits for is the pre-prompt capture, a full scan and the feed's base, which must
start after the walk. So the walk starts as early as the bridge can know it runs for print
mode: when the extension says so at spawn (``REWIND_BRIDGE_NO_UI=1``, :func:`start_walk`, before
the first event is read), else at the first event (``hasUI`` false). Then, after the first
answer, the main thread waits for the walk alone (the engine's imports would take the GIL from
it), starts the status at once (:mod:`ledger.git.feed.early_status`) and loads the engine while
git runs; a thread loads the feed module and adopts the watcher
(:func:`ledger.git.feed.service.adopt`).

Invariants:
- Exact as any feed: a capture is fed only from a base whose status started once the watcher
  was ready (docs/capture.md#a-fed-capture).
- A walk started at spawn is used only for the repository the first event's set-up finds and
  only in print mode with no watcher serving the repository; otherwise it is stopped
  (:meth:`EarlyWalk.take`, :meth:`EarlyWalk.drop`), at the latest when the bridge ends.
- Standard library only before the engine: nothing here loads pygit2 on the main thread.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from ledger.git.feed.inotify import InotifyWatcher

NO_UI_ENV = "REWIND_BRIDGE_NO_UI"
"""Set to ``1`` by the extension when Pi has no UI (print mode) for the bridge it spawns."""

EARLY_STATUS_WALK_WAIT_S = 1.0
"""The most a ``pi -p`` bridge waits for its walk before the first status (as
``Feed.before_full`` waits, ``WALK_WAIT_S``; one wait in all: ``InotifyWatcher.wait_walk``)."""


class EarlyWalk:
    """A walk started at spawn (print mode, as the extension said), kept for the set-up."""

    def __init__(self) -> None:
        self._watcher: InotifyWatcher | None = None
        self._root: Path | None = None
        self._guard = threading.Lock()

    def start(self, start: Path) -> None:
        """Start walking the repository of ``start`` now, unless a watcher serves it (the
        captures go there), there is none, or this system has no change feed."""
        from ledger.bridge.snapshot_socket import find_repository, serving, supported
        from ledger.facilities import facilities

        located = find_repository(start)
        if located is None or not facilities().change_feed:
            return
        if os.environ.get("REWIND_SERVED", "1") != "0" and supported() and serving(*located):
            return
        watcher = InotifyWatcher(str(located[0]), background=False)
        watcher.start()
        with self._guard:
            self._watcher, self._root = watcher, located[0]

    def take(self, root: Path) -> InotifyWatcher | None:
        """The walking watcher if it is ``root``'s (any other is stopped)."""
        with self._guard:
            watcher, walked, self._watcher = self._watcher, self._root, None
        if watcher is not None and walked != root:
            watcher.stop()
            return None
        return watcher

    def drop(self) -> None:
        """Stop a walk nobody took (not print mode after all, a watcher serves, the end)."""
        with self._guard:
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()


def start_walk(start: Path) -> EarlyWalk:
    """The walk of ``start``'s repository, started now (``REWIND_BRIDGE_NO_UI=1``)."""
    early = EarlyWalk()
    with contextlib.suppress(Exception):  # a speed-up only: the first event's set-up walks
        early.start(start)
    return early


def print_mode_feed(start: Path, root: Path, git_dir: Path, early: EarlyWalk | None) -> None:
    """Set up a ``pi -p`` bridge's feed for ``root`` after its first answer (see the module):
    the walk (``early``'s if it walks ``root``), the first status once it is over, then the
    adoption in a thread. No snapshot service here: the watcher this run starts (with
    autoWatchSeconds) serves the repository and the later runs."""
    from ledger.facilities import facilities

    watcher = early.take(root) if early is not None else None
    if watcher is None:
        if not facilities().change_feed:
            # No inotify (macOS, REWIND_PORTABLE=1): the feed could only report itself off,
            # and loading its module in a thread would take the GIL from the prompt's captures.
            return
        watcher = InotifyWatcher(str(root), background=False)
        watcher.start()
    from ledger.git.feed.early_status import start_after_walk

    with contextlib.suppress(Exception):  # a speed-up only: the capture then runs its own status
        start_after_walk(watcher, root, git_dir, EARLY_STATUS_WALK_WAIT_S)

    def adopt() -> None:
        try:
            from ledger.git.feed import service as feed
            from ledger.git.repo import GitRepo

            repo = GitRepo.discover(start)
            # Enabled and adopted in one step (a capture in between would start a second
            # feed); stops the watcher when it cannot be used.
            feed.adopt(repo, watcher, enabling=os.environ.get("REWIND_FEED_VERIFY", "1") != "0")
        except Exception:  # a speed-up only: the captures then scan fully, as before
            watcher.stop()

    threading.Thread(target=adopt, name="rewind-feed-start", daemon=True).start()


__all__ = ["EARLY_STATUS_WALK_WAIT_S", "NO_UI_ENV", "EarlyWalk", "print_mode_feed", "start_walk"]
