"""The platform seam: what this machine offers rewind beyond POSIX, asked in one place
(docs/design.md#platforms).

Why it exists: rewind runs where Pi runs, and most Pi users are on macOS. Four things rewind uses
exist on Linux only; each has a fallback that must keep rewind exact, only slower:

- **a change feed** (inotify through ctypes): without it every capture scans the tree
  (``git status`` over a private index), which is exact and O(files) instead of O(changed);
- **peer credentials** on Unix sockets (``SO_PEERCRED``): without them the watcher serves no
  snapshots and hosts no Pi session (a socket whose peer's uid cannot be checked is never
  trusted), so each Pi session runs its own bridge process;
- **idle scheduling** (``SCHED_IDLE`` through util-linux's ``chrt``, per-thread ``setpriority``):
  without it background verification scans run at normal priority;
- **the process table** (``/proc``: a process's start time, the boot id, the holders of a lock,
  the mount table): without it liveness rests on ``flock`` alone, which every supported file
  system has, and messages name fewer pids.

(Linux abstract socket names are no longer used: every socket is a 0600 path in the private dir.)

Every caller asks :func:`facilities` instead of probing for itself, so the answers can be turned
off together: ``REWIND_PORTABLE=1`` reports all four absent, and CI runs the whole suite once that
way, proving the fallback paths on every change.

Invariants: no side effects; the answer is computed once per process (the environment variable
is read then); probing never raises.
"""

from __future__ import annotations

import functools
import os
import sys

PORTABLE_ENV = "REWIND_PORTABLE"


class Facilities:
    """The four answers. A plain class, not a dataclass: the command line's client of the
    watcher asks :func:`facilities` before anything else is imported, and ``dataclasses``
    (with ``inspect``) costs it ~10 ms."""

    __slots__ = ("change_feed", "idle_scheduling", "peer_credentials", "process_table")

    def __init__(
        self,
        change_feed: bool,
        peer_credentials: bool,
        idle_scheduling: bool,
        process_table: bool,
    ) -> None:
        self.change_feed = change_feed
        """inotify: captures in O(changed) in a running watcher."""
        self.peer_credentials = peer_credentials
        """``SO_PEERCRED``: served snapshots and hosted Pi sessions."""
        self.idle_scheduling = idle_scheduling
        """``SCHED_IDLE`` / per-thread priorities for background scans."""
        self.process_table = process_table
        """``/proc``: process start times, the boot id, lock holders, mounts."""

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)}" for name in self.__slots__)
        return f"Facilities({fields})"

    def absent(self) -> list[str]:
        """The names of what is missing, for ``rewind doctor``."""
        names = {
            "change_feed": "change feed (inotify)",
            "peer_credentials": "peer credentials (SO_PEERCRED)",
            "idle_scheduling": "idle scheduling (SCHED_IDLE)",
            "process_table": "process table (/proc)",
        }
        return [text for key, text in names.items() if not getattr(self, key)]


def portable() -> bool:
    """Whether ``REWIND_PORTABLE`` asks to behave as on a machine with none of the four."""
    return os.environ.get(PORTABLE_ENV, "") not in ("", "0")


@functools.cache
def facilities() -> Facilities:
    """What this machine offers (see the module); all ``False`` under ``REWIND_PORTABLE=1``."""
    if portable():
        return Facilities(False, False, False, False)
    # `_socket`, not `socket`: the same constants (`socket` re-exports them), without the
    # ~4 ms of `socket`'s enums at a spawned bridge's start (issue 34).
    import _socket

    linux = sys.platform.startswith("linux")
    return Facilities(
        change_feed=linux,
        peer_credentials=linux and hasattr(_socket, "SO_PEERCRED"),
        idle_scheduling=linux and hasattr(os, "setpriority"),
        process_table=linux and os.path.isdir("/proc/self"),
    )


__all__ = ["PORTABLE_ENV", "Facilities", "facilities", "portable"]
