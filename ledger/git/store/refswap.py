"""Compare-and-swap of one loose ref, in-process, with git's lock-file protocol; and the judgement
of a lock left on it (docs/capture.md#the-store-swap, docs/design.md#disk-upkeep).

Why it exists: the store ref is swapped on every snapshot, three times per Pi prompt, and a
spawned ``git update-ref`` costs ~4–5 ms each, which is most of what a prompt pays for the
extension. pygit2 has no compare-and-swap ref update, so this module does what git's files
backend does for ``git update-ref --no-deref <ref> <new> <old>``:

1. create ``<ref>.lock`` exclusively — the same lock ``git update-ref``, ``git pack-refs`` and
   libgit2 take, so every writer of the ref is serialised with us. Ours appears *whole*: it is
   made as ``<name>.<hex>.lock``, ``flock``-ed, given the owner's identity line (``pi-rewind-lock
   pid=… start=… boot=… host=… flock=1``) and then hard-linked to ``<ref>.lock`` (``link`` fails
   when the name exists, as ``O_EXCL`` does); the ``flock`` is held for the lock's whole life;
2. read the ref's value *under the lock* (the loose file, else its line in ``packed-refs``)
   and give up when it is not the expected one;
3. write the new value into another file of ours (``<name>.<hex>.lock``, also ``flock``-ed),
   check that ``<ref>.lock`` is still the file we created (``fstat`` of our descriptor against
   ``lstat`` of the name), rename the value over the ref (atomic), and remove our lock, again
   only if the name is still ours.

Why not age: a writer stopped inside its swap (``SIGSTOP``, a suspended laptop, a stalled disk)
holds a lock for as long as it is stopped. Issue 32: a sweep once removed such a lock as "older
than 10 s"; a second writer took a fresh one; the first resumed and renamed *the second's lock*
over the ref, reported success, and its snapshot was never kept. Now a lock is only ever removed
when its owner is provably gone (:func:`remove_if_gone`: our identity line, and its ``flock``
free, or where no ``flock`` can tell, its pid gone or reused), and a writer never renames or
removes a name that is not the file it created.

Invariants:
- Nothing but the ref, its lock and our two ``<name>.<hex>.lock`` files is ever written; git
  skips every name ending in ``.lock`` when it reads refs (also ``git refs verify``). All of them
  are removed or renamed, also on errors; a kill leaves at most the lock (with our identity, its
  owner gone: removed by ``rewind sweep`` and by the next writer) and a temporary (removed the
  same way). Where the file system has no hard links the lock is created directly and the
  identity written just after: a kill in between leaves a lock rewind cannot tell from git's,
  named by ``rewind doctor`` and never removed by rewind.
- A lock without our identity (git's own, or unknown) is never removed, whatever its age: git
  holds one for milliseconds, ``rewind doctor`` names an old one with a hint.
- No reflog (``core.logAllRefUpdates`` would not log ``refs/pi-rewind`` anyway) and no hook, as
  with ``update-ref`` under our runner.
- Whatever this module does not fully understand — a symbolic ref, a reftable repository, an
  unreadable ``packed-refs``, a directory in the way — is :data:`SwapOutcome.UNSUPPORTED`: the
  caller then runs ``git update-ref`` itself, so git's rules decide, never a guess of ours.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import fcntl
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from ledger.git.liveness import Owner, lock_held, parse_fields, same_file
from ledger.plain import FrozenPlain

_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
LOCK_TAG = "pi-rewind-lock"
"""The first word of the line our ref lock holds while it is a lock (git never reads it)."""
_TEMP_HEX = 12
_NO_LINKS = frozenset(
    {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}
)


class SwapOutcome(enum.Enum):
    SWAPPED = "swapped"
    """The ref now holds the new value."""
    LOST = "lost"
    """Another writer holds the lock or moved the ref, or our lock was taken from us: read again
    and retry (the ref is unchanged by us)."""
    UNSUPPORTED = "unsupported"
    """A layout this module leaves to git: run ``git update-ref``."""


def lock_path(common_dir: Path, ref: str) -> Path:
    path = common_dir / ref
    return path.with_name(path.name + ".lock")


def swap_loose_ref(common_dir: Path, ref: str, new: str, old: str | None) -> SwapOutcome:
    """Set ``ref`` (a full name such as ``refs/pi-rewind/store``) to ``new`` only if it is
    ``old`` now (``None``: only if it does not exist)."""
    if (common_dir / "reftable").exists() or not _SHA.fullmatch(new):
        return SwapOutcome.UNSUPPORTED
    path = common_dir / ref
    lock = lock_path(common_dir, ref)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _take(lock, path.name)
    except FileExistsError:
        return SwapOutcome.LOST
    except OSError:
        return SwapOutcome.UNSUPPORTED
    value_fd = -1
    value: Path | None = None
    try:
        current = _current_value(common_dir, path, ref)
        if current is _UNKNOWN:
            return SwapOutcome.UNSUPPORTED
        if current != old:
            return SwapOutcome.LOST
        value = _temp_name(path)
        value_fd = _create(value)
        _write_all(value_fd, (new + "\n").encode("ascii"))
        # Safety: rename only while the lock is still the file we created. If someone removed
        # it (an old rewind's sweep by age, a user's rm), another writer may hold the name now:
        # swapping would overwrite its update. Lose instead; the caller re-reads and retries.
        if not same_file(fd, lock):
            return SwapOutcome.LOST
        os.replace(value, path)
        value = None
        return SwapOutcome.SWAPPED
    except OSError:
        return SwapOutcome.UNSUPPORTED
    finally:
        if value is not None:
            with contextlib.suppress(OSError):
                os.unlink(value)
        # The lock goes by name only if the name is still ours, and before the descriptors
        # close: while they are open, our flock says the owner is alive.
        if same_file(fd, lock):
            with contextlib.suppress(OSError):
                os.unlink(lock)
        if value_fd >= 0:
            os.close(value_fd)
        os.close(fd)


def _temp_name(path: Path) -> Path:
    return path.with_name(f"{path.name}.{os.urandom(_TEMP_HEX // 2).hex()}.lock")


def _create(path: Path) -> int:
    """A new file of ours, ``flock``-ed (where the file system has ``flock``) while it lives.
    0666 before the umask, as git creates its lock and ref files."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
    return fd


def _flocked(fd: int) -> bool:
    """Whether this descriptor holds an ``flock`` (a second exclusive request on the same open
    file description succeeds at once iff it already holds one, or nobody holds any)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _take(lock: Path, name: str) -> int:
    """Create ``lock`` holding our identity and our ``flock``; ``FileExistsError`` when another
    writer holds it. See the module docstring: made whole under a temporary name, then linked."""
    temp = _temp_name(lock.with_name(name))
    fd = _create(temp)
    try:
        line = f"{LOCK_TAG} {Owner.current().to_fields()} flock={int(_flocked(fd))}\n"
        _write_all(fd, line.encode("ascii"))
        try:
            os.link(temp, lock)  # temp is a regular file we just made: no symlink to follow
        except OSError as exc:
            if exc.errno not in _NO_LINKS:
                raise
            # No hard links here: create the lock itself (a kill before the line is written
            # leaves a lock we cannot tell from git's; it is then only named, never removed).
            direct = _create(lock)
            try:
                # The claim describes this descriptor: a probe holding the new file at the
                # instant _create tried its flock leaves us without one, and then identity
                # (not "flock=1") must decide whether we are gone.
                line = f"{LOCK_TAG} {Owner.current().to_fields()} flock={int(_flocked(direct))}\n"
                _write_all(direct, line.encode("ascii"))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(lock)
                os.close(direct)
                raise
            os.close(fd)
            fd = direct
    except BaseException:
        os.close(fd)
        raise
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data`` at the start of ``fd`` (a short write is continued; a full disk raises)."""
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], done)


class _Unknown:
    pass


_UNKNOWN = _Unknown()


def _current_value(common_dir: Path, path: Path, ref: str) -> str | _Unknown | None:
    """The ref's value as git would read it: the loose file wins over ``packed-refs``. Only a
    regular file is read (a FIFO would block, a symlink would be followed): else git decides."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return _UNKNOWN
        text = path.read_text("ascii").strip()
    except FileNotFoundError:
        return _packed_value(common_dir, ref)
    except (OSError, UnicodeDecodeError):
        return _UNKNOWN
    return text if _SHA.fullmatch(text) else _UNKNOWN


def _packed_value(common_dir: Path, ref: str) -> str | _Unknown | None:
    packed = common_dir / "packed-refs"
    try:
        if not stat.S_ISREG(os.lstat(packed).st_mode):
            return _UNKNOWN
        data = packed.read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        return _UNKNOWN
    suffix = b" " + ref.encode("utf-8")
    for line in data.splitlines():
        if line.endswith(suffix) and not line.startswith((b"#", b"^")):
            sha = line[: -len(suffix)].decode("ascii", "replace")
            return sha if _SHA.fullmatch(sha) else _UNKNOWN
    return None


# --- a lock found on the ref: whose, and is its owner gone? ----------------------------------

LockState = Literal["live", "gone", "unknown", "foreign"]


class RefLock(FrozenPlain):
    """The lock found on a ref."""

    __slots__ = ("age_s", "owner", "path", "state")
    path: Path
    age_s: float
    state: LockState
    """``live``: its owner runs (maybe stopped); ``gone``: ours and its owner provably dead
    (removable); ``unknown``: ours, but nothing here can tell (another host, no ``flock`` and no
    process table); ``foreign``: not ours (git's own ``update-ref``, or unknown): never
    removed by rewind."""
    owner: Owner | None

    def __init__(
        self, path: Path, age_s: float, state: LockState, owner: Owner | None = None
    ) -> None:
        self._init(path=path, age_s=age_s, state=state, owner=owner)

    def describe(self) -> str:
        who = f"pid {self.owner.pid}" if self.owner else "no rewind process"
        return {
            "live": f"held by a running rewind process ({who})",
            "gone": f"left by a rewind process that is gone ({who})",
            "unknown": f"taken by rewind ({who}) where this machine cannot tell if it still runs",
            "foreign": "not rewind's (git's own, or another tool's)",
        }[self.state]


def _judge(head: bytes, held: bool | None) -> tuple[LockState, Owner | None]:
    """A lock's state from its first bytes and an ``flock`` probe (``True``: held)."""
    text = head.decode("ascii", "replace")
    if not text.startswith(LOCK_TAG + " "):
        return ("live" if held else "foreign"), None
    fields = parse_fields(text.splitlines()[0] if text else "")
    owner = Owner.from_fields(fields)
    if held:
        return "live", owner
    if owner is None:
        return "unknown", None
    if fields.get("flock") == "1" and held is False:
        return "gone", owner  # its owner held the flock for the lock's whole life
    alive = owner.alive()
    return ("live" if alive else "gone" if alive is False else "unknown"), owner


def _read_head(fd: int) -> bytes:
    return os.pread(fd, 512, 0)


def ref_lock(common_dir: Path, ref: str, *, now: float | None = None) -> RefLock | None:
    """The lock on ``ref`` and its state, or ``None`` when there is none."""
    lock = lock_path(common_dir, ref)
    try:
        st = os.lstat(lock)
    except OSError:
        return None
    age = max(0.0, (time.time() if now is None else now) - st.st_mtime)
    if not stat.S_ISREG(st.st_mode):
        return RefLock(lock, age, "foreign")
    held = lock_held(lock)
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        return RefLock(lock, age, "live" if held else "foreign")
    try:
        head = _read_head(fd)
    except OSError:
        head = b""
    finally:
        os.close(fd)
    state, owner = _judge(head, held)
    return RefLock(lock, age, state, owner)


@contextlib.contextmanager
def _directory_locked(directory: Path, timeout_s: float = 1.0) -> Iterator[bool]:
    """Serialise removers (sweeps, writers cleaning up) with an ``flock`` on the directory: two
    of them judging one dead lock must not have the second remove, by name, the fresh lock a
    writer took after the first removed the dead one. Yields whether it is held."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield False
        return
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or (
                    time.monotonic() >= deadline
                ):
                    yield False
                    return
                time.sleep(0.005)
        yield True
    finally:
        os.close(fd)


def _remove_own(path: Path, *, lock: bool) -> RefLock | None:
    """Remove ``path`` (our lock when ``lock``, else one of our temporaries) if its owner is gone;
    judged on a descriptor we hold an exclusive ``flock`` on, and removed by name only if the
    name is still that file. Call under :func:`_directory_locked`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held: bool | None = False
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None  # its owner holds it: alive
            held = None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        state, owner = _judge(_read_head(fd), held)
        if lock and state != "gone":
            return None
        if not lock and held is not False and state != "gone":
            return None  # a temporary: its flock free proves its owner is gone (or never wrote)
        if not same_file(fd, path):
            return None
        os.unlink(path)
        return RefLock(path, max(0.0, time.time() - st.st_mtime), "gone", owner)
    except OSError:
        return None
    finally:
        os.close(fd)


def remove_if_gone(common_dir: Path, ref: str) -> RefLock | None:
    """Remove the lock on ``ref`` when it is ours and its owner is provably gone; what was
    removed, else ``None`` (no lock, a live or unknown owner, a foreign lock)."""
    lock = lock_path(common_dir, ref)
    if not lock.exists():
        return None
    with _directory_locked(lock.parent) as locked:
        return _remove_own(lock, lock=True) if locked else None


def temporaries(common_dir: Path, ref: str) -> list[Path]:
    """Our ``<name>.<hex>.lock`` files next to ``ref`` (a swap killed between creating one and
    renaming or removing it)."""
    path = common_dir / ref
    pattern = re.compile(re.escape(path.name) + rf"\.[0-9a-f]{{{_TEMP_HEX}}}\.lock")
    try:
        names = sorted(os.listdir(path.parent))
    except OSError:
        return []
    return [path.parent / name for name in names if pattern.fullmatch(name)]


def temporary_free(path: Path) -> bool:
    """Whether nobody holds the temporary's ``flock``: its owner is gone (or, for microseconds,
    between creating it and locking it; removing it then only makes that swap retry)."""
    return lock_held(path) is False


def remove_temporary(path: Path) -> bool:
    """Remove one of our temporaries whose owner is gone (see :func:`temporary_free`)."""
    with _directory_locked(path.parent) as locked:
        return locked and _remove_own(path, lock=False) is not None


__all__ = [
    "LOCK_TAG",
    "LockState",
    "RefLock",
    "SwapOutcome",
    "lock_path",
    "ref_lock",
    "remove_if_gone",
    "remove_temporary",
    "swap_loose_ref",
    "temporaries",
    "temporary_free",
]
