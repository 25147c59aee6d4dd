"""What an interrupted upkeep, repack, object write, capture or session left behind, named and
removed (docs/design.md#disk-upkeep).

Why it exists: ``kill -9`` may land anywhere in rewind's disk work. Whatever it leaves must be
something ``rewind doctor`` names and ``rewind sweep`` removes (issue 26): an upkeep's own work
directory and a pack it moved without its index; git's and libgit2's temporary files in
``objects/`` (``tmp_obj_*``, ``tmp_object_git2_*``, ``objects/pack/tmp_*``); git's
``index.lock`` on rewind's private capture index; our lock on ``refs/pi-rewind/store`` and the
swap's temporaries beside it; dead, unreadable and stray files in the session registry. The disk
upkeep itself (:mod:`ledger.git.store.upkeep`) calls :func:`clean_leftovers` first.

The rule (issue 32): a lock or temporary file is removed only when its owner is provably gone —
an ``flock`` its owner held for the file's whole life is free, or an identity recorded with it
(pid, process start time, boot id) is checked against the process table — never by age alone: a
stopped process (``SIGSTOP``, a suspended laptop, a stalled disk) holds its files as long as it
is stopped. Each removal here, against that rule:

- an upkeep directory: when nobody holds the ``flock`` on its ``owner.lock``. Its owner makes
  the directory and takes the lock at once; a removal in the microseconds between makes that
  upkeep fail before it wrote anything (its files go into the removed directory), never lose one.
- the pack such a directory's ``move.json`` names, when its ``.idx`` is absent: only under the
  upkeep lock (:mod:`ledger.git.store.upkeeplock`, not waited for; busy: the directory and its
  pack are left to the running upkeep), with the ``.idx`` checked absent again right before the
  unlink. Pack names repeat for the same content: without the lock, a live upkeep could install
  a complete pack of that very name (and delete the loose copies) between the check and the
  unlink (issue 32, review finding 1). Every upkeep installs packs under that lock.
- a restore's ignore-check scratch tree (``ignore-scratch-<pid>-<hex>/`` in the git dir's
  private dir) and its ``<name>.lock``: when that lock is missing or its ``flock`` free; the
  owner holds the lock before it makes the directory and removes it after
  (:mod:`ledger.git.owned`).
- a ``*.tmp`` file directly in a private dir: the temporary of a private file rewritten whole
  (the dedup candidate ``last-snapshot.json``, the capture state, the floor, the usage cache,
  the watcher's status, the kept tree diffs: :func:`ledger.git.owned.replace_private_file`) or
  of the authorship index (``authorship.idx.<pid>.<ns>.tmp``): when its own ``flock``, which
  its writer takes on creation and holds through its rename, is free
  (:func:`~ledger.git.liveness.remove_if_unlocked`). Before, the dedup candidate's temporary
  carried only a pid, and a ``kill -9`` during a capture's last millisecond left one that
  nothing named.
- the store ref's lock: only when it carries our identity line and its owner is gone
  (:func:`ledger.git.store.refswap.remove_if_gone`, under an ``flock`` of its directory and by
  name only if the name is still the file judged). A lock without our identity (git's own
  ``update-ref``, ``pack-refs``, or unknown) is never removed, however old: ``rewind doctor``
  names it with a remedy.
- the swap's temporaries (``store.<hex>.lock``): when their ``flock`` is free; removing one whose
  owner had not yet locked it only makes that swap retry (it links or renames by name and checks).
- git's ``index.lock`` on our private capture index: only under the capture lock (taking that
  lock is what removes it, never from under a running capture). Git takes it only inside a
  capture, which holds the capture lock (an ``flock``) for the whole time.
- git's temporary files carry no owner: in a user's repository they are only named (``git gc``
  removes them after ``gc.pruneExpire``, git's own age rule for its own files); in a shadow (ours
  alone) they are removed once older than :data:`PRUNE_GRACE_S`, git's rule with a shorter
  expiry. Git writes a temporary and renames it into place in one call: a writer whose
  temporary is gone fails loudly (the capture errors and is retried), it never loses data
  silently.
- the session registry (:func:`ledger.presence.registry_leftovers`): entries and lock files whose
  ``flock`` is free or whose owner's identity is gone, unreadable entries whose lock is free, and
  files that are none of ours.

Read-only apart from those removals; nothing outside the git dir is looked at.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import GitError
from ledger.git.capture.index import VERIFY_DIR, PrivateIndex, VerifyIndex
from ledger.git.liveness import lock_held, pid_exists, remove_if_unlocked
from ledger.git.owned import private_temporaries, remove_scratch, scratch_leftovers
from ledger.git.private import private_dir
from ledger.git.repo import GitRepo
from ledger.git.store.chain import STORE_REF
from ledger.git.store.refswap import (
    ref_lock,
    remove_if_gone,
    remove_temporary,
    temporaries,
    temporary_free,
)
from ledger.git.store.upkeeplock import try_upkeep_lock

PRUNE_GRACE_S = 3600
"""Unreachable objects, old packs and temporary files younger than this are never removed."""
UPKEEP_PREFIX = "upkeep-"
OWNER_FILE = "owner.lock"
"""In an upkeep's work directory: the file its owner holds an ``flock`` on."""
MOVE_FILE = "move.json"
"""In an upkeep's work directory: the pack it is moving into ``objects/pack``."""
FLOOR_FILE = "loose-floor"
"""In ``<common-dir>/pi-rewind``: the loose objects the last upkeep left that are not ours
(:mod:`ledger.git.store.loose`); written through ``loose-floor.<hex>.tmp``."""
JOURNAL_DIR = "journal"
"""``ledger.git.restore.journal.JOURNAL_DIR_NAME`` (the restore layer sits above this one)."""
_UPKEEP_DIR = "interrupted rewind upkeep"
_MOVED_PACK = "pack without index (interrupted rewind upkeep)"
_SCRATCH = "scratch work tree of an interrupted restore"
_FLOOR_TMP = "temporary of an interrupted rewind write"
_RESTORE_INDEX = "temporary index of an interrupted restore"
_SEED_COPY = "verifier's copy of the capture index, left by a killed process"
_RESTORE_INDEX_NAME = re.compile(r"restore-[0-9]+-[0-9a-f]+\.index(?:\.lock)?")
"""What :meth:`ledger.git.restore.apply.Executor._checkout` writes (and git's lock on it)."""
_SEED_NAME = re.compile(r"seed-(?:index|state)\.([0-9]+)\.[0-9]+")
"""What :meth:`ledger.git.capture.index.VerifyIndex.copy_of` writes, named by pid and thread."""


def objects_dir(repo: GitRepo) -> Path:
    return repo.common_dir / "objects"


def is_shadow(repo: GitRepo) -> bool:
    from ledger.git.shadow.layout import ShadowRepo

    return isinstance(repo, ShadowRepo)


def is_hex(name: str) -> bool:
    return len(name) in (38, 62) and all(c in "0123456789abcdef" for c in name)


def disk_usage(path: Path) -> int:
    """Bytes allocated under ``path`` (no symlink followed)."""
    total = 0
    for directory, _subdirs, files in os.walk(path, followlinks=False):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
    return total


@dataclass(frozen=True)
class Leftover:
    path: Path
    what: str
    bytes: int
    age_s: float
    removable: bool
    """``rewind sweep`` removes it: ours and its owner is gone, or a git temporary file in a
    shadow (ours alone) older than :data:`PRUNE_GRACE_S`."""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "what": self.what,
            "bytes": self.bytes,
            "ageSeconds": round(self.age_s),
            "removable": self.removable,
        }


def _lock_free(path: Path) -> bool:
    """Nobody holds an ``flock`` on ``path`` (a probe on a new descriptor; nothing is created:
    a missing file is free). A doubt (no ``flock`` here, no permission) counts as held: nothing
    is removed on a doubt."""
    return lock_held(path) is False


def _owner_gone(directory: Path) -> bool:
    """Whether no live process holds the ``flock`` of an upkeep directory (none yet: it was
    killed before it took the lock, the directory was just made)."""
    return _lock_free(directory / OWNER_FILE)


def _age(path: Path, now: float) -> tuple[int, float]:
    try:
        st = os.lstat(path)
    except OSError:
        return 0, 0.0
    size = disk_usage(path) if path.is_dir() else st.st_blocks * 512
    return size, max(0.0, now - st.st_mtime)


def _moved_pack(directory: Path, objects: Path) -> Path | None:
    """The pack an interrupted upkeep moved into ``objects/pack`` without its index, if any."""
    try:
        name = json.loads((directory / MOVE_FILE).read_text())["pack"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(name, str) or not is_hex(name[2:]):
        return None
    pack = objects / "pack" / f"pack-{name}.pack"
    if pack.exists() and not pack.with_suffix(".idx").exists():
        return pack
    return None


def find_leftovers(repo: GitRepo, *, now: float | None = None) -> list[Leftover]:
    """What an interrupted upkeep, repack or object write left: ours (removable once the owner
    is gone) and git's temporary files (removable in a shadow once older than the grace; in a
    user's repository only named: ``git gc`` removes them after ``gc.pruneExpire``)."""
    now = time.time() if now is None else now
    objects = objects_dir(repo)
    found: list[Leftover] = []
    home = private_dir(repo.common_dir)
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(home)):
            directory = home / name
            if not name.startswith(UPKEEP_PREFIX) or not directory.is_dir():
                continue
            if not _owner_gone(directory):
                continue
            size, age = _age(directory, now)
            found.append(Leftover(directory, _UPKEEP_DIR, size, age, True))
            pack = _moved_pack(directory, objects)
            if pack is not None:
                size, age = _age(pack, now)
                found.append(Leftover(pack, _MOVED_PACK, size, age, True))
    for path in scratch_leftovers(private_dir(repo.git_dir)):
        size, age = _age(path, now)
        found.append(Leftover(path, _SCRATCH, size, age, True))
    for directory in _private_dirs(repo):
        # Free flock only (ledger/git/owned.py); without flock here (None) never judged.
        for path in private_temporaries(directory):
            if directory.name == JOURNAL_DIR and not _journal_gone(path):
                continue
            size, age = _age(path, now)
            found.append(Leftover(path, _FLOOR_TMP, size, age, True))
    found += _restore_temporaries(repo, now)
    for index in _private_indexes(repo):
        lock = index.dir / "index.lock"
        if lock.exists():
            size, age = _age(lock, now)
            free = _capture_lock_free(index)
            found.append(Leftover(lock, "git's lock on rewind's capture index", size, age, free))
    found += _store_temporaries(repo, now)
    found += _registry_leftovers(repo)
    shadow = is_shadow(repo)
    for path in _git_temporaries(objects):
        size, age = _age(path, now)
        found.append(
            Leftover(path, "git temporary file", size, age, shadow and age >= PRUNE_GRACE_S)
        )
    return found


def _private_dirs(repo: GitRepo) -> list[Path]:
    """The private dirs whose ``*.tmp`` files are ours: the work tree's, the common dir's (the
    same in a main work tree) and the verifier's."""
    dirs = [private_dir(repo.git_dir), private_dir(repo.common_dir)]
    dirs += [dirs[0] / VERIFY_DIR, dirs[0] / JOURNAL_DIR]  # a restore journal's temporaries
    shadow = getattr(repo, "shadow", None)
    if shadow is not None:
        # A shadow is ours alone: its HEAD, its info/exclude and its shadow.json are rewritten
        # through the same temporaries (ledger/git/shadow/layout.py).
        dirs += [repo.git_dir, repo.git_dir / "info", shadow.home]
    return list(dict.fromkeys(dirs))


def _restore_temporaries(repo: GitRepo, now: float) -> list[Leftover]:
    """A restore's temporary index (and git's lock on it) and the verifier's seed copies, which
    a kill leaves behind. A restore writes its index only under the capture lock
    (:func:`ledger.git.restore.run.restore_commit`), so one found while that lock is free is
    dead, and is removed under that lock (:func:`clean_leftovers`). A seed copy is removable
    once no process has its pid (never by age: a stopped verifier may still install it; a
    reused pid only keeps it until that process ends). Losing one would cost nothing
    but a hashing scan (``install`` resets on a missing copy)."""
    main, verify = _private_indexes(repo)
    found = []
    names = _names(main.dir)
    if any(_RESTORE_INDEX_NAME.fullmatch(name) for name in names):
        free = _capture_lock_free(main)
        for name in names:
            if _RESTORE_INDEX_NAME.fullmatch(name):
                size, age = _age(main.dir / name, now)
                found.append(Leftover(main.dir / name, _RESTORE_INDEX, size, age, free))
    for name in _names(verify.dir):
        seed = _SEED_NAME.fullmatch(name)
        if seed is None:
            continue
        size, age = _age(verify.dir / name, now)
        gone = pid_exists(int(seed.group(1))) is False
        found.append(Leftover(verify.dir / name, _SEED_COPY, size, age, gone))
    return found


def _names(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def _journal_gone(temporary: Path) -> bool:
    """A restore journal's temporary (``.<stem>.json.<hex>.tmp``) is also judged by its
    journal's lock (``<stem>.lock``), which its owner holds for the whole restore, in this
    version and the older ones whose temporaries held no lock of their own."""
    stem = temporary.name.lstrip(".").partition(".json.")[0]
    return lock_held(temporary.parent / f"{stem}.lock") is False


def _git_temporaries(objects: Path) -> Iterator[Path]:
    """``tmp_*`` and ``.tmp-*`` in ``objects/pack`` (an interrupted pack-objects, index-pack or
    repack) and ``tmp_*`` in ``objects/`` and its fan-out directories: git's ``tmp_obj_*`` and
    libgit2's ``tmp_object_git2_*`` (a snapshot commit or keepalive written through pygit2 when
    the process was killed); ``git prune`` removes the same names."""
    pack_dir = objects / "pack"
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(pack_dir)):
            if name.startswith(("tmp_", ".tmp-")):
                yield pack_dir / name
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(objects)):
            if name.startswith("tmp_"):
                yield objects / name
            elif len(name) == 2 and all(c in "0123456789abcdef" for c in name):
                with contextlib.suppress(OSError):
                    for inner in sorted(os.listdir(objects / name)):
                        if inner.startswith("tmp_"):
                            yield objects / name / inner


def _private_indexes(repo: GitRepo) -> list[PrivateIndex]:
    return [PrivateIndex(repo.git_dir), VerifyIndex(repo.git_dir)]


def _capture_lock_free(index: PrivateIndex) -> bool:
    """No capture holds ``index``."""
    return _lock_free(index.lock_path)


def _store_lock(repo: GitRepo, now: float) -> Leftover | None:
    """Our lock on ``refs/pi-rewind/store`` when its owner is provably gone (one left by a killed
    swap makes every capture wait until it goes). ``rewind doctor`` names any lock on the ref
    apart from this (:meth:`ledger.git.store.chain.Store.lock_state`)."""
    lock = ref_lock(repo.common_dir, STORE_REF, now=now)
    if lock is None or lock.state != "gone":
        return None
    size, _ = _age(lock.path, now)
    return Leftover(
        lock.path, f"lock on the rewind store ref, {lock.describe()}", size, lock.age_s, True
    )


_STORE_TEMPORARY = "temporary of a rewind store swap"
REGISTRY_WHAT = "session registry"


def _registry_leftovers(repo: GitRepo) -> list[Leftover]:
    """The session registry's dead, unreadable and stray files (:mod:`ledger.presence`, which
    judges them; imported here only when asked, it sits above the git layer)."""
    from ledger.presence import registry_leftovers

    found = []
    for path, what, removable in registry_leftovers(repo.git_dir):
        size, age = _age(path, time.time())
        found.append(Leftover(path, f"{REGISTRY_WHAT}: {what}", size, age, removable))
    return found


def _store_temporaries(repo: GitRepo, now: float) -> list[Leftover]:
    """What a swap killed mid-way left beside the store ref (:mod:`ledger.git.store.refswap`)."""
    found = []
    for path in temporaries(repo.common_dir, STORE_REF):
        size, age = _age(path, now)
        found.append(Leftover(path, _STORE_TEMPORARY, size, age, temporary_free(path)))
    return found


def _clean_upkeep_leftovers(
    repo: GitRepo, items: list[Leftover], lock_held: bool
) -> list[Leftover]:
    """Remove what interrupted upkeeps left, under the upkeep lock (issue 32, review finding 1):
    ``find_leftovers`` judged "a pack without index" a moment ago, and a live upkeep may since
    have installed a pack of the *same name* (pack names repeat for the same content) and
    deleted the loose copies; unlinking it then would lose those objects. Every upkeep installs
    packs only under this lock, so with it held the check made right before the unlink (the
    ``.idx`` still absent) cannot go stale. Busy: nothing here is removed (a directory is kept
    with its pack, so that its ``move.json`` still names the pack later)."""
    fd = None if lock_held else try_upkeep_lock(repo)
    if not lock_held and fd is None:
        return []
    removed: list[Leftover] = []
    try:
        # Packs before directories: the directory's move.json is what names the pack.
        for item in sorted(items, key=lambda i: i.what != _MOVED_PACK):
            if item.what == _MOVED_PACK and item.path.with_suffix(".idx").exists():
                continue  # an upkeep completed this pack since: it is no leftover
            try:
                if item.what == _UPKEEP_DIR:
                    if not _owner_gone(item.path):
                        continue
                    shutil.rmtree(item.path)
                else:
                    os.unlink(item.path)
            except FileNotFoundError:
                pass
            except OSError:
                if item.what == _MOVED_PACK:
                    # Its directory must stay to name it; skip the rest (next sweep retries).
                    return removed
                continue
            removed.append(item)
    finally:
        if fd is not None:
            os.close(fd)
    return removed


def clean_leftovers(
    repo: GitRepo, *, now: float | None = None, upkeep_lock_held: bool = False
) -> list[Leftover]:
    """Remove the removable leftovers (see :func:`find_leftovers`) and our lock on the store ref
    when its owner is gone; returns what was removed. ``upkeep_lock_held``: the caller holds
    the upkeep lock (:mod:`ledger.git.store.upkeeplock`); otherwise it is taken here, without
    waiting, for an interrupted upkeep's directory and pack, which are skipped when it is busy
    (the running upkeep removes them itself)."""
    from ledger.presence import clean_registry

    removed = []
    stale = _store_lock(repo, time.time() if now is None else now)
    found = [*find_leftovers(repo, now=now), *([stale] if stale else [])]
    upkeep_items = [i for i in found if i.removable and i.what in (_MOVED_PACK, _UPKEEP_DIR)]
    if upkeep_items:
        removed += _clean_upkeep_leftovers(repo, upkeep_items, upkeep_lock_held)
    for item in found:
        if not item.removable or item in upkeep_items:
            continue
        if item.what == _SCRATCH:
            if remove_scratch(item.path):
                removed.append(item)
            continue
        if item.what == _FLOOR_TMP:
            if remove_if_unlocked(item.path):
                removed.append(item)
            continue
        if item.what == _RESTORE_INDEX:
            # Under the capture lock, which every restore holds while its index exists.
            try:
                with _private_indexes(repo)[0].locked(timeout_s=0.0):
                    os.unlink(item.path)
            except FileNotFoundError:
                pass
            except (GitError, OSError):
                continue
            removed.append(item)
            continue
        if item.path.name == "index.lock" and item.path.parent.name in (
            private_dir(repo.git_dir).name,
            VERIFY_DIR,
        ):
            # Under the capture lock, which removes it: never from under a capture.
            index = next(i for i in _private_indexes(repo) if i.dir == item.path.parent)
            try:
                with index.locked(timeout_s=0.0):
                    pass
            except GitError:
                continue
            removed.append(item)
            continue
        if item is stale:
            if remove_if_gone(repo.common_dir, STORE_REF) is not None:
                removed.append(item)
            continue
        if item.what == _STORE_TEMPORARY:
            if remove_temporary(item.path):
                removed.append(item)
            continue
        if item.what.startswith(REGISTRY_WHAT):
            continue  # the registry's own cleaning below judges each again
        try:
            if item.path.is_dir() and not item.path.is_symlink():
                shutil.rmtree(item.path)
            else:
                os.unlink(item.path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        removed.append(item)
    removed += [
        Leftover(path, f"{REGISTRY_WHAT}: {what}", 0, 0.0, True)
        for path, what in clean_registry(repo.git_dir)
    ]
    return removed


__all__ = [
    "FLOOR_FILE",
    "MOVE_FILE",
    "OWNER_FILE",
    "PRUNE_GRACE_S",
    "UPKEEP_PREFIX",
    "Leftover",
    "clean_leftovers",
    "disk_usage",
    "find_leftovers",
    "is_hex",
    "is_shadow",
    "objects_dir",
]
