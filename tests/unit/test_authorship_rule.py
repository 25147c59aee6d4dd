"""The authorship rule (issue 33, docs/authorship.md#the-rule), case by case, and the chain that
turns recorded points into records (docs/authorship.md#rebuild)."""

from __future__ import annotations

from ledger.authorship.model import (
    Author,
    AuthorshipIndex,
    Lineage,
    Record,
    absent,
    compact,
    diff_entries,
)
from ledger.authorship.rebuild import Chain, Point, ordered, rebuild

F = 0o100644
X = (b"x.txt", F, "11" * 20)
Y = (b"x.txt", F, "22" * 20)
A = Lineage("A")


def _agent(session: str, entry: str, *keys: tuple[bytes, int, str]) -> Record:
    return Record(f"snap-{session}-{entry}", Author("agent", session, entry), keys)


def _user(*keys: tuple[bytes, int, str]) -> Record:
    return Record("snap-user", Author("user", "A"), keys)


def _rewind(*keys: tuple[bytes, int, str]) -> Record:
    return Record("snap-rewind", Author("rewind", "A", "op1", "restore"), keys)


def test_content_nobody_recorded_is_the_users() -> None:
    verdict = AuthorshipIndex().attribute(X, A)
    assert verdict.attribution == "user" and verdict.producer is None and verdict.warns


def test_this_conversations_agent_is_never_named_even_when_someone_wrote_the_same_later() -> None:
    index = AuthorshipIndex.of([_agent("A", "a1", X), _user(X), _agent("B", "b1", X)])
    verdict = index.attribute(X, A)
    assert verdict.attribution == "this-session" and not verdict.warns
    assert verdict.producer is not None and verdict.producer.author.entry == "a1"


def test_the_latest_of_the_user_and_other_agents_decides() -> None:
    assert AuthorshipIndex.of([_user(X), _agent("B", "b1", X)]).attribute(X, A).attribution == (
        "other-session"
    )
    assert AuthorshipIndex.of([_agent("B", "b1", X), _user(X)]).attribute(X, A).attribution == (
        "user"
    )


def test_content_a_rewind_put_back_last_is_the_rewinds_and_never_warns() -> None:
    restored = AuthorshipIndex.of([_user(X), _agent("B", "b1", Y), _rewind(X)])
    verdict = restored.attribute(X, A)
    assert verdict.attribution == "rewind" and not verdict.warns
    # The user (or another agent) producing it again after the rewind is the last word.
    again = AuthorshipIndex.of([_user(X), _rewind(X), _agent("B", "b1", X)])
    assert again.attribute(X, A).attribution == "other-session"
    alone = AuthorshipIndex.of([_rewind(X)]).attribute(X, A)
    assert alone.attribution == "rewind" and not alone.warns
    # This conversation's agent is still checked first.
    assert AuthorshipIndex.of([_agent("A", "a1", X), _rewind(X)]).attribute(X, A).attribution == (
        "this-session"
    )


def test_a_fork_inherits_its_parents_turns_it_copied_and_no_others() -> None:
    late = (b"x.txt", F, "33" * 20)
    index = AuthorshipIndex.of(
        [_agent("P", "p1", X), _agent("P", "p2", Y), _agent("P", "p9", late)]
    )
    child = Lineage("C", ("P",), frozenset({"p1", "p2"}))
    assert index.attribute(X, child).attribution == "fork-parent"
    assert not index.attribute(Y, child).warns
    after_fork = index.attribute(late, child)
    assert after_fork.attribution == "other-session" and after_fork.warns
    assert index.attribute(late, Lineage("C", ("P",))).attribution == "fork-parent"
    # The parent asks about the child's turns: another session's.
    assert AuthorshipIndex.of([_agent("C", "c1", X)]).attribute(X, Lineage("P")).warns


def test_a_deletion_is_content_too() -> None:
    gone = absent(b"x.txt")
    index = AuthorshipIndex.of([_agent("B", "b1", gone)])
    assert index.attribute(gone, A).attribution == "other-session"
    assert index.attribute(gone, Lineage("B")).attribution == "this-session"


def test_compaction_keeps_every_answer_for_the_referenced_keys_and_the_last_record() -> None:
    records = [
        _user(X, Y),
        _agent("B", "b1", X),
        _agent("B", "b1", X),
        _rewind(Y),
        _agent("A", "a1", Y),
        Record("snap-last", Author("user", "B"), ()),
    ]
    kept = compact(records, {X})
    assert kept[-1].snapshot == "snap-last"
    before, after = AuthorshipIndex.of(records), AuthorshipIndex.of(kept)
    for lineage in (A, Lineage("B"), Lineage("C", ("A",))):
        old, new = before.attribute(X, lineage), after.attribute(X, lineage)
        assert old.attribution == new.attribution
        assert old.producer is not None and new.producer is not None
        assert (old.producer.snapshot, old.producer.author) == (
            new.producer.snapshot,
            new.producer.author,
        )
    assert Y not in after
    assert sum(len(r.entries) for r in kept) == 2  # the user's X and B's latest X


def test_a_capture_compares_with_the_work_trees_latest_point_and_a_turn_with_its_own() -> None:
    trees = {
        "t0": {b"a": (F, "01" * 20)},
        "t1": {b"a": (F, "01" * 20), b"b": (F, "02" * 20)},  # B's turn wrote b
        "t2": {b"a": (F, "03" * 20), b"b": (F, "02" * 20)},  # A's turn wrote a
    }

    def changes(base: str | None, snapshot: str) -> list[tuple[bytes, int, str]]:
        return diff_entries(trees[base] if base else None, trees[snapshot])

    points = [
        Point("t0", "capture", "A", at=1),  # A's prompt starts
        Point("t0", "capture", "B", at=2),  # B's prompt starts
        Point("t1", "agent", "B", "b1", at=3),
        Point("t2", "agent", "A", "a1", at=4),  # compared with A's own point: both a and b
    ]
    records = rebuild(points, changes)
    assert [r.entries for r in records] == [
        ((b"a", F, "01" * 20),),
        (),
        ((b"b", F, "02" * 20),),
        ((b"a", F, "03" * 20), (b"b", F, "02" * 20)),
    ]
    assert records[0].author == Author("user", "A")
    chain = Chain(last="t2")
    assert chain.base_of(Point("t2", "capture", "C")) == "t2"
    assert chain.base_of(Point("t2", "agent", "C", "c1")) == "t2"  # no point of C yet


def test_a_rebuild_orders_sessions_by_time_and_keeps_each_sessions_order() -> None:
    a = [Point("a1", "capture", "A", at=1.0), Point("a2", "agent", "A", "e", at=0.5)]
    b = [Point("b1", "capture", "B", at=0.7), Point("b2", "agent", "B", "f", at=1.5)]
    assert [p.snapshot for p in ordered({"A": a, "B": b})] == ["b1", "a1", "a2", "b2"]


def test_diff_entries_lists_changes_and_deletions_by_path() -> None:
    old = {b"a": (F, "01" * 20), b"b": (F, "02" * 20), b"c": (F, "03" * 20)}
    new = {b"a": (0o100755, "01" * 20), b"c": (F, "03" * 20), b"d": (F, "04" * 20)}
    assert diff_entries(old, new) == [
        (b"a", 0o100755, "01" * 20),
        absent(b"b"),
        (b"d", F, "04" * 20),
    ]
