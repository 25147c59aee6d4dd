"""A recursive inotify watcher of one work tree that can be flushed synchronously.

Why it exists: the change feed (:mod:`ledger.git.feed.service`) may skip git's stat scan only if it knows
*every* path that changed since the last capture. Linux queues an inotify event inside the very
system call that changes a file (``write``, ``rename``, ``unlink``, ``chmod`` …), so when a change
has returned to the program that made it, its event is already in the kernel queue. Reading that
queue until it is empty (:meth:`InotifyWatcher.sync`) therefore yields every change made before
the call, with no cookie files and no debounce delay. Libraries such as ``watchfiles`` (Rust
notify) and ``watchdog`` read the queue on their own threads and hand out batches later, so a
capture could not tell "nothing changed" from "not delivered yet"; ``watchfiles`` also drops the
overflow signal. Hence raw inotify through ``ctypes`` (no dependency, no compiled code).

What it does: a background thread walks the tree once (without following symlinks, skipping the
top-level ``.git``), adds a watch per directory, then keeps draining the queue so that it does
not overflow between captures. Every event adds a root-relative path to the dirty set. A
directory created or moved in gets watches and all its descendants are added to the dirty set
(their own events may have happened before the watch existed); a directory moved away loses its
watches (they would report the old paths).

Invariants:
- ``trusted`` epochs: :attr:`epoch` grows every time something may have been missed (queue
  overflow, a watch that could not be added, an unknown event on the root, the thread dying, a
  too-large moved-in tree). A caller that read the dirty set at epoch E and still sees E later
  knows that no change in between went unreported.
- :attr:`failed` is a permanent reason (watch limit, thread died, root gone, unsupported file
  system): the feed falls back to full scans for the rest of the session.
- Known blind spots (writes through ``mmap`` without a later ``close``, hard links written from
  outside the tree, other mount namespaces) are left to the feed's verification.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import struct
import threading
import weakref
from collections.abc import Callable

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

WATCH_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
MAX_MOVED_IN = 20_000
"""A moved-in directory tree with more entries than this makes the feed untrusted (full scan)."""
MAX_DIRTY = 50_000
"""Beyond this many dirty paths the set is dropped and the epoch bumped (a full scan is cheaper)."""
UNSUPPORTED_FS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "9p",
        "ceph",
        "glusterfs",
        "afs",
        "lustre",
        "gpfs",
        "davfs",
        "virtiofs",
        "vboxsf",
        "vmhgfs",
    }
)
_HEADER = struct.Struct("iIII")
LINKS_COUNT_SUBDIRS = frozenset({"ext2", "ext3", "ext4", "xfs", "tmpfs"})
"""File systems whose directories' link count is 2 plus their subdirectories: the start-up
walk does not list a directory whose count is 2 (:meth:`InotifyWatcher._add_tree`). Not btrfs
(always 1), overlayfs or network file systems (not what every kernel reports)."""


def filesystem_type(path: str) -> tuple[str, list[str]]:
    """The type of the file system holding ``path`` and the types of those mounted below it
    (``/proc/self/mountinfo``); ``("unknown", [])`` when it cannot be read."""
    best, best_type, below = "", "unknown", []
    prefix = path.rstrip("/") + "/"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) < 5 or not tail:
                    continue
                point = fields[4].replace("\\040", " ")
                if (path == point or path.startswith(point.rstrip("/") + "/")) and len(
                    point
                ) >= len(best):
                    best, best_type = point, tail[0]
                elif point.startswith(prefix):
                    below.append(tail[0])
    except OSError:
        return "unknown", []
    return best_type, below


def unsupported(fs_type: str) -> bool:
    return fs_type in UNSUPPORTED_FS or fs_type.startswith("fuse")


SCAN_S_PER_INDEX_BYTE = 3e-8
"""What a full scan is expected to take per byte of the private index (~3 µs an entry of ~100
bytes): the most a capture waits for a ``pi -p`` walk (:meth:`InotifyWatcher.wait_walk`)."""

BACKGROUND_NICE = 10
"""Niceness of background work (the walk, the verifier): the prompt's captures come first."""


def lower_thread_priority() -> None:
    """Make the calling thread, and the processes it starts, yield the CPU to the rest of the
    process (Linux applies ``setpriority`` to one thread, and children inherit it). On two cores
    a background full scan otherwise slows a concurrent capture several times over."""
    from ledger.facilities import facilities

    if not facilities().idle_scheduling:
        return
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)


_trim: list[Callable[[int], int] | None] = []


def trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim(0)``, every
    arena; a few milliseconds). glibc keeps what a thread freed in its arena while anything
    above it there is live, so a long-lived process's RSS otherwise keeps the high-water mark
    of each burst: a verification's full scan, a hosted session. A no-op without glibc."""
    if not _trim:
        found: Callable[[int], int] | None = None
        with contextlib.suppress(OSError, AttributeError):
            found = ctypes.CDLL(None).malloc_trim
        _trim.append(found)
    trim = _trim[0]
    if trim is not None:
        trim(0)


_LIVE: weakref.WeakSet[InotifyWatcher] = weakref.WeakSet()
"""The watchers of this process whose inotify instance is open (:func:`live_watchers`)."""


def live_watchers() -> list[InotifyWatcher]:
    """Every watcher of this process with an open inotify instance."""
    return list(_LIVE)


class InotifyWatcher:
    """Watch ``root`` recursively; collect changed root-relative paths (see the module doc)."""

    def __init__(
        self,
        root: str,
        *,
        on_ready: Callable[[], None] | None = None,
        max_watches: int | None = None,
        background: bool = True,
    ) -> None:
        self.root = root.rstrip("/") or "/"
        self.background = background
        """Walk at a lower priority (a feed armed ahead of need); ``False``: at the process's
        own, for a walk that a capture soon after may use (a ``pi -p`` bridge)."""
        self.on_ready = on_ready
        self.max_watches = max_watches
        """Simulated watch limit (tests): adding more watches fails as with ENOSPC."""
        self.lock = threading.RLock()
        self.dirty: set[str] = set()
        self.epoch = 0
        self.prefetch_epoch: int | None = None
        """The epoch when a status was started for this watcher's first base, right after its
        walk (ledger/git/feed/early_status.py); ``None``: none pending."""
        self.ready = False
        self.failed: str | None = None
        self.reasons: list[str] = []
        self.events = 0
        self._wd_path: dict[int, str] = {}
        self._path_wd: dict[str, int] = {}
        self._fd = -1
        self._stop = threading.Event()
        self._walk_over = threading.Event()
        """Set once the start-up walk is over: ready, failed or stopped (:meth:`wait_walk`)."""
        self._walk_given_up = False
        """A wait for the walk ended before it did: the walk is not waited for again."""
        self._libc: ctypes.CDLL | None = None
        self._thread: threading.Thread | None = None
        self._crash: str | None = None
        self._leaves_by_links = False
        self._wake_r = -1
        self._wake_w = -1
        """Write end of the reader thread's wake-up pipe: :meth:`stop` ends its wait at once
        instead of after up to one poll interval (200 ms that Pi waited for at a bridge's end)."""

    def descriptor(self) -> int:
        """The inotify instance's descriptor (-1: none open), for :mod:`ledger.git.feed.teardown`."""
        with self.lock:
            return self._fd

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="rewind-inotify", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._walk_over.set()
        with self.lock:  # the pipe is closed under this lock (below): never a stale number
            if self._wake_w >= 0:  # else the reader's next look at _stop sees it set
                with contextlib.suppress(OSError):
                    os.write(self._wake_w, b"x")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        with self.lock:
            self._close()
            # Closed only here, after the join: a stop() that wrote to a closed (and reused)
            # descriptor number would write into someone else's file.
            ends, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
            for end in ends:
                if end >= 0:
                    os.close(end)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def stopped(self) -> bool:
        """:meth:`stop` was called (the feed is closing): events may go unread from now on, so
        nothing may be trusted, but the thread that ends is no failure."""
        return self._stop.is_set()

    def crash_thread(self, reason: str = "injected") -> None:
        """Make the reader thread die at its next wake-up (tests)."""
        self._crash = reason

    def untrust(self, reason: str) -> None:
        """Something may have been missed: bump the epoch (the next capture scans fully)."""
        with self.lock:
            self.epoch += 1
            self.reasons.append(reason)
            del self.reasons[:-20]
            self.dirty.clear()

    def fail(self, reason: str) -> None:
        with self.lock:
            if self.failed is None:
                self.failed = reason
            self.untrust(reason)
            self._close()
        self._walk_over.set()

    def wait_walk(self, timeout_s: float, index: os.PathLike[str]) -> bool:
        """Whether the watcher is ready, after waiting for a start-up walk that a capture soon
        after may use (``background=False``: a ``pi -p`` bridge's), at most ``timeout_s`` and
        at most what the full scan about to run is expected to take: 3 µs per entry of the
        private index ``index`` (~100 bytes an entry). A full scan is a base only if it starts
        after the walk is over; without one, a ``pi -p`` run's first turn scans the whole tree
        again (~0.4 s at 100k files), while the walk (directories only) has ~0.15 s left at
        most there. Waiting can save one scan, no more: a walk of a large ignored tree (which
        the scan skips) is not waited for beyond that. A background walk is never waited for:
        it is armed ahead of need, and at 1M files it takes seconds. Nor is a walk a wait already
        gave up on (a ``pi -p`` bridge waits before its first status, then its capture asks)."""
        if not self.ready and not self.background and self._thread is not None:
            if self._walk_given_up:
                return False
            with contextlib.suppress(OSError):
                self._walk_over.wait(min(timeout_s, os.stat(index).st_size * SCAN_S_PER_INDEX_BYTE))
            self._walk_given_up = not self.ready
        return self.ready

    def _close(self) -> None:
        _LIVE.discard(self)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._wd_path.clear()
        self._path_wd.clear()

    # --- the reader thread ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._setup()
            self._walk_over.set()
            if self.failed is None and self.on_ready is not None:
                self.on_ready()
            poller = select.poll()
            with self.lock:
                if self._fd < 0:
                    return
                poller.register(self._fd, select.POLLIN)
            self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            poller.register(self._wake_r, select.POLLIN)
            while not self._stop.is_set():
                poller.poll(200)
                if self._crash is not None:
                    raise RuntimeError(f"watcher thread crashed ({self._crash})")
                with self.lock:
                    if self._fd < 0:
                        return
                    self._drain()
        except Exception as exc:
            self.fail(f"watcher thread died: {type(exc).__name__}: {exc}")

    def _setup(self) -> None:
        from ledger.facilities import facilities

        if not facilities().change_feed:
            self.fail("no change feed on this platform (inotify is Linux's); every capture scans")
            return
        fs_type, below = filesystem_type(self.root)
        bad = [t for t in [fs_type, *below] if unsupported(t)]
        if bad:
            self.fail(f"file system type {bad[0]} (inotify cannot see all changes there)")
            return
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._libc = libc
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            self.fail(f"inotify_init1: {os.strerror(ctypes.get_errno())}")
            return
        with self.lock:
            self._fd = fd
            _LIVE.add(self)
        # Only where every directory below the root is on that one file system.
        self._leaves_by_links = fs_type in LINKS_COUNT_SUBDIRS and not below

        # Watches are added outside the lock (a capture may sync meanwhile); events queued
        # during the walk are read once it is over. The walk runs in a thread of its own at a
        # lower priority (this reader thread keeps its own, to drain the queue in time).
        errors: list[BaseException] = []

        def walk() -> None:
            if self.background:
                lower_thread_priority()
            try:
                self._add_tree("", report=False)
            except BaseException as exc:  # re-raised below: a walk cut short is never ready
                errors.append(exc)

        walker = threading.Thread(target=walk, name="rewind-inotify-walk", daemon=True)
        walker.start()
        walker.join()
        if errors:
            raise errors[0]
        with self.lock:
            if self.failed is None:
                self._drain()
                self.ready = True

    def _add_watch(self, rel: str, path: str) -> int | None:
        """Watch one directory (``path``: ``rel`` below the root); ``None`` when it vanished.
        Fails the watcher on a limit."""
        if self.max_watches is not None and len(self._wd_path) >= self.max_watches:
            self.fail("inotify watch limit reached (simulated)")
            return None
        assert self._libc is not None
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), WATCH_MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR):
                return None
            if err == errno.ENOSPC:
                self.fail("inotify watch limit reached (fs.inotify.max_user_watches)")
            else:
                self.fail(f"inotify_add_watch {rel or '.'}: {os.strerror(err)}")
            return None
        old = self._wd_path.get(wd)
        if old is not None and self._path_wd.get(old) == wd:
            del self._path_wd[old]
        self._wd_path[wd] = rel
        self._path_wd[rel] = wd
        return wd

    def _add_tree(self, top: str, *, report: bool) -> int:
        """Watch ``top`` and every directory below it; with ``report``, add every path below
        it to the dirty set. Returns the number of entries seen."""
        stack, seen = [top], 0
        prefix = self.root if self.root.endswith("/") else self.root + "/"
        while stack:
            rel = stack.pop()
            base = prefix + rel if rel else self.root
            with self.lock:
                if self._fd < 0 or self._add_watch(rel, base) is None:
                    if self.failed is not None:
                        return seen
                    continue
            if not report and self._leaves_by_links:
                # A directory without subdirectories needs no listing in the start-up walk (it
                # reports nothing): ~10k of 10k directories at 100k files, most of the walk,
                # on a pi -p bridge's path. Its link count, read *after* its watch was added,
                # counts every subdirectory made before; one made after is an event.
                try:
                    if os.stat(base, follow_symlinks=False).st_nlink == 2:
                        continue
                except OSError:
                    continue
            try:
                entries = list(os.scandir(base))
            except OSError:
                continue
            if not report:
                # The start-up walk (100k entries at 100k files, on a pi -p bridge's path):
                # only directories need a name built.
                for entry in entries:
                    if not rel and entry.name == ".git":
                        continue
                    seen += 1
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(f"{rel}/{entry.name}" if rel else entry.name)
                    except OSError:
                        continue
                continue
            for entry in entries:
                child = f"{rel}/{entry.name}" if rel else entry.name
                if child == ".git":
                    continue
                seen += 1
                if report:
                    self.dirty.add(child)
                    if seen > MAX_MOVED_IN:
                        self.untrust(f"more than {MAX_MOVED_IN} entries moved in: {top}")
                        report = False
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(child)
                except OSError:
                    continue
        return seen

    def _remove_tree(self, top: str) -> None:
        head = top + "/"
        for rel in [p for p in self._path_wd if p == top or p.startswith(head)]:
            wd = self._path_wd.pop(rel)
            self._wd_path.pop(wd, None)
            if self._libc is not None and self._fd >= 0:
                self._libc.inotify_rm_watch(self._fd, wd)

    # --- reading events ---------------------------------------------------------------------

    def sync(self) -> None:
        """Read every event queued so far (call before looking at :attr:`dirty`)."""
        with self.lock:
            if self._fd >= 0:
                self._drain()
            # A thread that ended because stop() asked it to did not die: a verification
            # still running when the feed closes must not mark the session's feed failed.
            if self.failed is None and self.ready and not self.alive() and not self.stopped:
                self.fail("watcher thread died")

    def _drain(self) -> None:
        while self._fd >= 0:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            if not data:
                return
            self._parse(data)

    def _parse(self, data: bytes) -> None:
        offset, size = 0, len(data)
        while offset + _HEADER.size <= size:
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            name_at = offset + _HEADER.size
            raw = data[name_at : name_at + length].split(b"\0", 1)[0]
            offset = name_at + length
            self.events += 1
            self._event(wd, mask, os.fsdecode(raw))
            if len(self.dirty) > MAX_DIRTY:
                self.untrust(f"more than {MAX_DIRTY} changed paths")

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self.untrust("inotify queue overflow (IN_Q_OVERFLOW)")
            return
        rel = self._wd_path.get(wd)
        if rel is None:
            return  # a watch we already dropped
        if mask & IN_IGNORED:
            if self._path_wd.get(rel) == wd:
                del self._path_wd[rel]
            del self._wd_path[wd]
            if rel == "":
                self.fail("the work tree's root directory went away")
            return
        if mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT):
            if rel == "":
                self.fail("the work tree's root directory was moved, deleted or unmounted")
            elif mask & IN_UNMOUNT:
                self.untrust(f"file system unmounted: {rel}")
            return  # the parent's event names the path
        if not name:
            return
        path = f"{rel}/{name}" if rel else name
        if path == ".git":
            return  # git's own files: configuration and ignore files are checked by stat
        self.dirty.add(path)
        if mask & IN_ISDIR:
            if mask & IN_MOVED_FROM:
                self._remove_tree(path)
            elif mask & (IN_CREATE | IN_MOVED_TO):
                self._add_tree(path, report=True)
