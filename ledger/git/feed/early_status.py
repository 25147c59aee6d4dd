"""A ``pi -p`` bridge's first ``git status``, started the moment its walk is over, and the base
of the change feed that status makes.

Why it exists (issue 34, the first ``pi -p`` of the day): the prompt's first capture is a full
scan, and the feed's base (:mod:`ledger.git.feed.service`), so it must wait for the run's
inotify walk; after it, the engine's imports (~140 ms) and the status (~150 ms at 100k files)
ran one after the other, all on the path of the prompt's first tool. Started here, in the
bridge's main thread right after the walk (:func:`start_after_walk`, from
:mod:`ledger.bridge.print_mode`), the status runs in git while the engine loads, and the
capture takes its output (:mod:`ledger.git.capture.prefetch`).

Invariants (docs/capture.md#a-fed-capture, "a status started before its capture"):
- **A base only from a status started once the watcher was ready.** The epoch is read, under
  the watcher's lock, after the walk is over and before git starts; a watcher that was not
  ready gets no prefetch. A capture whose feed's watcher is not the one that started the status
  (a second feed, after a lost race with the adoption) stops it, runs its own and is no base.
- **No change after the status started is dropped.** A full capture normally empties the dirty
  set when its status starts; here it started earlier, so the set is kept whole: every change
  since the walk is in it (some from before the status too, which a fed capture merely reads
  again). An untrusted watcher in between has another epoch: that base is never used.
- The capture lock is held from before git starts until the first capture ends (the prefetch's
  own rule); the bridge lets go of it at its end before waiting for anything else.
Standard library and the prefetch module only: this runs before pygit2 is loaded.
"""

from __future__ import annotations

import os
from pathlib import Path

from ledger.git.capture import prefetch
from ledger.git.capture.index import PrivateIndex
from ledger.git.feed.inotify import InotifyWatcher


def start_after_walk(watcher: InotifyWatcher, root: Path, git_dir: Path, wait_s: float) -> bool:
    """Wait for ``watcher``'s walk (at most ``wait_s``, and no longer than the scan it saves:
    :meth:`InotifyWatcher.wait_walk`), then start the capture's status. False: not started (the
    walk not over, ``REWIND_STATUS_PREFETCH=0``, no index yet, the lock busy, a restore)."""
    if os.environ.get("REWIND_STATUS_PREFETCH", "1") == "0":
        return False
    if not watcher.wait_walk(wait_s, PrivateIndex(git_dir).index_path):
        return False
    with watcher.lock:
        if not watcher.ready or watcher.failed is not None or watcher.stopped:
            return False
        watcher.prefetch_epoch = watcher.epoch  # before git starts (see the module)
    if prefetch.start(str(root), str(git_dir)):
        return True
    watcher.prefetch_epoch = None
    return False


def base_epoch(watcher: InotifyWatcher) -> int | None:
    """For ``Feed.before_full`` when this thread has a status pending: the epoch its scan is a
    base at, the dirty set kept whole; ``None``: no base (a status this watcher did not start is
    stopped first: the capture runs its own)."""
    epoch, watcher.prefetch_epoch = watcher.prefetch_epoch, None
    if epoch is None:
        prefetch.discard()  # started before this watcher was ready, or by another one
        return None
    watcher.sync()
    with watcher.lock:
        if not watcher.ready or watcher.failed is not None or watcher.stopped:
            return None
    return epoch


__all__ = ["base_epoch", "start_after_walk"]
