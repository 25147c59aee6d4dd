"""Property: the tree levels a ``/rewind`` preview keeps (ledger/git/restore/checked_walks.py,
issue 34: the first preview of a fresh bridge ≤ 200 ms) change no answer.

- A level's verdict, judged once and kept, is the checked walk's: plainly safe or, entry by
  entry, the rules :class:`ledger.git.trees.TreeReader` applies with validation
  (``_entries_safe``), equal to "the walk's reader reports no problem" on raw levels with
  hostile names (``.git`` in its spellings, ``..``, ``/``, a symlinked ``.mailmap``,
  non-ASCII), names used twice, unsupported modes and case folds.
- :func:`~ledger.git.restore.checked_walks.verified` answers the same with the levels read
  and judged ahead (:func:`~ledger.git.restore.checked_walks.prefill`, the bridge's warm-up)
  as with nothing kept, on the same hostile trees.
"""

from __future__ import annotations

import pygit2
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ledger.git.restore import checked_walks
from ledger.git.tree_names import Problem
from ledger.git.tree_records import plainly_safe, records
from ledger.git.trees import Change, TreeReader, tree_changes
from tests.property.test_treediff_equivalence import _CONTENTS, RawNode, _write_raw, raw_trees

_NEAR_SAFE_NAMES = [b"a", b"A", b"b", b"legit", b"digit.txt", b".mailmap", b"\xc3\xa9", b"Git"]
_NEAR_SAFE_MODES = [0o100644, 0o100755, 0o120000, 0o160000, 0o100664]
near_safe_levels = st.lists(
    st.tuples(
        st.sampled_from(_NEAR_SAFE_NAMES),
        st.tuples(st.sampled_from(_NEAR_SAFE_MODES), st.sampled_from(_CONTENTS[:2])),
    ),
    max_size=5,
    unique_by=lambda entry: entry[0],
)
"""Levels that are mostly safe but not plainly so: names holding "git", a case fold, a
symlinked ``.mailmap``, non-ASCII, one unsupported mode, no name twice (the hostile ones
are rare here)."""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> pygit2.Repository:
    path = tmp_path_factory.mktemp("checkedlevels")
    return pygit2.init_repository(str(path), bare=True)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(level=st.one_of(raw_trees, near_safe_levels), zero=st.booleans(), ignore_case=st.booleans())
def test_a_kept_levels_verdict_is_the_walks_entry_rules(
    repo: pygit2.Repository, level: list[tuple[bytes, RawNode]], zero: bool, ignore_case: bool
) -> None:
    tree = _write_raw(repo, level, zero)
    kind, data = repo.odb.read(tree)
    parsed = records(data)
    assume(parsed is not None)
    assert parsed is not None
    problems: list[Problem] = []
    TreeReader(repo, ignore_case=ignore_case).entries(tree, b"", problems)
    judged = plainly_safe(parsed, ignore_case=ignore_case) or checked_walks._entries_safe(
        parsed, ignore_case
    )
    assert judged == (problems == [])


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(base=raw_trees, extra=raw_trees, zero=st.booleans(), ignore_case=st.booleans())
def test_a_previews_check_answers_the_same_from_levels_judged_ahead(
    repo: pygit2.Repository,
    base: list[tuple[bytes, RawNode]],
    extra: list[tuple[bytes, RawNode]],
    zero: bool,
    ignore_case: bool,
) -> None:
    current = _write_raw(repo, base, False)
    target = _write_raw(repo, [*base[: len(base) // 2], *extra], zero)
    assume(current != target)
    known = tree_changes(repo, current, target)  # unchecked, as the neighbouring diffs are
    checked_walks.forget()
    fresh = checked_walks.verified(repo, current, target, known, ignore_case)
    checked_walks.forget()
    checked_walks.prefill(repo, [(target, current, known)], ignore_case)
    assert checked_walks.verified(repo, current, target, known, ignore_case) == fresh
    # And once more from what the first answer kept.
    assert checked_walks.verified(repo, current, target, known, ignore_case) == fresh
    checked_walks.forget()


@settings(max_examples=500, deadline=None)
@given(paths=st.lists(st.text(alphabet="ab/.", max_size=8), max_size=8))
def test_the_directories_above_the_changes_are_each_components_parents(paths: list[str]) -> None:
    changes = [Change(path, None, None) for path in paths]
    expected: dict[bytes, set[bytes]] = {}
    for path in paths:  # every leading component, named in the directory holding it
        parts = path.encode().split(b"/")
        for i in range(1, len(parts)):
            expected.setdefault(b"/".join(parts[: i - 1]), set()).add(parts[i - 1])
    assert checked_walks._directories(changes) == expected
