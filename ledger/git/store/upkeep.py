"""Giving the disk space back: our loose objects packed, a shadow's dropped snapshots pruned, and
nothing of ours ever left half-written (docs/design.md#disk-upkeep).

Why it exists: every capture writes loose objects, and a retention sweep only makes snapshots
unreachable. In a user's repository git's automatic gc (``gc.auto``) eventually packs and prunes
them, but a user who rarely runs a command that triggers it (or has ``gc.auto=0``) would collect
our loose files forever; in a shadow repository (docs/shadow.md) no git command of the user ever
runs, so without this module nothing would ever be reclaimed. Other agents' checkpoint stores
grew to hundreds of GB this way, and through temporary packs a killed ``git repack`` left behind.

Invariants:
- **When it runs**: after every snapshot appended to the store, whoever appended it (the CLI,
  the library, the bridge; retention on or off), :func:`ledger.git.store.autoupkeep.after_append`
  asks :func:`upkeep_due` (a few ``listdir``) and, when due, starts it in a detached process;
  also after a sweep (the scheduler's thread, ``rewind sweep``).
- **Due** (a user's repository; :mod:`ledger.git.store.loose` counts): the loose objects beyond
  the *floor* exceed ``gc.auto`` (6700 when unset or ≤ 0: ``gc.auto=0`` turns git's automatic
  gc off, not ours, since nothing else would ever pack our files), counted exactly when
  ``gc.auto`` ≤ 256 and from a sample of fan-out directories above; or git's own estimate
  (``objects/17``) grew past ``gc.auto`` since the last upkeep. The floor is the user's own loose
  objects (git gc's business), so that thousands of them do not make every capture start a walk.
- **A user's repository**: never ``git gc``/``repack``/``prune``; no pack, ref, reflog or index of
  the user's is read for writing or touched. **Our** loose objects — reachable from
  ``refs/pi-rewind/store`` and from no other ref — are written into one new pack, and then
  exactly those loose files deleted (each is in the pack by then).
- **A shadow repository** (ours alone): every object its refs, HEAD and the private capture index
  reach goes into one new pack; older packs are deleted, loose copies of packed objects deleted,
  and unreachable loose objects older than :data:`PRUNE_GRACE_S` pruned.
- One upkeep at a time per repository: each holds an ``flock`` on
  ``<common-dir>/pi-rewind/upkeep.flock`` (:func:`upkeep_lock`; busy after a short wait: skipped,
  the next trigger retries). A shadow's repack also holds the private index's capture lock (it
  deletes packs and prunes). Packing ours in a user's repository does not: it deletes only loose
  copies of objects already in the pack it installed, which no reader can miss (git and libgit2
  look in the packs again on a miss), so a capture never waits for it. Never on the capture
  path. A pass is not *started* while a restore journal is open (running or interrupted);
  one started a moment before a restore opens its journal goes on beside it (the detached
  upkeep may be started by the restore's own undo snapshot). That is harmless: in a user's
  repository it deletes only loose copies of objects already in the pack it installed, and in
  a shadow it holds the capture lock, which a restore takes too.
- Nothing is written into ``objects/`` until it is complete: ``pack-objects --stdout`` and
  ``index-pack -o`` write into our own directory ``<common-dir>/pi-rewind/upkeep-<pid>-<hex>/``,
  whose owner holds an ``flock`` on it. The pack moves in first and its ``.idx`` last (git sees a
  pack only through its index), both fsync'd; loose copies are deleted only after that. A killed
  upkeep leaves only its directory and perhaps a ``.pack`` without ``.idx`` that the directory's
  ``move.json`` names: :mod:`ledger.git.store.leftovers` names them and removes them
  once the owner's ``flock`` is free (the kernel releases it when the owner dies).
- Why a grace of an hour and not ``--expire=now``: the capture lock covers the capture, but the
  snapshot commit and its keepalive are written after it is released (``commit_snapshot``,
  ``Store.append``), and other processes (another sweep, an import) write objects they reference a
  moment later. An object unreachable for that moment must survive; one written an hour ago and
  still unreachable is garbage. Old packs younger than the grace are kept for the same reason.
  Dropped snapshots are old, so a sweep's drop is reclaimed by the very next upkeep.
- Residual race (as in ``git gc``, with a far shorter window): a concurrent sweep that re-adds a
  snapshot another sweep has just dropped, while this runs, may find it gone; its rewrite then
  fails (a warning) or ``rewind doctor`` names the missing snapshot.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import GitError
from ledger.git.capture.index import PrivateIndex
from ledger.git.private import make_private_dir, private_dir
from ledger.git.repo import GitRepo
from ledger.git.runner import GitRunner
from ledger.git.store.chain import STORE_REF
from ledger.git.store.leftovers import (
    MOVE_FILE,
    OWNER_FILE,
    PRUNE_GRACE_S,
    UPKEEP_PREFIX,
    clean_leftovers,
    disk_usage,
    is_hex,
    is_shadow,
    objects_dir,
)
from ledger.git.store.loose import (
    DEFAULT_GC_AUTO,
    gc_auto_threshold,
    in_dir_17,
    loose_count,
    loose_estimate,
    loose_floor,
    over_threshold,
    save_floor,
)
from ledger.git.store.upkeeplock import (
    LOCK_FILE,
    LOCK_TIMEOUT_S,
    UpkeepBusy,
    try_upkeep_lock,
    upkeep_lock,
    upkeep_running,
)

PENDING_FILE = "upkeep-pending"
"""In a shadow's private dir: a sweep dropped snapshots, repack at the next opportunity."""

Stop = Callable[[], bool]


@dataclass
class UpkeepReport:
    action: str = "none"
    """``none``, ``packed-ours`` (a user's repository) or ``repacked-shadow``."""
    skipped: str | None = None
    """Why nothing was done when something may have been due (busy, a restore, failure)."""
    loose_estimate: int = 0
    threshold: int = DEFAULT_GC_AUTO
    packed_objects: int = 0
    removed_loose: int = 0
    removed_packs: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    """Size of ``objects/`` before and after (a shadow only; 0 otherwise)."""
    leftovers_removed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "skipped": self.skipped,
            "looseEstimate": self.loose_estimate,
            "gcAuto": self.threshold,
            "packedObjects": self.packed_objects,
            "removedLoose": self.removed_loose,
            "removedPacks": self.removed_packs,
            "bytesBefore": self.bytes_before,
            "bytesAfter": self.bytes_after,
            "leftoversRemoved": self.leftovers_removed,
        }


# --- measuring ---------------------------------------------------------------------------------


def our_loose_objects(repo: GitRepo) -> list[tuple[str, str]]:
    """``(oid, path name)`` of the objects only the store reaches that are stored loose; read as
    a stream (one line per object, never the whole listing in memory twice)."""
    objects = objects_dir(repo)
    runner = GitRunner(repo.root, repo.git_dir)
    args = ["rev-list", "--objects", STORE_REF, "--not", f"--exclude={STORE_REF}", "--all"]
    found: list[tuple[str, str]] = []
    try:
        proc = subprocess.Popen(
            runner.command(args),
            cwd=str(repo.root),
            env=runner.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        raise GitError("git rev-list --objects", str(exc)) from exc
    assert proc.stdout is not None
    with proc.stdout:
        for raw in proc.stdout:
            line = raw.rstrip(b"\n").decode("utf-8", "surrogateescape")
            oid, _, name = line.partition(" ")
            if is_hex(oid[2:]) and (objects / oid[:2] / oid[2:]).is_file():
                found.append((oid, name))
    if proc.wait() != 0:
        return []  # no store, or a broken one (doctor says so): nothing of ours to pack
    return found


# --- one upkeep at a time ---------------------------------------------------------------------


# --- the work directory ------------------------------------------------------------------------


@contextlib.contextmanager
def _work_dir(repo: GitRepo) -> Iterator[Path]:
    """``<common-dir>/pi-rewind/upkeep-<pid>-<hex>/``, flock'ed by us while we use it, removed
    at the end (a kill leaves it for :func:`clean_leftovers`)."""
    home = make_private_dir(repo.common_dir)
    directory = home / f"{UPKEEP_PREFIX}{os.getpid()}-{os.urandom(4).hex()}"
    directory.mkdir(mode=0o700)
    fd = os.open(directory / OWNER_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        os.close(fd)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _build_pack(
    repo: GitRepo, work: Path, args: list[str], stdin: bytes | None, index: Path | None = None
) -> str | None:
    """``git pack-objects --stdout`` into ``work/tmp.pack``, ``git index-pack -o work/tmp.idx``;
    the pack's name (hash), or None when there was nothing to pack."""
    runner = GitRunner(repo.root, repo.git_dir)
    pack, idx = work / "tmp.pack", work / "tmp.idx"
    with open(pack, "wb") as out:
        proc = subprocess.run(
            runner.command(["pack-objects", "--stdout", "-q", "--delta-base-offset", *args]),
            cwd=str(repo.root),
            env=runner.env(index=index),
            input=stdin or b"",
            stdout=out,
            stderr=subprocess.PIPE,
            check=False,
        )
    if proc.returncode != 0:
        raise GitError("git pack-objects", proc.stderr.decode("utf-8", "replace").strip())
    if pack.stat().st_size <= 32:  # a header and a trailer: no object
        return None
    result = runner.run(
        ["index-pack", "--no-rev-index", "-o", str(idx), str(pack)],
        operation="git index-pack",
    )
    name = result.stdout.decode().split()[-1] if result.stdout.strip() else ""
    if not is_hex(name[2:]):
        raise GitError("git index-pack", f"unexpected output {result.stdout[:80]!r}")
    return name


def _install_pack(repo: GitRepo, work: Path, name: str) -> bool:
    """Move ``work/tmp.pack`` and ``tmp.idx`` into ``objects/pack`` as ``pack-<name>``: the pack
    first, the index last (git sees a pack through its index), each fsync'd before and the
    directory after. False when that pack was already there (same name, same content)."""
    pack_dir = objects_dir(repo) / "pack"
    pack_dir.mkdir(exist_ok=True)
    final_pack, final_idx = pack_dir / f"pack-{name}.pack", pack_dir / f"pack-{name}.idx"
    if final_pack.exists() and final_idx.exists():
        return False
    move = work / MOVE_FILE
    move.write_text(json.dumps({"pack": name}))
    _fsync(move)
    for tmp in (work / "tmp.pack", work / "tmp.idx"):
        os.chmod(tmp, 0o444)
        _fsync(tmp)
    os.rename(work / "tmp.pack", final_pack)
    os.rename(work / "tmp.idx", final_idx)
    _fsync(pack_dir)
    return True


# --- the two kinds of upkeep -------------------------------------------------------------------


def pack_ours(repo: GitRepo, report: UpkeepReport, stop: Stop) -> list[str]:
    """A user's repository: our loose objects into one pack of ours, then those loose files
    deleted. Call with the upkeep lock held (the capture lock is not needed: see the module).
    Returns the ids of our loose objects the walk found (packed unless stopped)."""
    loose = our_loose_objects(repo)
    found = [oid for oid, _name in loose]
    if not loose or stop():
        return found
    listing = "".join(f"{oid} {name}\n" for oid, name in loose).encode("utf-8", "surrogateescape")
    with _work_dir(repo) as work:
        name = _build_pack(repo, work, [], listing)
        if name is None or stop():
            return found
        _install_pack(repo, work, name)
    # Defence in depth (issue 32, review finding 1): a loose copy goes only while the pack that
    # holds it is installed, both its files there; anything else removed it meanwhile, and the
    # loose copies are then the only ones left.
    pack_dir = objects_dir(repo) / "pack"
    if not all((pack_dir / f"pack-{name}{ext}").is_file() for ext in (".pack", ".idx")):
        report.skipped = f"pack-{name} vanished after it was installed; no loose object deleted"
        return found
    report.action = "packed-ours"
    report.packed_objects = len(loose)
    objects = objects_dir(repo)
    for oid, _name in loose:  # each is in the pack now: only its loose copy goes
        with contextlib.suppress(FileNotFoundError):
            os.unlink(objects / oid[:2] / oid[2:])
            report.removed_loose += 1
    return found


def repack_shadow(repo: GitRepo, report: UpkeepReport, stop: Stop) -> None:
    """A shadow repository: everything reachable (refs, HEAD, the private capture index) into
    one pack; old packs, packed loose copies and old unreachable loose objects removed. Call
    with the capture lock held."""
    runner = GitRunner(repo.root, repo.git_dir)
    pack_dir = objects_dir(repo) / "pack"
    index = PrivateIndex(repo.git_dir).index_path
    index_file = index if index.is_file() else None
    before = _packs(pack_dir)
    heads = _ref_state(runner)
    report.bytes_before = disk_usage(objects_dir(repo))
    with _work_dir(repo) as work:
        args = ["--all", "--reflog"] + (["--indexed-objects"] if index_file else [])
        name = _build_pack(repo, work, args, None, index=index_file)
        if stop():
            return
        if name is not None:
            _install_pack(repo, work, name)
    report.action = "repacked-shadow"
    # Refs moved meanwhile (another sweep's rewrite): what it now reaches may lie in an old pack
    # that our enumeration did not copy. Keep the old packs this time; the next upkeep retries.
    if name is not None and _ref_state(runner) == heads:
        cutoff = time.time() - PRUNE_GRACE_S
        new_ids = _pack_ids(pack_dir / f"pack-{name}.idx")
        for pack, mtime in before:
            if pack.name == f"pack-{name}.pack" or pack.with_suffix(".keep").exists():
                continue
            if mtime > cutoff:
                # Young: kept for objects written a moment ago (see the module), unless the
                # new pack holds every one of its objects (then nothing can be lost). Without
                # this, every repack within an hour of the last left a whole pack behind.
                old_ids = _pack_ids(pack.with_suffix(".idx"))
                if new_ids is None or old_ids is None or not old_ids <= new_ids:
                    continue
            for suffix in (".idx", ".bitmap", ".rev", ".mtimes", ".pack"):  # the index first
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(pack.with_suffix(suffix))
            report.removed_packs += 1
    if stop():
        return
    runner.run(["prune-packed", "-q"], operation="git prune-packed")
    runner.run(
        ["prune", f"--expire={PRUNE_GRACE_S}.seconds.ago"],
        operation="git prune",
        index=index_file,
    )
    report.bytes_after = disk_usage(objects_dir(repo))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(private_dir(repo.git_dir) / PENDING_FILE)


def _pack_ids(idx: Path) -> frozenset[bytes] | None:
    """The object ids a version-2 pack index lists (read once, bounded by the index's size);
    ``None`` for any other format or a read error: then nothing is concluded from it."""
    try:
        data = idx.read_bytes()
    except OSError:
        return None
    if len(data) < 8 + 256 * 4 or data[:8] != b"\377tOc\x00\x00\x00\x02":
        return None
    count = int.from_bytes(data[8 + 255 * 4 : 8 + 256 * 4], "big")
    start = 8 + 256 * 4
    end = start + 20 * count
    if end > len(data):
        return None
    return frozenset(data[i : i + 20] for i in range(start, end, 20))


def _packs(pack_dir: Path) -> list[tuple[Path, float]]:
    found = []
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(pack_dir)):
            if name.startswith("pack-") and name.endswith(".pack"):
                path = pack_dir / name
                with contextlib.suppress(OSError):
                    if path.with_suffix(".idx").exists():
                        found.append((path, os.lstat(path).st_mtime))
    return found


def _ref_state(runner: GitRunner) -> bytes:
    """Every ref and HEAD with its target: unchanged means no ref moved."""
    refs = runner.run(["for-each-ref", "--format=%(objectname) %(refname)"], check=False).stdout
    head = runner.run(["rev-parse", "-q", "--verify", "HEAD"], check=False).stdout
    return refs + b"HEAD " + head


def mark_pending(repo: GitRepo) -> None:
    """A sweep dropped snapshots of a shadow: repack at the next upkeep (perhaps in a later
    session, when this one only swept at shutdown)."""
    if is_shadow(repo):
        with contextlib.suppress(OSError):
            (make_private_dir(repo.git_dir) / PENDING_FILE).touch()


def upkeep_due(repo: GitRepo) -> bool:
    """Cheap (a ``stat`` and up to 256 ``listdir``, ten at git's default ``gc.auto``): whether
    :func:`run_upkeep` has work to do."""
    if is_shadow(repo) and (private_dir(repo.git_dir) / PENDING_FILE).exists():
        return True
    return over_threshold(repo)


def run_upkeep(
    repo: GitRepo,
    *,
    restore_open: Callable[[], bool],
    stop: Stop = lambda: False,
    lock_timeout_s: float = LOCK_TIMEOUT_S,
    force: bool = False,
    lock_held: bool = False,
) -> UpkeepReport:
    """Clean our leftovers, then, when due (or ``force``), pack our loose objects (a user's
    repository) or repack and prune (a shadow). Never raises for being busy: the report says
    what was skipped and why; git failures raise :class:`GitError` (nothing half-done stays).
    ``restore_open``: whether a restore journal is open (running or interrupted): then no pass
    is started (asked once, at the start; see the module for why a restore that opens its
    journal later is safe; required, so that no caller forgets it; the journal is the restore
    subsystem's, :func:`ledger.git.restore.journal.restore_open`). ``lock_held``: the caller
    holds the upkeep lock already (the detached upkeep, :mod:`ledger.git.store.autoupkeep`);
    otherwise the leftovers of interrupted upkeeps are removed only if the lock is free."""
    threshold = gc_auto_threshold(repo)
    report = UpkeepReport(loose_estimate=loose_estimate(repo), threshold=threshold)
    report.leftovers_removed = [
        str(item.path) for item in clean_leftovers(repo, upkeep_lock_held=lock_held)
    ]
    if not (force or upkeep_due(repo)):
        return report
    if restore_open():
        report.skipped = "a restore is in progress or was interrupted"
        return report
    with contextlib.ExitStack() as stack:
        try:
            if not lock_held:
                stack.enter_context(upkeep_lock(repo, lock_timeout_s))
        except UpkeepBusy:
            report.skipped = "another rewind upkeep of this repository is running"
            return report
        if is_shadow(repo):
            try:  # a repack deletes packs and prunes: never beside a capture or a restore
                stack.enter_context(PrivateIndex(repo.git_dir).locked(lock_timeout_s))
            except GitError:
                report.skipped = "a capture or restore holds the capture lock"
                return report
        # The floor (see the module) must never count our own loose objects, or they could
        # pile up under it: the count is taken before the walk, and what the walk finds of
        # ours is taken off it. Objects written in between only lower it (packing sooner).
        count, in_17 = loose_count(repo, threshold), in_dir_17(repo)
        try:
            if stop():
                report.skipped = "stopped"
            elif is_shadow(repo):
                repack_shadow(repo, report, stop)
                # Under the capture lock: what is left loose is unreachable and young.
                count, in_17 = loose_count(repo, threshold), in_dir_17(repo)
            else:
                ours = pack_ours(repo, report, stop)
                count -= len(ours)
                in_17 -= sum(1 for oid in ours if oid.startswith("17"))
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise GitError("rewind upkeep", f"no space left on the device: {exc}") from exc
            raise GitError("rewind upkeep", str(exc)) from exc
        if report.skipped is None and not stop():
            save_floor(repo, count, in_17)
    report.loose_estimate = loose_estimate(repo)
    return report


__all__ = [
    "DEFAULT_GC_AUTO",
    "LOCK_FILE",
    "LOCK_TIMEOUT_S",
    "UpkeepBusy",
    "UpkeepReport",
    "gc_auto_threshold",
    "loose_count",
    "loose_estimate",
    "loose_floor",
    "mark_pending",
    "our_loose_objects",
    "over_threshold",
    "run_upkeep",
    "try_upkeep_lock",
    "upkeep_due",
    "upkeep_lock",
    "upkeep_running",
]
