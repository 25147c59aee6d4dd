"""The end of a process someone waits for: its inotify watches torn down by another process.

Why it exists: closing an inotify instance that watches the 10k directories of a 100k-file
work tree costs 22–30 ms of kernel time (every watch is destroyed, and the kernel waits for a
grace period before the instance is freed), in ``close()`` or, if the descriptor is still open,
in the process's exit. A bridge's end is on Pi's path: Pi waits for the bridge to exit before it
exits itself, and the user's shell waits for Pi (the first ``pi -p`` of the day, issue 34).

What it does: :func:`hand_off` starts ``cat`` with the open inotify descriptors of this process
inherited (``pass_fds``) and its standard input a pipe whose write end only this process holds
(close-on-exec: no git child inherits it). This process's own ``close()`` then only drops a
reference. When this process exits, its end of the pipe closes, ``cat`` reads end-of-file and
exits, and the instances are torn down in ``cat``'s exit, which nobody waits for.

Invariants:
- Only inotify descriptors are handed over: no file, lock or socket whose lifetime anyone relies
  on outlives this process. The reaper has nothing else: standard output and error are
  ``/dev/null``, it runs in a session of its own (no terminal signal reaches it), and it lives
  only until this process exits (end-of-file), plus its own teardown.
- The watches stay in place until then; their events are never read (the kernel's queue is
  bounded; overflowing it only drops events nobody will read).
- Best effort: no ``cat`` on ``PATH``, or a failed start, and nothing changes (this process pays
  the teardown, as before). Linux only, as inotify is.
"""

from __future__ import annotations

import contextlib
import subprocess

from ledger.git.feed.inotify import live_watchers
from ledger.git.runner import resolve_executable

_REAPERS: list[subprocess.Popen[bytes]] = []
"""Kept for this process's lifetime: the reaper's stdin pipe must stay open until the exit."""


def hand_off() -> int:
    """Let a reaper hold this process's open inotify instances until it exits (see the module);
    how many were handed over (0: none open, or no reaper could start)."""
    cat = resolve_executable("cat")
    with contextlib.ExitStack() as held:
        # Each watcher closes its descriptor only under its lock (stop, fail): held until the
        # reaper has started, no number handed over can be closed, and reused by another file
        # (a lock's, say, which the reaper would then keep), in between.
        fds = []
        for watcher in live_watchers():
            held.enter_context(watcher.lock)
            fd = watcher.descriptor()
            if fd >= 0:
                fds.append(fd)
        if not fds:
            return 0
        try:
            reaper = subprocess.Popen(
                [cat],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=fds,
                start_new_session=True,
            )
        except (OSError, ValueError, subprocess.SubprocessError):
            return 0
    _REAPERS.append(reaper)
    return len(fds)


def release() -> None:
    """End every reaper now (tests, and a process that goes on living after its watchers)."""
    while _REAPERS:
        reaper = _REAPERS.pop()
        with contextlib.suppress(OSError, ValueError):
            if reaper.stdin is not None:
                reaper.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            reaper.wait(timeout=5)


__all__ = ["hand_off", "release"]
