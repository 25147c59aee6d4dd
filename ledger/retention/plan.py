"""The retention plan: which snapshots stay reachable, and why (docs/design.md#retention-references,
docs/design.md#retention-plan).

Why it exists: a sweep must never lose a snapshot that anything still needs, and a user must be
able to see why each snapshot is kept or dropped before anything changes. So the decision is a
pure function of values — the ledgers, the time, the policy, an existence check — and the sweep
(:mod:`ledger.retention.sweep`) only executes it.

The reference's rules, in its order:

1. References: every binding, ``current`` and ``undo`` of ``rewind-turn``/``rewind-op`` records,
   stamped with the record's own timestamp; a snapshot's age is its **latest** reference.
   ``rewind-fork-pending`` is a hand-off, not a reference.
2. Pins, in this order: commits bound to labeled entries (if ``pinLabeledEntries``), each
   ledger's latest ``current``, each ledger's latest ``undo`` (the last two only if they exist).
3. Candidates: the other referenced commits, newest first; older than ``maxAgeDays`` dropped;
   beyond ``maxSnapshots`` dropped.
4. Live set: pins then candidates, de-duplicated, each checked for existence. An empty live set
   means "leave the store alone" (a first run, or no ledger at all, must not empty it).
5. Beyond the reference: a snapshot the store keeps that no ledger names yet, committed within
   the policy's grace (:data:`GRACE_MS`; the default retention's is its ``maxAgeDays``), stays
   (``unrecorded``). The engine takes a prompt's snapshots at its turns
   but records them only at ``agent_end``; another process's sweep in between must not drop
   them. Older unreferenced snapshots (orphaned undo snapshots) go, as in the reference — but
   only when something else is live (rule 4).

What a sweep then does with the plan is :func:`decide_sweep`, also pure: one value
(:class:`SweepDecision`) that the real sweep executes and the dry run prints, so the two can
never disagree (a dry run once inferred "nothing to rewrite" from counting no unreachable
objects, while the real sweep rewrote the store: with no store ref, a ref pointing straight at a
snapshot, or a chain another ref also reaches).

Invariants: no I/O; ``tick`` is called before each unit of work so a caller can enforce a time
budget by raising from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ledger.ledgerview import LedgerView

DAY_MS = 86_400_000

GRACE_MS = DAY_MS
"""How long a stored snapshot that no ledger names yet is kept (see rule 5)."""

Reason = Literal[
    "pinned: label",
    "pinned: current",
    "pinned: undo",
    "recent",
    "unrecorded",
    "dropped: too old",
    "dropped: over maxSnapshots",
    "dropped: missing",
    "dropped: unreferenced",
]


@dataclass(frozen=True)
class Policy:
    max_snapshots: int | None = None
    max_age_days: float | None = None
    pin_labeled_entries: bool = False
    grace_ms: int = GRACE_MS
    """How long a stored snapshot that no ledger names stays (rule 5)."""


@dataclass(frozen=True)
class LedgerInput:
    """One session's ledger as the sweep found it."""

    name: str
    view: LedgerView


@dataclass(frozen=True)
class Decision:
    snapshot: str
    reason: str
    """One of :data:`Reason`, or a caller's pin reason (``pinned: open restore journal …``)."""
    latest_ms: int

    @property
    def kept(self) -> bool:
        return not self.reason.startswith("dropped")


@dataclass
class RetentionPlan:
    live: list[str]
    decisions: dict[str, Decision] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Nothing to keep: the sweep must leave the store untouched."""
        return not self.live

    def count(self, *reasons: str) -> int:
        return sum(
            1
            for d in self.decisions.values()
            if d.reason in reasons or any(d.reason.startswith(r) for r in reasons)
        )

    def summary(self) -> dict[str, int]:
        return {
            "live": len(self.live),
            "pinned": self.count("pinned"),
            "recent": self.count("recent"),
            "unrecorded": self.count("unrecorded"),
            "dropped": self.count("dropped"),
            "missing": self.count("dropped: missing"),
        }


def _tick() -> None:
    return None


def plan_retention(
    ledgers: Sequence[LedgerInput],
    now_ms: int,
    policy: Policy,
    exists: Callable[[str], bool],
    *,
    stored: Mapping[str, int] | None = None,
    grace_ms: int | None = None,
    tick: Callable[[], None] = _tick,
    pins: Mapping[str, str] | None = None,
) -> RetentionPlan:
    """``stored``: the snapshots the store keeps now, with their commit times (ms); ``pins``:
    snapshots kept whatever the limits say, with their reason (open restore journals);
    ``grace_ms``: overrides ``policy.grace_ms``."""
    grace = policy.grace_ms if grace_ms is None else grace_ms
    latest: dict[str, int] = {}
    for ledger in ledgers:
        tick()
        for reference in ledger.view.references:
            if reference.is_retention_reference:
                previous = latest.get(reference.snapshot)
                if previous is None or reference.timestamp_ms > previous:
                    latest[reference.snapshot] = reference.timestamp_ms

    pinned: dict[str, str] = {}
    if policy.pin_labeled_entries:
        for ledger in ledgers:
            tick()
            for entry_id in ledger.view.labeled_entries:
                sha = ledger.view.entry_to_commit.get(entry_id)
                if sha is not None:
                    pinned.setdefault(sha, "pinned: label")
    for sha, reason in (pins or {}).items():
        if sha not in pinned and exists(sha):
            pinned[sha] = reason
    for kind in ("current", "undo"):
        for ledger in ledgers:
            sha = ledger.view.latest_current if kind == "current" else ledger.view.latest_undo
            if sha is not None and sha not in pinned:
                tick()
                if exists(sha):
                    pinned[sha] = "pinned: current" if kind == "current" else "pinned: undo"

    decisions: dict[str, Decision] = {}
    candidates = sorted((sha for sha in latest if sha not in pinned), key=lambda sha: -latest[sha])
    if policy.max_age_days is not None:
        cutoff = now_ms - policy.max_age_days * DAY_MS
        for sha in [sha for sha in candidates if latest[sha] < cutoff]:
            decisions[sha] = Decision(sha, "dropped: too old", latest[sha])
        candidates = [sha for sha in candidates if latest[sha] >= cutoff]
    if policy.max_snapshots is not None and len(candidates) > policy.max_snapshots:
        for sha in candidates[policy.max_snapshots :]:
            decisions[sha] = Decision(sha, "dropped: over maxSnapshots", latest[sha])
        candidates = candidates[: policy.max_snapshots]

    live: list[str] = []
    ordered: list[tuple[str, str]] = [*pinned.items(), *((sha, "recent") for sha in candidates)]
    for sha, reason in ordered:
        tick()
        if (reason.startswith("pinned: label") or reason == "recent") and not exists(sha):
            decisions[sha] = Decision(sha, "dropped: missing", latest.get(sha, 0))
            continue
        decisions[sha] = Decision(sha, reason, latest.get(sha, 0))
        live.append(sha)
    if live:
        for sha, committed_ms in (stored or {}).items():
            if sha in latest or sha in pinned:
                continue
            if now_ms - committed_ms <= grace and exists(sha):
                decisions[sha] = Decision(sha, "unrecorded", committed_ms)
                live.append(sha)
            else:
                decisions[sha] = Decision(sha, "dropped: unreferenced", committed_ms)
    return RetentionPlan(live, decisions)


SweepAction = Literal["preserve", "unchanged", "rewrite"]
"""``preserve``: the live set is empty, the store is left alone (rule 4); ``unchanged``: the
store already keeps exactly the live set; ``rewrite``: the store is rewritten to keep it."""


@dataclass(frozen=True)
class SweepDecision:
    """What a sweep does to ``refs/pi-rewind/store``, decided before anything is written. The
    real sweep executes exactly this (snapshots other processes append meanwhile are kept too,
    reported apart as ``arrived``); ``--dry-run`` prints exactly this."""

    action: SweepAction
    head: str | None
    """The store head the decision was made against (``None``: no store ref)."""
    keep: tuple[str, ...]
    """The live set, in the plan's order (empty for ``preserve``)."""
    drop: tuple[str, ...]
    """Snapshots the store keeps now and will not keep (empty unless ``rewrite``)."""
    add: tuple[str, ...]
    """Snapshots the store does not keep now and will keep (empty unless ``rewrite``)."""

    @property
    def rewrites(self) -> bool:
        return self.action == "rewrite"

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "head": self.head,
            "keep": len(self.keep),
            "drop": list(self.drop),
            "add": list(self.add),
        }


def decide_sweep(plan: RetentionPlan, stored: Sequence[str], head: str | None) -> SweepDecision:
    """The one decision of a sweep, from its plan, the snapshots the store keeps (``stored``,
    read with ``head`` before the plan) and the store head. A missing store ref with a live set
    is a ``rewrite`` (the store is created); a head that is not a keepalive chain counts as the
    one snapshot it is (:meth:`ledger.git.store.chain.Store.iter_snapshots`)."""
    if plan.empty:
        return SweepDecision("preserve", head, (), (), ())
    keep = tuple(dict.fromkeys(plan.live))
    if head is not None and set(keep) == set(stored):
        return SweepDecision("unchanged", head, keep, (), ())
    kept = set(keep)
    before = set(stored)
    drop = tuple(sha for sha in dict.fromkeys(stored) if sha not in kept)
    add = tuple(sha for sha in keep if sha not in before)
    return SweepDecision("rewrite", head, keep, drop, add)
