"""Racy entries of the private index: the one place that reasons about git's stat cache limits.

Why it exists: a kept index trusts stat data, and stat data can lie within the second git
recorded it. Git here is built without nanosecond stat comparison: it compares ctime in whole
seconds and decides "racily clean" from mtime alone (entry mtime not before the index file's
mtime, in seconds). A same-size rewrite that restores the mtime, within the second in which git
recorded the entry, is therefore invisible to a kept index (docs/design.md#the-private-index).

What a capture does about it:
- At the end of every capture (:func:`guard_racy_entries`) the entries whose *recorded* ctime
  falls within the capture's own seconds (whether we hashed them or ``git status`` refreshed them)
  are found (:func:`recent_entries`), and the index file's mtime is moved back to their oldest
  mtime, so that git compares their content next time.
- Entries whose mtime is too old for that (more than :data:`RACY_BACKDATE_LIMIT_S` ago, which
  would make git compare every newer file's content) are listed in the state's ``danger``
  instead, and the next capture drops them (:func:`old_racy_entries`) so that they are hashed
  again, unless their ctime moved past the recording second since (git then sees the change).
- The real write time is kept (``index_mtime_real_ns``) and restored once nothing is racy.

Invariants: only the index file's timestamps are written. A false match in the index scan only
makes git compare more content, never less.
"""

from __future__ import annotations

import mmap
import os
import time
from pathlib import Path

from ledger.git.capture.index import IndexUnusable
from ledger.git.capture.state import CaptureState

RACY_BACKDATE_LIMIT_S = 900
"""Racy entries whose mtime is older than this are dropped and re-hashed instead of moving the
index timestamp back that far."""


def recent_entries(index_path: Path, first_s: int, last_s: int) -> list[tuple[str, int]]:
    """``(path, recorded mtime second)`` of index entries whose recorded ctime second lies in
    ``[first_s, last_s]``.

    Every entry git recorded during a capture (ours, or a refresh done by ``git status``) has a
    recorded ctime no later than the recording second; those within the capture's own seconds
    are the racy ones. Instead of parsing every entry, look for the 4-byte big-endian seconds
    values where an entry can start (v2/v3 entries begin with ctime seconds) and check that a
    plausible entry follows. A false match only makes git compare more content, never less:
    it can add a path or lower the chosen timestamp, not hide a real entry.
    """
    # Mapped, not read: at 100k files the index is ~10 MB, and a copy of it cost ~5 ms of every
    # capture's end (a pi -p run's pre-prompt capture is on the run's path). We hold the
    # capture lock: nobody replaces or writes the file meanwhile.
    with open(index_path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size < 12:
            raise ValueError(f"{index_path}: not an index file")
        with mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ) as data:
            return _recent_in(data, index_path, first_s, last_s)


def _recent_in(
    data: mmap.mmap, index_path: Path, first_s: int, last_s: int
) -> list[tuple[str, int]]:
    if data[:4] != b"DIRC":
        raise ValueError(f"{index_path}: not an index file")
    version = int.from_bytes(data[4:8], "big")
    if version not in (2, 3):
        raise ValueError(f"{index_path}: index version {version}, expected 2")
    found: dict[str, int] = {}
    for second in range(first_s, last_s + 1):
        needle = (second & 0xFFFFFFFF).to_bytes(4, "big")
        pos = data.find(needle, 12)
        while pos >= 0:
            path = _entry_path_at(data, pos)
            if path is not None:
                mtime = int.from_bytes(data[pos + 8 : pos + 12], "big")
                found[path] = min(mtime, found.get(path, mtime))
            pos = data.find(needle, pos + 1)
    return sorted(found.items())


def _entry_path_at(data: mmap.mmap, pos: int) -> str | None:
    flags_at = pos + 60
    if flags_at + 2 > len(data):
        return None
    flags = int.from_bytes(data[flags_at : flags_at + 2], "big")
    name_at = flags_at + 2 + (2 if flags & 0x4000 else 0)
    end = data.find(b"\0", name_at)
    if end < 0:
        return None
    length = end - name_at
    if length == 0 or (
        length != (flags & 0x0FFF) and not (flags & 0x0FFF == 0x0FFF and length >= 0x0FFF)
    ):
        return None
    mode = int.from_bytes(data[pos + 24 : pos + 28], "big")
    if mode >> 12 not in (0b1000, 0b1010):  # regular file, symlink (gitlinks compare HEAD)
        return None
    return os.fsdecode(data[name_at:end])


def old_racy_entries(root: str, state: CaptureState) -> list[str]:
    """Racy entries with old mtimes, listed by the previous capture: to drop so that they are
    hashed again, unless their ctime moved past the recording second since."""
    out = []
    for rel in state.danger:
        try:
            st = os.lstat(os.path.join(root, rel))
        except OSError:
            continue
        if int(st.st_ctime) <= state.danger_until:
            out.append(rel)
    return out


def guard_racy_entries(index_path: Path, state: CaptureState, start_s: int) -> None:
    """Keep entries recorded since ``start_s`` under git's racy check: move the index timestamp
    back to their oldest mtime, or, for entries whose mtime is too old for that, list them in
    ``state.danger`` for the next capture to drop. Raises :class:`IndexUnusable`."""
    end_s = int(time.time())
    try:
        st = os.stat(index_path)
    except FileNotFoundError:  # nothing was ever written: nothing recorded
        state.danger = []
        return
    except OSError as exc:
        raise IndexUnusable(str(exc)) from exc
    try:
        if st.st_mtime_ns == state.index_mtime_set_ns and state.index_mtime_set_ns:
            # Nothing wrote the index in this capture, so nothing was recorded: the racy
            # entries and the timestamp chosen by the previous capture still hold.
            return
        racy = recent_entries(index_path, start_s, end_s)
    except (ValueError, OSError) as exc:
        raise IndexUnusable(str(exc)) from exc
    # A timestamp we did not set means git wrote the index since: that write is the real
    # one, which the timestamp may be restored to when nothing is racy.
    if st.st_mtime_ns != state.index_mtime_set_ns:
        state.index_mtime_real_ns = st.st_mtime_ns
    floor = end_s - RACY_BACKDATE_LIMIT_S
    recent = [m for _, m in racy if m >= floor]
    state.danger = [p for p, m in racy if m < floor]
    state.danger_until = end_s
    target_ns = state.index_mtime_real_ns
    if recent:
        # git compares whole seconds: an entry is racy when its mtime second is not before
        # the index's.
        target_ns = min(target_ns, max(1, min(recent)) * 1_000_000_000)
    if target_ns != st.st_mtime_ns:
        os.utime(index_path, ns=(st.st_atime_ns, target_ns))
    state.index_mtime_set_ns = target_ns


__all__ = [
    "RACY_BACKDATE_LIMIT_S",
    "guard_racy_entries",
    "old_racy_entries",
    "recent_entries",
]
