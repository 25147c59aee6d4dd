"""Counting loose objects: git's estimate, ours, and the floor (docs/design.md#disk-upkeep).

Why it exists: the disk upkeep (:mod:`ledger.git.store.upkeep`) must know, after every snapshot
append and cheaply, whether loose objects are over ``gc.auto``. These are those questions, apart
from the packing itself.

Invariants:
- Read-only but for the floor file (``<common-dir>/pi-rewind/loose-floor``, temporary file +
  rename; the temporary is ``flock``'ed by its writer, so one a kill leaves is removable); no git process; a few ``stat``/``listdir`` (all 256 fan-out directories only when
  ``gc.auto`` ≤ 256, ten at git's default).
- :func:`over_threshold` is what "due" means: the loose objects beyond the floor over ``gc.auto``
  by our count, or more new files in ``objects/17`` than git's own ``gc --auto`` allows. The
  floor never counts our own loose objects (the upkeep takes them off), so they cannot pile up
  under it; a count below the floor means the user's gc ran, and it counts as 0.
- ``gc.auto`` unset, invalid or ≤ 0 (git's "never") means 6700: it turns git's automatic gc off,
  not ours, since nothing else would ever pack our files.
"""

from __future__ import annotations

import contextlib
import os

from ledger.git.owned import replace_private_file
from ledger.git.private import make_private_dir, private_dir
from ledger.git.repo import GitRepo
from ledger.git.store.leftovers import FLOOR_FILE, is_hex, objects_dir

DEFAULT_GC_AUTO = 6700
"""git's own default for ``gc.auto``."""
SAMPLE_AT_THRESHOLD = 256
"""How many loose objects :func:`loose_count` wants to see at the threshold (±6 %)."""


def loose_estimate(repo: GitRepo) -> int:
    """Loose objects as ``git gc --auto`` estimates them: the files of ``objects/17`` × 256."""
    try:
        names = os.listdir(objects_dir(repo) / "17")
    except OSError:
        return 0
    return sum(1 for name in names if is_hex(name)) * 256


def loose_count(repo: GitRepo, threshold: int | None = None) -> int:
    """Loose objects, from enough fan-out directories (``00``, ``01``, …) to see about
    :data:`SAMPLE_AT_THRESHOLD` of them at ``threshold`` (default: :func:`gc_auto_threshold`):
    all 256, an exact count, when the threshold is at most 256. A ``listdir`` each; names of 38
    (SHA-1) or 62 (SHA-256) characters are objects, git's temporary files are not."""
    threshold = threshold if threshold is not None else gc_auto_threshold(repo)
    dirs = min(256, -(-256 * SAMPLE_AT_THRESHOLD // max(1, threshold)))
    objects = objects_dir(repo)
    seen = 0
    for n in range(dirs):
        try:
            names = os.listdir(objects / f"{n:02x}")
        except OSError:
            continue
        seen += sum(1 for name in names if len(name) in (38, 62))
    return seen if dirs == 256 else seen * 256 // dirs


def in_dir_17(repo: GitRepo) -> int:
    """The files of ``objects/17``: what git's own ``gc --auto`` counts."""
    try:
        return sum(1 for name in os.listdir(objects_dir(repo) / "17") if len(name) in (38, 62))
    except OSError:
        return 0


def loose_floor(repo: GitRepo) -> tuple[int, int]:
    """What the last upkeep left loose (see the module): ``(count, files in objects/17)``;
    ``(0, 0)`` when unknown."""
    try:
        text = (private_dir(repo.common_dir) / FLOOR_FILE).read_text("ascii")
        count, in_17 = (int(part) for part in text.split()[:2])
    except (OSError, ValueError):
        return 0, 0
    return max(0, count), max(0, in_17)


def save_floor(repo: GitRepo, count: int, in_17: int) -> None:
    """Write the floor through ``loose-floor.<hex>.tmp``, a temporary that is its own lock
    (created ``O_EXCL`` and ``flock``'ed at once, :mod:`ledger.git.owned`): one a kill leaves is
    removed by the leftovers sweep once its ``flock`` is free. A sweep that removed it before we
    locked it only makes the rename fail: the floor is saved by the next upkeep."""
    with contextlib.suppress(OSError):
        home = make_private_dir(repo.common_dir)
        text = f"{max(0, count)} {max(0, in_17)}\n"
        replace_private_file(home / FLOOR_FILE, text.encode("ascii"))


def over_threshold(repo: GitRepo) -> bool:
    """Whether the loose objects beyond the floor exceed ``gc.auto``, by our count or by git's
    own estimate (see the module); the floor file is read only when one of them alone does."""
    threshold = gc_auto_threshold(repo)
    count = loose_count(repo, threshold)
    in_17 = in_dir_17(repo)
    per_dir = -(-threshold // 256)  # git's own limit for objects/17
    if count <= threshold and in_17 <= per_dir:
        return False
    floor, floor_17 = loose_floor(repo)
    # Below the floor: the user's gc (or ours) packed what the floor counted.
    floor = floor if floor <= count else 0
    floor_17 = floor_17 if floor_17 <= in_17 else 0
    return count - floor > threshold or in_17 - floor_17 > per_dir


def gc_auto_threshold(repo: GitRepo) -> int:
    """The user's ``gc.auto``; its default (6700) when unset, invalid or ≤ 0."""
    try:
        value = int(repo.pygit2.config.get_int("gc.auto"))
    except Exception:  # missing (KeyError), not a number, an unreadable config: git's default
        return DEFAULT_GC_AUTO
    return value if value > 0 else DEFAULT_GC_AUTO


__all__ = [
    "DEFAULT_GC_AUTO",
    "FLOOR_FILE",
    "gc_auto_threshold",
    "in_dir_17",
    "loose_count",
    "loose_estimate",
    "loose_floor",
    "over_threshold",
    "save_floor",
]
