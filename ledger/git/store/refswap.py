"""Compare-and-swap of one loose ref, in-process, with git's own lock-file protocol.

Why it exists: the store ref is swapped on every snapshot, three times per Pi prompt, and a
spawned ``git update-ref`` costs ~4–5 ms each, which is most of what a prompt pays for the
extension (docs/capture.md#the-store-swap). pygit2 has no compare-and-swap ref update, so this
module does what git's files backend does for ``git update-ref --no-deref <ref> <new> <old>``:

1. create ``<ref>.lock`` with ``O_CREAT|O_EXCL`` — the same lock ``git update-ref``,
   ``git pack-refs`` and libgit2 take, so every writer of the ref is serialised with us;
2. read the ref's value *under the lock* (the loose file, else its line in ``packed-refs``)
   and give up when it is not the expected one;
3. write the new value into the lock file and ``rename`` it over the ref (atomic).

Invariants:
- Nothing but the ref and its lock file is ever written, and the lock is always removed or
  renamed, also on errors. No reflog (``core.logAllRefUpdates`` would not log ``refs/pi-rewind``
  anyway) and no hook, as with ``update-ref`` under our runner.
- Whatever this module does not fully understand — a symbolic ref, a reftable repository, an
  unreadable ``packed-refs``, a directory in the way — is :data:`SwapOutcome.UNSUPPORTED`: the
  caller then runs ``git update-ref`` itself, so git's rules decide, never a guess of ours.
"""

from __future__ import annotations

import enum
import os
import re
import stat
from pathlib import Path

_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


class SwapOutcome(enum.Enum):
    SWAPPED = "swapped"
    """The ref now holds the new value."""
    LOST = "lost"
    """Another writer holds the lock or moved the ref: read again and retry."""
    UNSUPPORTED = "unsupported"
    """A layout this module leaves to git: run ``git update-ref``."""


def swap_loose_ref(common_dir: Path, ref: str, new: str, old: str | None) -> SwapOutcome:
    """Set ``ref`` (a full name such as ``refs/pi-rewind/store``) to ``new`` only if it is
    ``old`` now (``None``: only if it does not exist)."""
    if (common_dir / "reftable").exists() or not _SHA.fullmatch(new):
        return SwapOutcome.UNSUPPORTED
    path = common_dir / ref
    lock = path.with_name(path.name + ".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(
            lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666
        )
    except FileExistsError:
        return SwapOutcome.LOST
    except OSError:
        return SwapOutcome.UNSUPPORTED
    renamed = False
    try:
        current = _current_value(common_dir, path, ref)
        if current is _UNKNOWN:
            return SwapOutcome.UNSUPPORTED
        if current != old:
            return SwapOutcome.LOST
        os.write(fd, (new + "\n").encode("ascii"))
        os.close(fd)
        fd = -1
        os.replace(lock, path)
        renamed = True
        return SwapOutcome.SWAPPED
    except OSError:
        return SwapOutcome.UNSUPPORTED
    finally:
        if fd >= 0:
            os.close(fd)
        if not renamed:
            try:
                os.unlink(lock)
            except OSError:
                pass


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


__all__ = ["SwapOutcome", "swap_loose_ref"]
