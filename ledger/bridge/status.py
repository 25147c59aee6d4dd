"""Which process serves a repository: ``rewind serve --status`` and ``rewind doctor``.

Why it exists: the watcher that makes captures fast outlives the command that started it (as
git's fsmonitor daemon does), so a user must be able to see it and stop it. The serve lock's
holder (:class:`ledger.git.private.ServeLock`) is the one process that serves a repository; this
module names it (a watcher or a Pi session's bridge), says since when, whether it hosts Pi
sessions, and its change feed's last status.

Invariants: read-only (a shared, non-blocking probe of the lock; /proc); never signals anything.
"""

from __future__ import annotations

import os
from pathlib import Path


def server_info(root: Path, git_dir: Path) -> dict[str, object]:
    """Which process serves the repository (``rewind serve --status``, ``rewind doctor``): its
    pid, whether it is a watcher (``--watch``) or a Pi session's bridge (``--stdio``), since when,
    whether it hosts Pi sessions, and its change feed's last status. Read-only."""
    from ledger.bridge.hosted import socket_path as bridge_socket
    from ledger.git.feed.service import read_status_file
    from ledger.git.private import serving_pid

    pid = serving_pid(git_dir)
    info: dict[str, object] = {"root": str(root), "serving": pid is not None, "pid": pid}
    if pid:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            argv = []
        kind = "watcher" if b"--watch" in argv else "bridge" if b"--stdio" in argv else "unknown"
        info["kind"] = kind
        info["since"] = _started(pid)
        info["hosting"] = kind == "watcher" and bridge_socket(git_dir).exists()
        info["feed"] = read_status_file(git_dir)
    return info


def _started(pid: int) -> str | None:
    """When process ``pid`` started (ISO 8601, UTC), from /proc; ``None`` when unknown."""
    import time

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 (starttime), counted after the command's ")"
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    started = time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))


def owned(pid: int) -> bool:
    """Whether process ``pid`` runs as this user (before it is sent a signal)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1]) == os.getuid()
    except (OSError, ValueError, IndexError):
        return False
    return False


__all__ = ["owned", "server_info"]
