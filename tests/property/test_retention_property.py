"""Invariants of the retention plan over arbitrary ledgers (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.ledgerview import LedgerView, Reference
from ledger.retention.plan import DAY_MS, LedgerInput, Policy, plan_retention

NOW = 1_800_000_000_000
SHAS = [f"{n:040x}" for n in range(12)]

reference = st.tuples(
    st.sampled_from(["e1", "e2", "e3", "e4"]),
    st.sampled_from(["binding", "current", "undo", "fork-pending"]),
    st.sampled_from(SHAS),
    st.integers(0, 400),
)


@st.composite
def ledgers(draw: st.DrawFn) -> list[LedgerInput]:
    out = []
    for n in range(draw(st.integers(0, 3))):
        view = LedgerView(f"s{n}", None)
        for i, (entry, kind, sha, age) in enumerate(draw(st.lists(reference, max_size=10))):
            view.references.append(
                Reference(entry, kind, sha, f"r{i}", "rewind-op", None, NOW - age * DAY_MS)
            )
            if kind == "binding":
                view.entry_to_commit[entry] = sha
            elif kind == "current":
                view.latest_current = sha
            elif kind == "undo":
                view.latest_undo = sha
        view.labeled_entries = frozenset(draw(st.sets(st.sampled_from(["e1", "e2", "e3", "e4"]))))
        out.append(LedgerInput(f"s{n}", view))
    return out


policies = st.builds(
    Policy, st.none() | st.integers(0, 5), st.none() | st.floats(0, 500), st.booleans()
)


@settings(max_examples=300, deadline=None)
@given(
    ledgers(),
    policies,
    st.sets(st.sampled_from(SHAS)),
    st.dictionaries(st.sampled_from(SHAS), st.integers(0, 3 * DAY_MS)),
)
def test_the_plan_keeps_what_must_be_kept(
    ledger_list: list[LedgerInput], policy: Policy, missing: set[str], stored_ages: dict[str, int]
) -> None:
    exists = lambda sha: sha not in missing  # noqa: E731
    stored = {sha: NOW - age for sha, age in stored_ages.items()}
    plan = plan_retention(ledger_list, NOW, policy, exists, stored=stored)
    live = set(plan.live)
    referenced = {
        r.snapshot for x in ledger_list for r in x.view.references if r.kind != "fork-pending"
    }
    assert len(plan.live) == len(live), "no duplicates"
    assert all(exists(sha) for sha in plan.live), "only existing commits are live"
    assert live <= referenced | set(stored), "nothing unknown is invented"
    for x in ledger_list:  # every ledger's latest current and undo stay, if they exist
        for sha in (x.view.latest_current, x.view.latest_undo):
            if sha is not None and exists(sha):
                assert sha in live
    if policy.pin_labeled_entries:
        for x in ledger_list:
            for entry in x.view.labeled_entries:
                sha = x.view.entry_to_commit.get(entry)
                if sha is not None and exists(sha):
                    assert sha in live
    if policy.max_snapshots is not None:
        assert (
            sum(1 for d in plan.decisions.values() if d.reason == "recent") <= policy.max_snapshots
        )
    if live:  # young snapshots that no ledger names yet survive any sweep that rewrites
        for sha, committed in stored.items():
            if sha not in referenced and NOW - committed <= DAY_MS and exists(sha):
                assert sha in live
    for sha, decision in plan.decisions.items():
        assert (sha in live) == decision.kept
