"""What the store costs on disk, for ``rewind doctor``: measured exactly, once per store state.

Why it exists: the doctor reports the bytes the store keeps alive, the bytes nothing else keeps
alive, and how many of those objects are loose (docs/design.md#disk-upkeep). Each figure needs
a walk of every object the store reaches, whose cost grows with the store's history (2.3 s +
1.6 s at 5,000 snapshots of a 20,000-file tree); the doctor must answer within a second however
large the store grows. So:

- **Exact figures, cached per state.** They depend only on the store head, on every other ref and
  worktree ``HEAD`` (what "nothing else" excludes), and on where each object lives (loose or in
  which pack, which sets its size on disk). :func:`usage_key` digests exactly that: the store
  head, ``git for-each-ref``, the ``HEAD`` files, and the modification times of ``objects/pack``,
  ``objects/info`` and the 256 fan-out directories (git adds or removes a file there for every
  object written, packed or pruned). A cache file whose key equals the current one holds the
  exact figures; reading it costs a few ``stat`` calls and one ``git for-each-ref``.
- **A bounded walk on a miss.** :func:`measure` runs the walks (both at once: one for all the
  store's bytes, one listing its exclusive objects, sized by ``git cat-file --batch-check`` and
  counted against one listing of the loose directories, not one ``stat`` per object) and kills
  them at ``budget_s``. Past it, the last cached figures (an earlier state's) are returned as an
  estimate (``exact`` False: the doctor says "about" and when they were measured), or none at
  all; ``rewind doctor --exact`` (``budget_s=None``) waits for the walk and caches it.

Invariants:
- Figures are never a guess: exact for the current key, or an earlier key's exact figures
  marked as such, or absent.
- The only file written is ``<common-dir>/pi-rewind/store-usage.json`` (temporary file + rename),
  and only when the key did not change during the walk and nothing in it changed within the
  last :data:`RACY_S` seconds (a directory written twice in one clock tick keeps one mtime: git's
  racy-index rule). A missing, unreadable, oversized or malformed cache is ignored; a failed
  write is ignored (the next doctor walks again).
- Reads are bounded (:data:`MAX_CACHE_BYTES`, each ``HEAD`` file 4 KiB); a git failure gives no
  figures, never a traceback.
- Not covered by the key (rare, and each costs only a wrong "nothing else" share until the next
  miss): private refs of other worktrees (``refs/bisect``) and writes inside an alternate.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ledger.digests import sha256
from ledger.errors import GitError
from ledger.git.owned import replace_private_file
from ledger.git.private import make_private_dir, private_dir
from ledger.git.repo import GitRepo
from ledger.git.runner import GitRunner
from ledger.git.store.chain import STORE_REF, Store

CACHE_FILE = "store-usage.json"
CACHE_VERSION = 1
MAX_CACHE_BYTES = 64 * 1024
RACY_S = 2.0
"""A stamp younger than this (at the time the key was read) is not trusted for the cache."""
BUDGET_S = 0.5
"""The doctor's default time for a walk on a cache miss (its whole answer should take ≤ 1 s)."""
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class StoreUsage:
    """Disk use of the store: exact for the current state, or an earlier state's figures."""

    bytes: int
    """Bytes on disk of every object the store reaches (``rev-list --disk-usage``)."""
    exclusive_bytes: int
    """Bytes of those objects no other ref (and no worktree ``HEAD``) reaches."""
    loose_ours: int
    """How many of those exclusive objects are stored loose."""
    head: str | None
    """The store head the figures were measured at."""
    measured_s: float
    """When they were measured (Unix time)."""
    walk_s: float
    """How long the walk took."""
    exact: bool = True
    """False: the figures of an earlier state (the cache), the walk did not finish in time."""
    cached: bool = False
    """Read from the cache (exact when ``exact``: the state has not changed since)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "exact": self.exact,
            "cached": self.cached,
            "measuredHead": self.head,
            "measuredAtMs": int(self.measured_s * 1000),
            "walkSeconds": round(self.walk_s, 3),
            "bytes": self.bytes,
            "exclusiveBytes": self.exclusive_bytes,
            "looseObjects": self.loose_ours,
        }


@dataclass(frozen=True)
class UsageKey:
    digest: str
    head: str | None
    newest_s: float
    """The newest modification time among the stamped directories."""
    read_s: float
    """When the key was read."""


# --- the key ---------------------------------------------------------------------------------


def _objects(repo: GitRepo) -> Path:
    return repo.common_dir / "objects"


def _read_small(path: Path, limit: int) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return None


def usage_key(repo: GitRepo) -> UsageKey:
    """The state the figures depend on (see the module docstring); cheap: ~260 ``stat`` calls,
    a few small reads and one ``git for-each-ref``. Raises :class:`GitError` when git fails."""
    read_s = time.time()
    head = Store(repo).head()
    digest = sha256()
    digest.update(f"v{CACHE_VERSION}\0store {head}\0".encode())
    refs = GitRunner(repo.root, repo.git_dir).run(
        ["for-each-ref", "--format=%(objectname) %(refname)"], operation="git for-each-ref"
    )
    digest.update(refs.stdout)
    # Every worktree's HEAD, named relative to the common dir: the same key from any worktree.
    heads = ["HEAD"]
    with contextlib.suppress(OSError):
        heads += [
            f"worktrees/{name}/HEAD" for name in sorted(os.listdir(repo.common_dir / "worktrees"))
        ]
    for name in heads:
        digest.update(f"\0{name}\0".encode("utf-8", "surrogateescape"))
        digest.update(_read_small(repo.common_dir / name, 4096) or b"-")
    objects = _objects(repo)
    newest = 0.0
    names = ["pack", "info", *(f"{n:02x}" for n in range(256))]
    for name in names:
        try:
            st = os.stat(objects / name)
        except OSError:
            digest.update(f"\0{name} -".encode())
            continue
        newest = max(newest, st.st_mtime)
        digest.update(f"\0{name} {st.st_mtime_ns} {st.st_ino}".encode())
    alternates = _read_small(objects / "info" / "alternates", 64 * 1024)
    digest.update(b"\0alternates\0" + (alternates or b"-"))
    return UsageKey(digest.hexdigest(), head, newest, read_s)


# --- the cache -------------------------------------------------------------------------------


def cache_path(repo: GitRepo) -> Path:
    return private_dir(repo.common_dir) / CACHE_FILE


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def read_cache(repo: GitRepo) -> tuple[str, StoreUsage] | None:
    """``(key digest, figures)`` of the cache file, or None when it is missing, too large or not
    what :func:`write_cache` writes."""
    path = cache_path(repo)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_CACHE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_CACHE_BYTES:
        return None
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("version") != CACHE_VERSION:
        return None
    key, head = doc.get("key"), doc.get("head")
    counts = [_count(doc.get(name)) for name in ("bytes", "exclusiveBytes", "looseObjects")]
    measured, walk = doc.get("measuredAt"), doc.get("walkSeconds")
    if not (isinstance(key, str) and len(key) == 64 and set(key) <= _HEX):
        return None
    if not (
        head is None or (isinstance(head, str) and len(head) in (40, 64) and set(head) <= _HEX)
    ):
        return None
    if any(c is None for c in counts):
        return None
    if not (isinstance(measured, (int, float)) and isinstance(walk, (int, float))):
        return None
    if not (math.isfinite(measured) and math.isfinite(walk)):
        return None  # json reads NaN and Infinity
    total, exclusive, loose = (int(c or 0) for c in counts)
    return key, StoreUsage(
        total, exclusive, loose, head, float(measured), float(walk), exact=True, cached=True
    )


def write_cache(repo: GitRepo, key: UsageKey, usage: StoreUsage) -> bool:
    """Write the figures under ``key`` (temporary file + rename in our private dir); False when
    that failed (nothing is left but perhaps the temporary file of a killed process)."""
    doc = {
        "version": CACHE_VERSION,
        "key": key.digest,
        "head": usage.head,
        "bytes": usage.bytes,
        "exclusiveBytes": usage.exclusive_bytes,
        "looseObjects": usage.loose_ours,
        "measuredAt": usage.measured_s,
        "walkSeconds": round(usage.walk_s, 3),
    }
    try:
        home = make_private_dir(repo.common_dir)
    except OSError:
        return False
    try:
        # Through a temporary that is its own lock: one a kill leaves is swept (ledger/git/owned.py).
        return replace_private_file(home / CACHE_FILE, json.dumps(doc).encode())
    except OSError:
        return False


# --- the walk --------------------------------------------------------------------------------


def _loose_ids(objects: Path) -> set[str]:
    """Every loose object id (one ``listdir`` per fan-out directory)."""
    found: set[str] = set()
    for n in range(256):
        prefix = f"{n:02x}"
        with contextlib.suppress(OSError):
            found.update(
                prefix + name for name in os.listdir(objects / prefix) if len(name) in (38, 62)
            )
    return found


class Deadline:
    """A pipeline of git processes under a time budget: started through :meth:`start`, killed
    all at once when ``budget_s`` runs out (None: never; ≤ 0: at once), and every one killed if
    still running and reaped when the ``with`` block ends, whatever happened inside it."""

    def __init__(self, budget_s: float | None) -> None:
        self.expired = budget_s is not None and budget_s <= 0
        self.procs: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()
        self._timer = (
            threading.Timer(budget_s, self._expire)
            if budget_s is not None and budget_s > 0
            else None
        )
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()

    def start(
        self, runner: GitRunner, args: list[str], stdin: Any = subprocess.DEVNULL
    ) -> subprocess.Popen[bytes]:
        """One git process of the pipeline (stdout piped, stderr discarded)."""
        proc = subprocess.Popen(
            runner.command(args),
            cwd=str(runner.root),
            env=runner.env(),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        with self._lock:
            self.procs.append(proc)
            if self.expired:
                proc.kill()
        return proc

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for proc in self.procs:
                with contextlib.suppress(OSError):
                    proc.kill()

    def __enter__(self) -> Deadline:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _walk(repo: GitRepo, budget_s: float | None) -> tuple[int, int, int] | None:
    """``(bytes, exclusive bytes, exclusive loose objects)`` of what the store reaches, or None
    when git failed or the budget ran out (every process is killed and reaped)."""
    runner = GitRunner(repo.root, repo.git_dir)
    try:
        with Deadline(budget_s) as deadline:
            total = deadline.start(runner, ["rev-list", "--disk-usage", "--objects", STORE_REF])
            exclusive_args = ["--objects", "--no-object-names", STORE_REF, "--not"]
            listing = deadline.start(
                runner, ["rev-list", *exclusive_args, f"--exclude={STORE_REF}", "--all"]
            )
            sizes = deadline.start(
                runner,
                ["cat-file", "--batch-check=%(objectname) %(objectsize:disk)"],
                stdin=listing.stdout,
            )
            assert listing.stdout is not None and sizes.stdout is not None
            listing.stdout.close()  # cat-file holds it now
            loose = _loose_ids(_objects(repo))
            exclusive = ours = 0
            with sizes.stdout:
                for line in sizes.stdout:
                    oid, _, size = line.decode("ascii", "replace").strip().partition(" ")
                    if size.isdigit():
                        exclusive += int(size)
                        ours += oid in loose
            out, _ = total.communicate()
            codes = [proc.wait() for proc in deadline.procs]
    except OSError as exc:
        raise GitError("git rev-list --objects", str(exc)) from exc
    text = out.decode("ascii", "replace").strip()
    if deadline.expired or any(codes) or not text.isdigit():
        return None
    return int(text), exclusive, ours


def measure(repo: GitRepo, *, budget_s: float | None = BUDGET_S) -> StoreUsage | None:
    """The store's disk use: the cache when its key is current, else a walk within ``budget_s``
    (None: however long it takes), cached when the state held still; past the budget, or when
    git fails, the cache's figures of an earlier state (``exact`` False), or None."""
    key = usage_key(repo)
    cached = read_cache(repo)
    if cached is not None and cached[0] == key.digest:
        return cached[1]
    if key.head is None:
        return StoreUsage(0, 0, 0, None, key.read_s, 0.0)
    started = time.perf_counter()
    figures = _walk(repo, budget_s)
    if figures is None:
        return replace(cached[1], exact=False) if cached is not None else None
    usage = StoreUsage(*figures, key.head, key.read_s, time.perf_counter() - started)
    if key.newest_s < key.read_s - RACY_S and usage_key(repo).digest == key.digest:
        write_cache(repo, key, usage)
    return usage


__all__ = [
    "BUDGET_S",
    "CACHE_FILE",
    "Deadline",
    "StoreUsage",
    "UsageKey",
    "cache_path",
    "measure",
    "read_cache",
    "usage_key",
    "write_cache",
]
