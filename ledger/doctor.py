"""``rewind doctor``: is the store sound, and does every rewind point still have its snapshot?

Why it exists: the ledger (session files) is authoritative and the store ref only keeps its
snapshots reachable; the two can drift apart (a hand-edited ref, an old gc, a crash between a
commit and its keepalive). The doctor reads both and says what is wrong and how to fix it. It
changes nothing of the store, the ledgers or the user's repository (its only writes are our own
bookkeeping files: the disk-use cache and dead presence entries, below).

Problems (exit 1): a malformed keepalive chain, and referenced snapshots that exist but that
the store does not reach although they were recorded after the chain began (after the last
rewrite, or the first append): no sweep dropped them, so they fell out by accident and ``git gc``
would prune them. Not problems: referenced snapshots recorded before the last rewrite and not
kept (a sweep dropped them: its limits, or an ``ancestor-only`` scan that did not read their
session), snapshots that are gone (pruned; those points are skipped before anything is offered),
and a private index that is missing, stale or corrupt (the next capture rebuilds it).

Restore journals: one whose owner is gone is an interrupted restore (a problem, with the
``rewind undo`` that finishes it); one whose owner is alive is a restore still running, reported
as information only (``a restore is running (pid N)``), since its journal closes when it ends
(docs/design.md#crash-safe-restore).

Sessions here: the live Pi sessions of the work tree (the presence registry,
:mod:`ledger.presence`) are listed as information (docs/design.md#sessions-here). Listing the
registry removes the entries of dead sessions (our own bookkeeping files).

The doctor needs no settings: what a sweep dropped is told apart from what fell out by time,
so a sweep run by hand with its own limits does not make the doctor fail. Given the settings, it
also says what retention would drop now and about how many bytes that frees (a dry-run sweep),
and it always reports disk use: the bytes the store keeps alive, our loose objects against git's
``gc.auto`` estimate, and leftovers of interrupted work (a killed upkeep, git temporary files),
which are information, not problems: ``rewind sweep`` removes the ones that are safe to remove
(docs/design.md#disk-upkeep).

Bounded time: the store's disk use and what a sweep frees each need a walk of the whole store,
whose cost grows with its history. The disk use is cached per store state
(:mod:`ledger.git.store.usage`, ``<common-dir>/pi-rewind/store-usage.json``, the doctor's other
write); on a miss both walks get a time budget (:data:`USAGE_BUDGET_S`,
:data:`PREVIEW_BUDGET_S`) and, past it, the report gives the last exact figures of an earlier
state marked as such, or none: the exact fields (``store.bytes``, ``exclusiveBytes``,
``looseObjects``, ``retention.freedBytes``) are then ``null``, never an estimate.
``exact=True`` (``rewind doctor --exact``) lifts the budgets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import LedgerError
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import Journal
from ledger.git.store.chain import STALE_LOCK_S, gone_lock_remedy, stale_lock_remedy
from ledger.git.store.leftovers import Leftover
from ledger.git.store.refswap import RefLock
from ledger.git.store.usage import BUDGET_S, StoreUsage
from ledger.lineage import LineageReader
from ledger.presence import Presence
from ledger.recovery import interruption_error
from ledger.session.discovery import repo_sessions
from ledger.settings import Settings


@dataclass
class DanglingReference:
    session: str
    entry: str | None
    kind: str
    snapshot: str
    state: str
    """``missing`` (pruned), ``dropped`` (exists, not kept, recorded before the chain's last
    rewrite: a sweep dropped it) or ``unreachable`` (exists, not kept, recorded after it: gc may
    prune it)."""


@dataclass
class DoctorReport:
    store_head: str | None
    keepalives: int
    snapshots: int
    sessions: int
    ledgers: int
    chain_problems: list[str] = field(default_factory=list)
    references: list[DanglingReference] = field(default_factory=list)
    index: str = "missing"
    authorship: str = "missing"
    """The authorship index's status (docs/authorship.md): anything but ``ok`` is rebuilt at
    the next plan (``newer``: in memory only)."""
    chain_started_ms: int | None = None
    """When the chain began (its last rewrite or first append); None without a keepalive chain."""
    usage: StoreUsage | None = None
    """The store's disk use (exact, or an earlier state's figures: ``usage.exact``); None when
    it was not measured (the walk ran out of time with nothing cached, or git failed)."""
    warnings: list[str] = field(default_factory=list)
    interrupted: list[Journal] = field(default_factory=list)
    """Open restore journals whose restore was interrupted (docs/design.md#crash-safe-restore)."""
    running: list[Journal] = field(default_factory=list)
    """Open restore journals whose owner is alive: restores in progress, not problems."""
    broken_journals: list[str] = field(default_factory=list)
    feed: dict[str, Any] | None = None
    """The last change-feed status a bridge wrote (``feed-status.json``), when there is one."""
    feed_mismatch: str | None = None
    """The evidence file of a fed capture that differed from a full scan, when there is one."""
    store_lock: str | None = None
    store_lock_age_s: float | None = None
    """The lock on the store ref, when one exists."""
    store_lock_info: RefLock | None = None
    """Whose it is: rewind's own are stale only once their owner is provably gone, others (git's)
    are called stale from :data:`STALE_LOCK_S` on (and never removed by rewind)."""
    loose_estimate: int = 0
    """git's estimate of all loose objects (``objects/17`` × 256), against ``gc_auto``."""
    gc_auto: int = 0
    leftovers: list[Leftover] = field(default_factory=list)
    retention: dict[str, Any] | None = None
    """What retention would do now (a dry-run sweep), when settings were given."""
    server: dict[str, Any] | None = None
    """Which process serves the repository (``rewind serve --status``), when one does."""
    live_sessions: list[Presence] = field(default_factory=list)
    """The live Pi sessions of this work tree (information, not a problem)."""
    platform_absent: list[str] = field(default_factory=list)
    """Linux-only facilities this machine lacks (:mod:`ledger.facilities`): information."""

    @property
    def store_bytes(self) -> int | None:
        """Bytes the store keeps alive, when known exactly."""
        return self.usage.bytes if self.usage and self.usage.exact else None

    @property
    def exclusive_bytes(self) -> int | None:
        """Bytes of the objects only the store reaches, when known exactly."""
        return self.usage.exclusive_bytes if self.usage and self.usage.exact else None

    @property
    def loose_ours(self) -> int | None:
        """Objects only the store reaches that are stored loose, when known exactly."""
        return self.usage.loose_ours if self.usage and self.usage.exact else None

    @property
    def unreachable(self) -> list[DanglingReference]:
        return [r for r in self.references if r.state == "unreachable"]

    @property
    def missing(self) -> list[DanglingReference]:
        return [r for r in self.references if r.state == "missing"]

    @property
    def stale_lock(self) -> bool:
        lock = self.store_lock_info
        if lock is None or lock.state == "live":
            return False
        return lock.state == "gone" or lock.age_s >= STALE_LOCK_S

    @property
    def problems(self) -> list[str]:
        found = [interruption_error(j).message for j in self.interrupted[-1:]]
        if len(self.interrupted) > 1:
            found.append(f"{len(self.interrupted)} restores were interrupted in all")
        found += [f"unreadable restore journal {b}" for b in self.broken_journals]
        if self.stale_lock:
            found.append(
                f"a stale lock on the rewind store: {self.store_lock} ({self.store_lock_age_s:.0f} s old"
                + (f", {self.store_lock_info.describe()})" if self.store_lock_info else ")")
            )
        found += list(self.chain_problems)
        if self.unreachable:
            found.append(
                f"{len({r.snapshot for r in self.unreachable})} referenced snapshots are not kept by the "
                "store (git gc may prune them)"
            )
        return found

    @property
    def hint(self) -> str | None:
        if self.interrupted:
            return interruption_error(self.interrupted[-1]).hint
        if self.broken_journals:
            return (
                "a journal rewind cannot read: move it aside once no restore is running "
                f"({self.broken_journals[0]})"
            )
        if self.stale_lock and self.store_lock_info and self.store_lock_info.state == "gone":
            return gone_lock_remedy(self.store_lock_info)
        if self.stale_lock and self.store_lock:
            return stale_lock_remedy(Path(self.store_lock))
        if self.chain_problems:
            return (
                "rebuild the store from the ledgers: rewind sweep --scan repo-sessions "
                "(without limits it keeps every referenced snapshot that still exists)"
            )
        if self.unreachable:
            return (
                "keep them: rewind sweep --scan repo-sessions (they are the most recently recorded; "
                "raise --max-snapshots if a limit still drops them)"
            )
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": not self.problems,
            "problems": self.problems,
            "hint": self.hint,
            "store": {
                "head": self.store_head,
                "keepalives": self.keepalives,
                "snapshots": self.snapshots,
                "chainStarted": self.chain_started_ms,
                "bytes": self.store_bytes,
                "exclusiveBytes": self.exclusive_bytes,
                "looseObjects": self.loose_ours,
                "usage": self.usage.to_json() if self.usage else None,
            },
            "looseEstimate": self.loose_estimate,
            "gcAuto": self.gc_auto,
            "leftovers": [item.to_json() for item in self.leftovers],
            "retention": self.retention,
            "sessions": self.sessions,
            "ledgers": self.ledgers,
            "privateIndex": self.index,
            "authorshipIndex": self.authorship,
            "references": [
                {
                    "session": r.session,
                    "entry": r.entry,
                    "kind": r.kind,
                    "snapshot": r.snapshot,
                    "state": r.state,
                }
                for r in self.references
            ],
            "warnings": self.warnings,
            "feed": self.feed,
            "server": self.server,
            "feedMismatch": self.feed_mismatch,
            "interruptedRestores": [j.to_json() for j in self.interrupted],
            "runningRestores": [j.to_json() for j in self.running],
            "liveSessions": [entry.to_json() for entry in self.live_sessions],
            "platformAbsent": self.platform_absent,
            "brokenJournals": self.broken_journals,
            "storeLock": (
                {
                    "path": self.store_lock,
                    "ageSeconds": round(self.store_lock_age_s or 0.0, 1),
                    "stale": self.stale_lock,
                    "state": self.store_lock_info.state if self.store_lock_info else None,
                    "ownerPid": (
                        self.store_lock_info.owner.pid
                        if self.store_lock_info and self.store_lock_info.owner
                        else None
                    ),
                }
                if self.store_lock
                else None
            ),
        }


USAGE_BUDGET_S = BUDGET_S
"""Time for the store's disk-use walk when its cache is stale (:mod:`ledger.git.store.usage`)."""
PREVIEW_BUDGET_S = 0.3
"""Time for counting what a sweep would free (when retention would drop anything)."""


def preview_retention(
    repo: GitRepo,
    agent_dir: Path,
    settings: Settings,
    start: Path | None,
    *,
    budget_s: float | None = PREVIEW_BUDGET_S,
) -> dict[str, Any]:
    """What the configured retention would drop now, and about how many bytes it frees: a
    dry-run sweep from ``start`` (changes nothing). The count gets ``budget_s`` (None: no
    limit); past it ``unreachableObjects`` and ``freedBytes`` are None (not measured)."""
    from ledger.retention.sweep import policy_from, run_sweep

    retention = settings.retention
    if retention is None:
        return {"on": False}
    info: dict[str, Any] = {
        "on": True,
        "default": retention.implicit,
        "maxAgeDays": retention.max_age_days,
        "maxSnapshots": retention.max_snapshots,
        "scanMode": retention.scan_mode,
    }
    try:
        report = run_sweep(
            repo,
            start,
            agent_dir,
            scan_mode=retention.scan_mode,
            policy=policy_from(settings),
            dry_run=True,
            count_objects=True,
            count_budget_s=budget_s,
        )
    except LedgerError as exc:
        return {**info, "error": exc.message}
    dropped = 0 if report.preserved else report.plan.summary()["dropped"]
    return {
        **info,
        "wouldDrop": dropped,
        "unreachableObjects": report.unreachable_objects if report.counted else None,
        "freedBytes": report.freed_bytes if report.counted else None,
    }


def _authorship_status(repo: GitRepo) -> str:
    """The authorship index file's status, from a read that parses no entry."""
    from ledger.authorship.store import AuthorshipStore
    from ledger.git.private import private_dir

    return AuthorshipStore(private_dir(repo.git_dir)).read(only=()).status


def diagnose(
    repo: GitRepo,
    agent_dir: Path,
    *,
    settings: Settings | None = None,
    start: Path | None = None,
    exact: bool = False,
) -> DoctorReport:
    """Read the store chain, the private index and every session of this repository; change
    nothing but the disk-use cache and dead presence entries. With ``settings``, also preview
    retention from ``start`` (:func:`preview_retention`). ``exact``: walk the store however long
    it takes rather than within the budgets."""
    from ledger.git.capture.index import PrivateIndex
    from ledger.git.feed.service import MISMATCH_FILE, read_status_file
    from ledger.git.private import private_dir
    from ledger.git.restore.journal import open_journals
    from ledger.git.store.chain import Store
    from ledger.git.store.leftovers import find_leftovers
    from ledger.git.store.rewrite import chain_started_ms
    from ledger.git.store.upkeep import gc_auto_threshold, loose_estimate
    from ledger.git.store.usage import measure
    from ledger.recovery import journal_states

    store = Store(repo)
    interrupted, running = journal_states(repo)
    _, broken = open_journals(repo)
    keepalives, chain_problems = store.check_chain()
    kept = set(store.snapshots())
    skipped: list[tuple[Path, str]] = []
    sessions = repo_sessions(agent_dir, repo.root, skipped=skipped)
    report = DoctorReport(
        store.head(),
        keepalives,
        len(kept),
        len(sessions),
        0,
        chain_problems,
        index=PrivateIndex(repo.git_dir).health(),
        authorship=_authorship_status(repo),
        chain_started_ms=chain_started_ms(repo),
    )
    try:
        report.usage = measure(repo, budget_s=None if exact else USAGE_BUDGET_S)
    except LedgerError as exc:
        report.warnings.append(f"store disk use not measured: {exc.message}")
    report.warnings.extend(f"skipped {path}: {reason}" for path, reason in skipped)
    report.interrupted = interrupted
    report.running = running
    report.broken_journals = [f"{b.path}: {b.reason}" for b in broken]
    report.feed = read_status_file(repo.git_dir)
    from ledger.work_tree_scope import live_sessions_here

    report.live_sessions = live_sessions_here(repo.git_dir)  # nested directories' too
    from ledger.bridge.status import server_info

    served = server_info(repo.root, repo.git_dir)
    report.server = served if served.get("serving") else None
    from ledger.facilities import facilities

    report.platform_absent = facilities().absent()
    mismatch = private_dir(repo.git_dir) / MISMATCH_FILE
    if mismatch.is_file():
        report.feed_mismatch = str(mismatch)
        report.warnings.append(
            f"the change feed once disagreed with a full scan; that session switched to full "
            f"scans (captures stay exact). Evidence for a bug report: {mismatch}"
        )
    report.loose_estimate, report.gc_auto = loose_estimate(repo), gc_auto_threshold(repo)
    report.leftovers = find_leftovers(repo)
    if settings is not None:
        report.retention = preview_retention(
            repo, agent_dir, settings, start, budget_s=None if exact else PREVIEW_BUDGET_S
        )
    lock = store.lock_state()
    if lock is not None:
        report.store_lock, report.store_lock_age_s = str(lock.path), lock.age_s
        report.store_lock_info = lock
    reader = LineageReader()
    ledgers = []
    for info in sessions:
        try:
            ledger = reader.load(info.path)
        except LedgerError as exc:
            report.warnings.append(f"{info.path}: {exc.message}")
            continue
        if ledger.view.references:
            ledgers.append(ledger)
    report.ledgers = len(ledgers)
    latest: dict[str, int] = {}
    for ledger in ledgers:
        for reference in ledger.view.references:
            if reference.is_retention_reference:
                latest[reference.snapshot] = max(
                    latest.get(reference.snapshot, 0), reference.timestamp_ms
                )
    # Keepalive times are whole seconds: a record counts as "after" once that second is over.
    started = report.chain_started_ms
    reached: dict[str, bool] = {}
    # One walk of the chain for all references that the kept set does not hold (many, after
    # retention dropped snapshots): asking per snapshot walked the chain once each (5.4 s at
    # 5,000 prompts in docs/soak.md).
    reachable: frozenset[str] | None = None
    for ledger in ledgers:
        for reference in ledger.view.references:
            if not reference.is_retention_reference:
                continue
            sha = reference.snapshot
            if sha not in reached:
                if sha not in kept and reachable is None:
                    reachable = store.reachable()
                reached[sha] = sha in kept or (reachable is not None and sha in reachable)
            if reached[sha]:
                continue
            if not repo.commit_exists(sha):
                state = "missing"
            elif started is None or latest[sha] >= started + 1000:
                state = "unreachable"
            else:
                state = "dropped"
            report.references.append(
                DanglingReference(ledger.session_id, reference.entry_id, reference.kind, sha, state)
            )
    return report
