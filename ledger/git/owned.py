"""Scratch directories and temporary files in rewind's private dir that carry their owner's mark,
so that what a killed owner left can be named and removed, and a live owner's never is
(docs/design.md#disk-upkeep).

Why it exists: a restore's ignore check works in a scratch work tree
(``ignore-scratch-<pid>-<hex>/``, :mod:`ledger.git.restore.ignored`) and the upkeep writes its
floor through a temporary file (``loose-floor.<hex>.tmp``, :mod:`ledger.git.store.loose`). A
``kill -9`` leaves either behind, and nothing named or removed them (issue 32, review finding 4).
Age proves nothing (a stopped owner keeps its files as long as it is stopped): an owner's mark
does (:mod:`ledger.git.liveness`).

Invariants:
- **A scratch directory** ``<name>/`` is made only after its owner holds ``<name>.lock``: created
  ``O_EXCL``, its identity written into it (:class:`~ledger.git.liveness.Owner`), an exclusive
  ``flock`` taken, and the name checked to be still that file (:func:`hold`). The owner removes
  the directory first and its lock last. So a directory whose lock is missing, or whose lock's
  ``flock`` is free, has a dead owner: :func:`owner_gone`. Where the file system has no ``flock``
  the identity in the lock decides; "cannot tell" keeps the directory.
- **A temporary file** is its own lock: created ``O_EXCL`` and ``flock``'ed at once, renamed
  into place by its owner; removed only through
  :func:`~ledger.git.liveness.remove_if_unlocked` (judged on a descriptor holding the exclusive
  ``flock``). Removing one whose owner had not locked it yet only makes that owner's rename fail
  (``ENOENT``), which it treats as "not saved this time". Every private file rewritten whole
  (the dedup candidate, the capture state, the watcher's status, the floor, the usage cache,
  the kept tree diffs) goes through one: :func:`replace_private_file`. So a ``*.tmp`` file
  directly in a private dir is always such a temporary, and the leftovers sweep names and
  removes one whose ``flock`` is free (:func:`private_temporaries`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from ledger.git.liveness import (
    Owner,
    lock_held,
    parse_fields,
    pid_exists,
    remove_if_unlocked,
    same_file,
    take_lock,
)

SCRATCH_PREFIX = "ignore-scratch-"
"""In ``<git-dir>/pi-rewind``: a restore's scratch work tree (and ``<name>.lock``, its owner)."""
LOCK_SUFFIX = ".lock"


class NotHeld(OSError):
    """The owner's lock file was removed before it was held (a remover judged it abandoned)."""


def hold(lock: Path) -> int:
    """Create ``lock`` (``O_EXCL``), write this process's identity into it and hold its
    ``flock`` (where the file system has one); the descriptor to :func:`release`. Raises
    :class:`NotHeld` (an ``OSError``) when the name no longer is that file once locked."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + 0.05
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                # A new file: only a probe or a remover holds it a moment; a remover that
                # judged it abandoned unlinks it, which the check below finds.
                if time.monotonic() >= deadline:
                    raise NotHeld(f"{lock} stayed locked by another process") from None
                time.sleep(0.001)
            except OSError:
                break  # no flock on this file system: the identity alone marks it
        os.write(fd, (Owner.current().to_fields() + "\n").encode("ascii"))
        if not same_file(fd, lock):
            raise NotHeld(f"{lock} was removed before it was held")
    except BaseException:
        os.close(fd)
        raise
    return fd


def release(fd: int, lock: Path) -> None:
    """Remove the lock (only if the name is still ours) and close it."""
    try:
        if same_file(fd, lock):
            with contextlib.suppress(OSError):
                os.unlink(lock)
    finally:
        os.close(fd)


def owner_gone(lock: Path) -> bool:
    """Whether the owner of ``lock`` (see :func:`hold`) is provably gone: the file is missing,
    or nobody holds its ``flock``, or (no ``flock`` here) its identity is of a dead process."""
    held = lock_held(lock)
    if held is not None:
        return not held
    try:
        with open(lock, "rb") as f:
            text = f.read(512).decode("ascii", "replace")
    except FileNotFoundError:
        return True
    except OSError:
        return False
    owner = Owner.from_fields(parse_fields(text))
    return owner is not None and owner.alive() is False


@contextlib.contextmanager
def scratch_dir(home: Path, prefix: str = SCRATCH_PREFIX) -> Iterator[Path]:
    """``home/<prefix><pid>-<hex>/``, made after its lock is held, removed (then the lock) at
    the end; a kill leaves both for :func:`scratch_leftovers`."""
    name = f"{prefix}{os.getpid()}-{os.urandom(4).hex()}"
    lock = home / (name + LOCK_SUFFIX)
    fd = hold(lock)
    try:
        directory = home / name
        directory.mkdir(mode=0o700)
        try:
            yield directory
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    finally:
        release(fd, lock)


def scratch_leftovers(home: Path, prefix: str = SCRATCH_PREFIX) -> list[Path]:
    """Scratch directories and lone locks in ``home`` whose owner is provably gone; a directory
    comes before its lock (remove them in this order: the lock is what keeps a directory)."""
    try:
        names = sorted(os.listdir(home))
    except OSError:
        return []
    found: list[Path] = []
    for name in names:
        if not name.startswith(prefix) or name.endswith(LOCK_SUFFIX):
            continue
        if owner_gone(home / (name + LOCK_SUFFIX)):
            found.append(home / name)
    for name in names:
        if name.startswith(prefix) and name.endswith(LOCK_SUFFIX) and owner_gone(home / name):
            found.append(home / name)
    return found


def remove_scratch(path: Path) -> bool:
    """Remove a scratch directory or lock :func:`scratch_leftovers` named, judged again right
    before: a directory while its lock's ``flock`` is held by us (or the lock is gone), a lock
    through :func:`~ledger.git.liveness.remove_if_unlocked`."""
    if path.name.endswith(LOCK_SUFFIX):
        if lock_held(path) is None:  # no flock here: the identity judged it gone
            if not owner_gone(path):
                return False
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            return True
        return remove_if_unlocked(path)
    lock = path.with_name(path.name + LOCK_SUFFIX)
    with _judged(lock) as gone:
        if not gone:
            return False
        shutil.rmtree(path, ignore_errors=True)
        return not path.exists()


@contextlib.contextmanager
def _judged(lock: Path) -> Iterator[bool]:
    """Whether ``lock``'s owner is gone, holding the lock's exclusive ``flock`` while the
    caller acts on the answer (so no owner can take it meanwhile: an owner never re-takes a
    lock, but this keeps the verdict and the removal one step)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        yield True  # its owner removes the lock only after the directory: it is gone
        return
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        except OSError:  # no flock here: the identity decides
            yield owner_gone(lock)
            return
        yield True
    finally:
        os.close(fd)


TEMP_SUFFIX = ".tmp"
PID_MAX = 1 << 22
"""Linux's largest ``pid_max``: a longer number in a temporary's name is no pid."""


def replace_private_file(target: Path, data: bytes) -> bool:
    """Replace ``target`` (a file of a private dir) whole with ``data`` through
    ``<name>.<hex>.tmp``, a temporary that is its own lock (see the module): one a ``kill -9``
    leaves is named and removed by the leftovers sweep once its ``flock`` is free. ``False``
    only when a sweep kept judging the temporary abandoned before this process locked it
    (:func:`~ledger.git.liveness.take_lock` takes the name again; nothing saved then: every
    such file is a cache or a status that the next write renews). Raises ``OSError`` when the
    write fails (the temporary is removed)."""
    for _attempt in range(3):
        tmp = target.with_name(f"{target.name}.{os.urandom(4).hex()}{TEMP_SUFFIX}")
        fd = take_lock(tmp)
        if fd is None:  # no flock here: a plain temporary (removed by its writer alone)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o600)
        renamed = False
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if same_file(fd, tmp):
                os.replace(tmp, target)
                renamed = True
        finally:
            # Ours by inode whatever the file system (with or without flock); then closed:
            # the lock is held for the temporary's whole life.
            if not renamed and same_file(fd, tmp):
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            os.close(fd)
        if renamed:
            return True
    return False


def private_temporaries(directory: Path) -> list[Path]:
    """The ``*.tmp`` files directly in the private dir ``directory`` whose writer is gone (its
    ``flock`` is free; "cannot tell" keeps one unnamed). Each is a temporary of
    :func:`replace_private_file` (or of an older version, which wrote them unlocked)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    found = []
    for name in names:
        path = directory / name
        if not name.endswith(TEMP_SUFFIX) or not path.is_file() or path.is_symlink():
            continue
        # Older versions wrote `<name>.<pid>.tmp` without a lock: a free flock proves nothing
        # there, so such a temporary is kept while a process of that pid runs (an old bridge
        # still open across an upgrade).
        tail = name[: -len(TEMP_SUFFIX)].rpartition(".")[2]
        if tail.isdigit() and int(tail) <= PID_MAX and pid_exists(int(tail)) is not False:
            continue
        if lock_held(path) is False:
            found.append(path)
    return found


__all__ = [
    "LOCK_SUFFIX",
    "SCRATCH_PREFIX",
    "TEMP_SUFFIX",
    "NotHeld",
    "hold",
    "owner_gone",
    "private_temporaries",
    "release",
    "remove_scratch",
    "replace_private_file",
    "scratch_dir",
    "scratch_leftovers",
]
