"""The private, persistent capture index under ``<git-dir>/pi-rewind/``, and its files.

Why it exists: building a fresh index and re-hashing every file at every capture (the reference's
method) costs seconds on large repositories (D9, docs/defects.md#d9). Keeping our own index lets
git's stat cache, cache-tree and untracked cache do the work, so a capture costs a stat per file
plus hashing what changed. The index is ours alone: git runs on it with our settings, never the
user's weakened ones (docs/design.md#the-private-index).

What lives in ``<git-dir>/pi-rewind/`` (:class:`PrivateIndex` names them):
- ``index``: the private index (git's format v2, so that racy entries can be found without
  parsing every entry, :mod:`ledger.git.capture.racy`; with the untracked cache; never a split index,
  whose shared files git would put in ``.git/`` itself).
- ``lock``: held for the whole of a capture or restore (:class:`CaptureLock`).
- ``capture-state.json``: what the index does not say (:mod:`ledger.git.capture.state`), valid
  for one fingerprint of the configuration outside the work tree (:mod:`ledger.git.capture.fingerprint`).
- ``capture-in-progress``: the mark of a capture that may have written the index but not yet the
  state that matches it.
- ``serve.lock``: held by the one ``rewind serve`` that serves the repository (:class:`ServeLock`);
  beside it the sockets it listens on (``snapshot.sock``, ``bridge.sock``), which only a directory
  nobody else may write can keep this user's (:func:`unsafe_private_dir`).

Invariants:
- A missing, stale, unreadable or corrupt index or state is rebuilt from nothing, never trusted.
- ``state.tree`` is the tree of the index's entries, or ``None``. A capture marks itself in
  progress (:meth:`PrivateIndex.begin`) before git may write the index and clears the mark when
  it saves the state; a state found with the mark (a crash half-way) is not trusted.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ledger.errors import GitError
from ledger.git.capture.state import CaptureState
from ledger.git.owned import replace_private_file
from ledger.git.private import private_dir

LOCK_TIMEOUT_S = 120.0


class IndexUnusable(Exception):
    """The private index cannot be read or written into a tree: rebuild it."""


class PrivateIndex:
    """Paths, lock and state file of one work tree's private capture index."""

    def __init__(self, git_dir: Path) -> None:
        self.dir = private_dir(git_dir)
        self.index_path = self.dir / "index"
        self.state_path = self.dir / "capture-state.json"
        self.lock_path = self.dir / "lock"
        self.pending_path = self.dir / "capture-in-progress"
        self._lock = CaptureLock(self.dir, self.lock_path)

    @contextlib.contextmanager
    def locked(self, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
        """Exclusive use of the private index across processes and threads; re-entrant within
        a thread (:class:`CaptureLock`)."""
        with self._lock.held(timeout_s):
            yield

    def locked_here(self) -> bool:
        """Whether this thread holds the lock (e.g. a restore, capturing inside it)."""
        return self._lock.held_here()

    def depth_here(self) -> int:
        """How many nested holds of the lock this thread is inside (0: none)."""
        return self._lock.depth_here()

    # --- state --------------------------------------------------------------------------

    def load_state(self) -> CaptureState | None:
        """The state, or ``None`` when it (or the index) is missing or unreadable, or when a
        capture stopped half-way (its racy entries were never guarded)."""
        if self.pending_path.exists():
            return None
        try:
            raw = self.state_path.read_bytes()
        except OSError:
            return None
        if not self.index_path.is_file():
            return None
        return CaptureState.from_json(raw)

    def health(self) -> str:
        """``ok``, ``missing`` (built at the next capture), ``interrupted`` or ``stale``
        (rebuilt at the next capture), or ``corrupt`` (not an index file; rebuilt too)."""
        if not self.index_path.exists():
            return "missing"
        if self.pending_path.exists():
            return "interrupted"
        try:
            with open(self.index_path, "rb") as handle:
                magic = handle.read(4)
        except OSError:
            return "corrupt"
        if magic != b"DIRC":
            return "corrupt"
        return "ok" if self.load_state() is not None else "stale"

    def save_state(self, state: CaptureState) -> None:
        # Through a temporary that is its own lock (ledger/git/owned.py). Not renamed (a sweep
        # took the temporary): the in-progress mark stays and the next capture rebuilds.
        if not replace_private_file(self.state_path, state.to_json()):
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.pending_path)

    def begin(self) -> None:
        """Mark a capture in progress (before git may write the index); :meth:`save_state`
        clears the mark once the state matches the index again."""
        self.pending_path.touch()

    def reset(self) -> None:
        """Forget everything: the next capture starts from an empty index."""
        for path in (self.index_path, self.state_path, self.dir / "index.lock", self.pending_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


# --- the capture lock ------------------------------------------------------------------------
#
# One user of the private index at a time: a capture rewrites it, and a restore must see no
# capture interleave with its own, so both hold this lock for their whole duration. Exclusive
# across processes by ``flock`` on ``lock`` (released by the kernel when a holder dies, so a crash
# never leaves it held) and across threads by one ``threading.Lock`` per lock file; re-entrant
# within a thread (a restore holds it across its captures, which take it again: a second
# ``flock`` on a new descriptor would wait for ourselves); waiting is bounded. Once held, a
# leftover ``index.lock`` of git's comes from a crashed command and is removed, or git would
# refuse to run.

_HELD = threading.local()
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


class CaptureLock:
    """The lock file ``path`` guarding the private index in ``directory``."""

    def __init__(self, directory: Path, path: Path) -> None:
        self.dir = directory
        self.path = path

    def held_here(self) -> bool:
        """Whether this thread holds the lock (inside a :meth:`held` block)."""
        return bool(self.depth_here())

    def depth_here(self) -> int:
        """How many nested :meth:`held` blocks of this thread are open."""
        return int(_HELD.__dict__.get("depth", {}).get(str(self.path), 0))

    @contextlib.contextmanager
    def held(self, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
        """Hold the lock (see the module); raises :class:`GitError` after ``timeout_s``."""
        key = str(self.path)
        depth: dict[str, int] = _HELD.__dict__.setdefault("depth", {})
        if depth.get(key):
            depth[key] += 1
            try:
                yield
            finally:
                depth[key] -= 1
            return
        with _THREAD_LOCKS_GUARD:
            thread_lock = _THREAD_LOCKS.setdefault(key, threading.Lock())
        if not thread_lock.acquire(timeout=timeout_s):
            raise GitError(
                "snapshot",
                f"the capture index {self.dir} is busy in this process",
                hint="another rewind capture is running; try again",
            )
        try:
            with self._flocked(timeout_s):
                depth[key] = 1
                try:
                    yield
                finally:
                    depth[key] = 0
        finally:
            thread_lock.release()

    @contextlib.contextmanager
    def _flocked(self, timeout_s: float) -> Iterator[None]:
        # 0700: the private dir (or its verify/, made after it) must be nobody else's to write.
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            deadline = time.monotonic() + timeout_s
            delay = 0.005
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise GitError("snapshot", f"cannot lock {self.path}: {exc}") from exc
                    if time.monotonic() >= deadline:
                        raise GitError(
                            "snapshot",
                            f"the capture index {self.dir} is locked by another process",
                            hint="another rewind capture is running; try again",
                        ) from exc
                    time.sleep(delay)
                    delay = min(delay * 2, 0.1)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.dir / "index.lock")
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock


VERIFY_DIR = "verify"


class VerifyIndex(PrivateIndex):
    """The verifier's own private index, ``<git-dir>/pi-rewind/verify/`` (same files, own lock):
    its full scans never hold the capture lock, and its stat cache keeps them a stat scan."""

    def __init__(self, git_dir: Path) -> None:
        super().__init__(git_dir)
        self.dir = private_dir(git_dir) / VERIFY_DIR
        self.index_path = self.dir / "index"
        self.state_path = self.dir / "capture-state.json"
        self.lock_path = self.dir / "lock"
        self.pending_path = self.dir / "capture-in-progress"
        self._lock = CaptureLock(self.dir, self.lock_path)

    def copy_of(self, main: PrivateIndex) -> tuple[Path, Path] | None:
        """When this index has no usable state yet: copies of ``main``'s index and state (the
        caller holds ``main``'s lock, not this one), for :meth:`install`. A first scan then
        stats instead of hashing every file; a copy that cannot be made only means it hashes."""
        if self.load_state() is not None or main.load_state() is None:
            return None
        tag = f"{os.getpid()}.{threading.get_ident()}"
        index, state = self.dir / f"seed-index.{tag}", self.dir / f"seed-state.{tag}"
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            # The index's own mtime is part of git's racy check: copy2 keeps it.
            shutil.copy2(main.index_path, index)
            shutil.copy2(main.state_path, state)
        except OSError:
            _unlink(index, state)
            return None
        return index, state

    def install(self, copy: tuple[Path, Path] | None) -> None:
        """Put a :meth:`copy_of` in place unless a state appeared meanwhile (under this lock)."""
        if copy is None:
            return
        try:
            if self.load_state() is None:
                self.reset()
                os.replace(copy[0], self.index_path)
                os.replace(copy[1], self.state_path)
        except OSError:
            self.reset()
        finally:
            _unlink(*copy)


def _unlink(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()


__all__ = [
    "LOCK_TIMEOUT_S",
    "VERIFY_DIR",
    "CaptureLock",
    "IndexUnusable",
    "PrivateIndex",
    "VerifyIndex",
]
