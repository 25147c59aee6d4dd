"""The upkeep lock: one disk upkeep at a time per repository (docs/design.md#disk-upkeep).

Why it exists apart from :mod:`ledger.git.store.upkeep`: the leftovers sweep
(:mod:`ledger.git.store.leftovers`, below the upkeep) must hold the same lock while it removes a
pack an interrupted upkeep moved without its index, so that it never races a live upkeep
installing a pack of the same name (pack names repeat for the same content).

Invariants: an exclusive ``flock`` on ``<common-dir>/pi-rewind/upkeep.flock``, released by the
kernel when its holder dies (a killed upkeep never blocks the next one); descriptors are
close-on-exec, so only a child given one explicitly (``pass_fds``) keeps it. ``flock`` belongs
to an open file description: a second attempt in the same process, on a new descriptor, is
refused like any other (callers that hold it say so).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

from ledger.git.liveness import lock_held
from ledger.git.private import make_private_dir, private_dir
from ledger.git.repo import GitRepo

LOCK_TIMEOUT_S = 2.0
LOCK_FILE = "upkeep.flock"
"""In ``<common-dir>/pi-rewind``: the file an upkeep holds an ``flock`` on while it runs."""


class UpkeepBusy(Exception):
    """Another process (or thread) runs an upkeep of this repository."""


def try_upkeep_lock(repo: GitRepo) -> int | None:
    """A descriptor holding the upkeep ``flock`` (close it to release), or ``None`` when another
    upkeep holds it. The descriptor is close-on-exec: only a child given it explicitly
    (``pass_fds``) keeps the lock (:mod:`ledger.git.store.autoupkeep`)."""
    home = make_private_dir(repo.common_dir)
    fd = os.open(home / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def upkeep_lock(repo: GitRepo, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the upkeep ``flock`` (waiting up to ``timeout_s``); :class:`UpkeepBusy` when it
    stays taken."""
    deadline = time.monotonic() + timeout_s
    while True:
        fd = try_upkeep_lock(repo)
        if fd is not None:
            break
        if time.monotonic() >= deadline:
            raise UpkeepBusy()
        time.sleep(0.05)
    try:
        yield
    finally:
        os.close(fd)


def upkeep_running(repo: GitRepo) -> bool:
    """Whether an upkeep of this repository holds the lock now (a probe; nothing created). A
    doubt (no ``flock`` here) counts as running: no second upkeep is started on a doubt."""
    return lock_held(private_dir(repo.common_dir) / LOCK_FILE) is not False


__all__ = [
    "LOCK_FILE",
    "LOCK_TIMEOUT_S",
    "UpkeepBusy",
    "try_upkeep_lock",
    "upkeep_lock",
    "upkeep_running",
]
