"""The retention sweep: find the ledgers, plan, and rewrite ``refs/pi-rewind/store``.

Why it exists: the plan (:mod:`ledger.retention.plan`) is pure; this module feeds it the ledgers
the reference would read (docs/design.md#retention-discovery) and executes it with the store's
compare-and-swap rewrite (:func:`ledger.git.store.rewrite.rewrite_store`; D7 fixed in
:meth:`ledger.git.store.chain.Store.rewrite`).

Invariants:
- Session files are only read, never written; the store ref is the only thing that changes,
  and only through compare-and-swap. A dry run changes nothing.
- Files of other repositories (header ``cwd`` outside the repository root, realpath-compared),
  files without a header, unreadable files and ``parentSession`` cycles are skipped with a
  reason; none of them stops a sweep.
- An empty live set leaves the ref untouched. A time budget, when given, aborts before the
  rewrite and leaves the ref untouched.
- One decision (:func:`ledger.retention.plan.decide_sweep`, in ``SweepReport.decision``) says
  whether the store is left alone, already right, or rewritten; the real sweep executes it and a
  dry run reports it, computed by the same lines, so a dry run never disagrees with the run.
- If the dedup candidate (``last-snapshot.json``) was dropped, it is forgotten, so that a later
  capture never reuses an unreachable commit (D8).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ledger.clock import Clock, SystemClock
from ledger.errors import LedgerError
from ledger.git.repo import GitRepo
from ledger.lineage import LedgerFile, LineageReader
from ledger.retention.plan import (
    DAY_MS,
    GRACE_MS,
    LedgerInput,
    Policy,
    RetentionPlan,
    SweepDecision,
    decide_sweep,
    plan_retention,
)
from ledger.session.discovery import jsonl_files
from ledger.session.model import Session
from ledger.settings import ScanMode

Progress = Callable[[int, int], None]


class BudgetExceeded(Exception):
    """The startup budget ran out; the sweep stops without touching the ref."""


@dataclass
class SweepReport:
    plan: RetentionPlan
    scan_mode: ScanMode
    dry_run: bool
    sessions_read: int = 0
    ledgers: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    store_before: int = 0
    """Snapshots the store kept before the sweep."""
    arrived: list[str] = field(default_factory=list)
    """Snapshots appended by other processes during the sweep, kept (D7)."""
    unreachable_objects: int = 0
    """Objects (old keepalives, dropped snapshots, the trees and blobs only they use) that no
    ref reaches once the store keeps the live set: what ``git gc`` may reclaim. Counted only
    when asked (``count_objects``)."""
    freed_bytes: int = 0
    """Approximate bytes on disk those objects take (``%(objectsize:disk)``, as ``rev-list
    --disk-usage`` sums them); counted in the same walk. Given back at once in a shadow repository (its upkeep), at the next gc in a user's."""
    counted: bool = True
    """False: the count ran out of ``count_budget_s`` (the two figures above are 0, unknown)."""
    preserved: bool = False
    rewritten: bool = False
    old_head: str | None = None
    new_head: str | None = None
    ms: float = 0.0
    decision: SweepDecision = field(
        default_factory=lambda: SweepDecision("preserve", None, (), (), ())
    )
    """What this sweep does (a dry run: would do) to the store; see :func:`decide_sweep`."""

    def to_json(self) -> dict[str, Any]:
        summary = self.plan.summary()
        return {
            "dryRun": self.dry_run,
            "decision": self.decision.to_json(),
            "scanMode": self.scan_mode,
            "sessionsRead": self.sessions_read,
            "ledgers": self.ledgers,
            "kept": summary["live"] + len(self.arrived),
            "pinned": summary["pinned"],
            "recent": summary["recent"],
            "unrecorded": summary["unrecorded"],
            "arrived": len(self.arrived),
            "dropped": summary["dropped"],
            "missing": summary["missing"],
            "storeBefore": self.store_before,
            "unreachableObjects": self.unreachable_objects,
            "freedBytes": self.freed_bytes,
            "preserved": self.preserved,
            "rewritten": self.rewritten,
            "oldHead": self.old_head,
            "newHead": self.new_head,
            "skipped": [{"file": f, "reason": r} for f, r in self.skipped],
            "warnings": self.warnings,
            "decisions": [
                {"snapshot": d.snapshot, "reason": d.reason, "latest": d.latest_ms}
                for d in self.plan.decisions.values()
            ],
            "ms": round(self.ms, 1),
        }


def collect_ledgers(
    repo: GitRepo,
    start: Session | Path | str | None,
    agent_dir: Path,
    scan_mode: ScanMode,
    *,
    reader: LineageReader | None = None,
    tick: Callable[[], None] = lambda: None,
    progress: Progress | None = None,
) -> tuple[list[LedgerInput], SweepReportParts]:
    """The ledgers a sweep reads, in the reference's discovery order (current, its ancestors,
    then with ``repo-sessions`` every other session file of this repository)."""
    reader = reader or LineageReader()
    parts = SweepReportParts()
    ledgers: list[LedgerInput] = []
    seen: set[str] = set()

    def take(link: LedgerFile) -> None:
        key = (
            os.path.realpath(link.path)
            if str(link.path) != "<memory>"
            else f"<memory>:{link.session_id}"
        )
        if key in seen:
            return
        seen.add(key)
        parts.sessions_read += 1
        if not link.cwd or not repo.contains(link.cwd):
            parts.skipped.append(
                (
                    str(link.path),
                    "not a session of this repository" if link.cwd else "no cwd in the header",
                )
            )
            return
        ledgers.append(LedgerInput(str(link.path), link.view))

    if start is not None:
        lineage = reader.lineage(start)
        parts.warnings.extend(lineage.warnings)
        for link in lineage.links:
            tick()
            take(link)
    # Whatever the scan mode, the ledgers of the sessions live in this work tree right now (and
    # their ancestors) are read too: a sweep run by one session never drops a point another
    # live session can still restore to (docs/design.md#retention-across-sessions).
    for path in _live_session_files(repo):
        tick()
        if os.path.realpath(path) in seen:
            continue
        try:
            lineage = reader.lineage(path)
        except LedgerError as exc:
            seen.add(os.path.realpath(path))
            parts.skipped.append((str(path), exc.message))
            continue
        parts.warnings.extend(lineage.warnings)
        for link in lineage.links:
            take(link)
    if scan_mode == "repo-sessions":
        directories = [agent_dir / "sessions"]
        start_file = start.path if isinstance(start, Session) else (Path(start) if start else None)
        if start_file is not None:
            directories.append(Path(start_file).parent)
        files = list(dict.fromkeys(p for d in directories for p in jsonl_files(d)))
        tick()
        for number, path in enumerate(files, 1):
            if progress is not None:
                progress(number, len(files))
            if os.path.realpath(path) in seen:
                continue
            tick()
            # The header first (one bounded line): files of other repositories, most of an
            # agent dir, are never read whole.
            if not _may_belong(repo, path, seen, parts):
                continue
            try:
                take(reader.load(path))
            except LedgerError as exc:
                seen.add(os.path.realpath(path))
                parts.sessions_read += 1
                parts.skipped.append((str(path), exc.message))
    return ledgers, parts


def _live_session_files(repo: GitRepo) -> list[Path]:
    """The session files the presence registry names for this work tree's live sessions."""
    from ledger.presence import live_sessions

    files = [Path(e.session_file) for e in live_sessions(repo.git_dir) if e.session_file]
    return [path for path in files if path.is_file()]


def _may_belong(repo: GitRepo, path: Path, seen: set[str], parts: SweepReportParts) -> bool:
    """False (skipped with the reason :func:`collect_ledgers` would give) when the header says
    the file is not a session of ``repo``; True when it may be (then it is read whole)."""
    from ledger.session.discovery import read_info

    info = read_info(path)
    if info is None:
        return True  # unreadable or no header: the full read gives the precise reason
    if info.cwd and repo.contains(info.cwd):
        return True
    seen.add(os.path.realpath(path))
    parts.sessions_read += 1
    reason = "not a session of this repository" if info.cwd else "no cwd in the header"
    parts.skipped.append((str(path), reason))
    return False


@dataclass
class SweepReportParts:
    sessions_read: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def run_sweep(
    repo: GitRepo,
    start: Session | Path | str | None,
    agent_dir: Path,
    *,
    scan_mode: ScanMode,
    policy: Policy,
    dry_run: bool = False,
    budget_ms: float | None = None,
    clock: Clock | None = None,
    reader: LineageReader | None = None,
    progress: Progress | None = None,
    count_objects: bool = False,
    count_budget_s: float | None = None,
) -> SweepReport:
    """One sweep from ``start`` (the current session: a Session, a path, or None for none).

    ``policy``: the limits (:func:`policy_from`); ``dry_run``: plan only; ``budget_ms``: abort
    with :class:`BudgetExceeded` (nothing changed) when the sweep takes longer; ``progress``:
    called as ``(files done, files)`` while a ``repo-sessions`` scan reads files;
    ``count_objects``: also count what ``git gc`` may reclaim, and its bytes (one
    ``git rev-list --objects`` walk, sized by ``git cat-file --batch-check``), given up after
    ``count_budget_s`` seconds when set (``counted`` False, both figures 0).
    Raises :class:`~ledger.errors.StoreUpdateError` when the compare-and-swap keeps failing."""
    from ledger.git.restore.journal import pinned_snapshots
    from ledger.git.store.chain import Store
    from ledger.git.store.rewrite import reclaimable, rewrite_store
    from ledger.git.store.snapshot import load_last_exact, save_last_exact

    clock = clock or SystemClock()
    started = time.perf_counter()

    def tick() -> None:
        if budget_ms is not None and (time.perf_counter() - started) * 1000 > budget_ms:
            raise BudgetExceeded(
                f"Rewind retention startup sweep skipped after exceeding {budget_ms:g}ms budget"
            )

    store = Store(repo)
    since = store.head()
    stored = store.snapshot_times()
    before = list(stored)
    ledgers, parts = collect_ledgers(
        repo, start, agent_dir, scan_mode, reader=reader, tick=tick, progress=progress
    )
    # An interrupted restore's undo snapshot is the only copy of the files before it.
    plan = plan_retention(
        ledgers,
        clock.now_ms(),
        policy,
        repo.commit_exists,
        stored=stored,
        tick=tick,
        pins=pinned_snapshots(repo),
    )
    report = SweepReport(
        plan,
        scan_mode,
        dry_run,
        parts.sessions_read,
        len(ledgers),
        parts.skipped,
        parts.warnings,
        store_before=len(before),
        old_head=since,
        new_head=since,
        decision=decide_sweep(plan, before, since),
    )
    # The one decision, executed below and printed by a dry run (never re-derived from counts).
    decision = report.decision
    report.preserved = decision.action == "preserve"
    if not decision.rewrites:
        pass  # preserve (an empty live set) or unchanged (the store keeps exactly the live set)
    elif dry_run:
        if count_objects:
            freed = reclaimable(repo, since, decision.keep, budget_s=count_budget_s)
            report.unreachable_objects, report.freed_bytes = freed.objects, freed.bytes
            report.counted = freed.complete
    else:
        tick()
        result = rewrite_store(repo, list(decision.keep), since=since, now_ms=clock.now_ms())
        report.rewritten, report.arrived, report.new_head = True, result.arrived, result.new_head
        report.old_head = result.old_head
        if count_objects:
            freed = reclaimable(repo, result.old_head, result.kept, budget_s=count_budget_s)
            report.unreachable_objects, report.freed_bytes = freed.objects, freed.bytes
            report.counted = freed.complete
        last = load_last_exact(repo)
        if last is not None and last.commit not in result.kept:
            save_last_exact(repo, None)
        _compact_authorship(repo)
    report.ms = (time.perf_counter() - started) * 1000
    return report


COMPACT_FROM_BYTES = 1 << 20
"""An authorship index smaller than this is left as it is by a sweep (nothing worth a rewrite)."""


def _compact_authorship(repo: GitRepo) -> None:
    """The authorship index is compacted with retention (docs/authorship.md#compaction): the
    records superseded for every key dropped, a torn tail too. Keys of pruned snapshots are
    kept (a later capture may find that content again); a busy or damaged file is left for
    the next sweep or its rebuild."""
    from ledger.authorship.store import AuthorshipStore
    from ledger.git.private import private_dir

    store = AuthorshipStore(private_dir(repo.git_dir))
    try:
        if store.path.stat().st_size < COMPACT_FROM_BYTES:
            return
        store.compact(None)
    except OSError:
        return


def policy_from(
    settings: Any,
    *,
    max_snapshots: int | None = None,
    max_age_days: float | None = None,
    pin_labeled: bool | None = None,
) -> Policy:
    """The sweep policy: the settings' retention values, overridden by explicit options. The
    default retention (``implicit``) keeps unnamed snapshots as long as named ones (its age)."""
    retention = getattr(settings, "retention", None)
    policy = Policy(
        max_snapshots=max_snapshots
        if max_snapshots is not None
        else getattr(retention, "max_snapshots", None),
        max_age_days=max_age_days
        if max_age_days is not None
        else getattr(retention, "max_age_days", None),
        pin_labeled_entries=pin_labeled
        if pin_labeled is not None
        else bool(getattr(retention, "pin_labeled_entries", False)),
    )
    if getattr(retention, "implicit", False) and policy.max_age_days is not None:
        grace = max(GRACE_MS, int(policy.max_age_days * DAY_MS))
        policy = replace(policy, grace_ms=grace)
    return policy
