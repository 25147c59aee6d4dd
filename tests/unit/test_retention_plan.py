"""The retention plan's rules, each on its own (docs/design.md#retention-plan)."""

from __future__ import annotations

from ledger.ledgerview import LedgerView, Reference
from ledger.retention.plan import DAY_MS, LedgerInput, Policy, plan_retention

NOW = 1_800_000_000_000


def sha(n: int) -> str:
    return f"{n:040x}"


def ledger(
    name: str,
    refs: list[tuple[str, str, str, int]],
    *,
    current: str | None = None,
    undo: str | None = None,
    labeled: dict[str, str] | None = None,
) -> LedgerInput:
    """refs: (entry, kind, snapshot, age in days)."""
    view = LedgerView(name, None)
    for i, (entry, kind, snapshot, age_days) in enumerate(refs):
        ms = NOW - int(age_days * DAY_MS)
        view.references.append(Reference(entry, kind, snapshot, f"r{i}", "rewind-turn", None, ms))  # type: ignore[arg-type]
        if kind == "binding":
            view.entry_to_commit[entry] = snapshot
    view.latest_current, view.latest_undo = current, undo
    view.labeled_entries = frozenset(labeled or {})
    return LedgerInput(name, view)


def everything(_: str) -> bool:
    return True


def test_no_limits_keep_every_referenced_snapshot() -> None:
    plan = plan_retention(
        [ledger("a", [("e1", "binding", sha(1), 400), ("e2", "binding", sha(2), 1)])],
        NOW,
        Policy(),
        everything,
    )
    assert set(plan.live) == {sha(1), sha(2)}
    assert {d.reason for d in plan.decisions.values()} == {"recent"}


def test_snapshots_older_than_max_age_are_dropped() -> None:
    plan = plan_retention(
        [ledger("a", [("e1", "binding", sha(1), 31), ("e2", "binding", sha(2), 29)])],
        NOW,
        Policy(max_age_days=30),
        everything,
    )
    assert plan.live == [sha(2)]
    assert plan.decisions[sha(1)].reason == "dropped: too old"


def test_age_is_the_latest_reference_of_a_snapshot() -> None:
    refs = [("e1", "binding", sha(1), 100), ("e9", "current", sha(1), 2)]
    plan = plan_retention([ledger("a", refs)], NOW, Policy(max_age_days=30), everything)
    assert plan.live == [sha(1)]


def test_max_snapshots_keeps_the_newest() -> None:
    refs = [(f"e{i}", "binding", sha(i), i) for i in range(1, 6)]
    plan = plan_retention([ledger("a", refs)], NOW, Policy(max_snapshots=2), everything)
    assert plan.live == [sha(1), sha(2)]
    assert plan.count("dropped: over maxSnapshots") == 3


def test_pins_survive_any_limit_in_the_reference_order() -> None:
    refs = [(f"e{i}", "binding", sha(i), 500 + i) for i in range(1, 6)]
    a = ledger("a", refs, current=sha(3), undo=sha(4), labeled={"e5": "keep"})
    plan = plan_retention(
        [a], NOW, Policy(max_snapshots=0, max_age_days=0, pin_labeled_entries=True), everything
    )
    assert plan.live == [sha(5), sha(3), sha(4)]
    assert [plan.decisions[s].reason for s in plan.live] == [
        "pinned: label",
        "pinned: current",
        "pinned: undo",
    ]


def test_labeled_entries_are_not_pinned_unless_asked() -> None:
    a = ledger("a", [("e1", "binding", sha(1), 500)], labeled={"e1": "x"})
    assert plan_retention([a], NOW, Policy(max_snapshots=0), everything).live == []


def test_every_ledgers_current_and_undo_are_pinned() -> None:
    a = ledger("a", [("e1", "binding", sha(1), 1)], current=sha(1))
    b = ledger("b", [("f1", "binding", sha(2), 900)], current=sha(2), undo=sha(3))
    plan = plan_retention([a, b], NOW, Policy(max_snapshots=0), everything)
    assert plan.live == [sha(1), sha(2), sha(3)]


def test_an_empty_live_set_means_leave_the_store_alone() -> None:
    plan = plan_retention([], NOW, Policy(max_snapshots=10), everything)
    assert plan.empty and plan.live == []


def test_missing_commits_are_left_out_of_the_live_set() -> None:
    gone = {sha(2), sha(3)}
    a = ledger("a", [("e1", "binding", sha(1), 1), ("e2", "binding", sha(2), 1)], current=sha(3))
    plan = plan_retention([a], NOW, Policy(), lambda s: s not in gone)
    assert plan.live == [sha(1)]
    assert plan.decisions[sha(2)].reason == "dropped: missing"
    assert sha(3) not in plan.live


def test_fork_pending_records_are_not_references() -> None:
    a = ledger("a", [("e1", "fork-pending", sha(7), 0)])
    assert plan_retention([a], NOW, Policy(), everything).empty


def test_tick_runs_before_each_unit_of_work_so_a_budget_can_stop_it() -> None:
    ticks: list[int] = []
    a = ledger("a", [("e1", "binding", sha(1), 1)], current=sha(1))
    plan_retention([a, a], NOW, Policy(), everything, tick=lambda: ticks.append(1))
    assert len(ticks) >= 3
