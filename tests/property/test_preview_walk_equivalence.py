"""Property: a ``/rewind`` preview's changes composed from the list's neighbouring diffs are the
restore plan's checked walk, exactly (issue 34: any preview ≤ 200 ms).

- :func:`ledger.engine.preview_walk.compose` of the neighbouring diffs of a chain of random
  trees (a common base with overlays: files that change, appear, disappear, become directories
  and back; symlinks, executables, gitlinks) equals :func:`ledger.git.trees.tree_changes` from
  the newest tree to the oldest with ``validate`` (no problem on those safe names), and
  :func:`ledger.git.restore.checked_walks.verified` accepts it (trees as git writes them:
  no empty directory).
- :func:`~ledger.git.restore.checked_walks.verified` never accepts what the checked walk would
  refuse: on raw tree objects with hostile names (``.git`` in its spellings, ``..``, ``/`` in
  a name, a symlinked ``.mailmap``, non-ASCII), names used twice, unsupported modes and case
  folds, whenever it says ``True`` the walk finds no problem and the same changes (a doubt
  is ``False``, and the preview walks the trees).
"""

from __future__ import annotations

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.engine.preview_walk import compose
from ledger.git.restore.checked_walks import verified
from ledger.git.tree_names import Problem
from ledger.git.trees import tree_changes
from tests.property.test_treediff_equivalence import (
    _NAMES,
    RawNode,
    _merge,
    _write,
    _write_raw,
    overlays,
    raw_trees,
    trees,
)

layers = st.dictionaries(st.sampled_from(_NAMES), overlays, max_size=4)
"""What changes between two neighbouring trees (a name set to ``None`` is removed)."""


def _as_git_writes(tree: dict) -> dict:
    """The tree without empty directories, as git writes trees (captures are written by git)."""
    out = {}
    for name, node in tree.items():
        if isinstance(node, dict):
            node = _as_git_writes(node)
            if not node:
                continue
        if node is not None:
            out[name] = node
    return out


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> pygit2.Repository:
    path = tmp_path_factory.mktemp("previewwalk")
    return pygit2.init_repository(str(path), bare=True)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(base=trees, steps=st.lists(layers, min_size=0, max_size=5), now=layers)
def test_changes_composed_from_neighbouring_diffs_equal_the_checked_walk(
    repo: pygit2.Repository, base: dict, steps: list[dict], now: dict
) -> None:
    # The chain, oldest first: the point previewed, the later points, then the work tree now.
    chain = [_write(repo, _as_git_writes(base))]
    state = base
    for over in steps:
        state = _merge(state, over)
        chain.append(_write(repo, _as_git_writes(state)))
    current = _write(repo, _as_git_writes(_merge(state, now)))
    first = tree_changes(repo, chain[-1], current)  # newest point → now, as the list reads it
    neighbours = [
        tree_changes(repo, older, newer)
        for older, newer in zip(reversed(chain[:-1]), reversed(chain[1:]), strict=True)
    ]
    problems: list[Problem] = []
    expected = tree_changes(repo, current, chain[0], validate=True, problems=problems)
    assert problems == []
    found = compose(first, neighbours)
    assert found == expected
    assert current == chain[0] or verified(repo, current, chain[0], found, False)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(base=raw_trees, extra=raw_trees, zero=st.booleans(), ignore_case=st.booleans())
def test_a_target_is_verified_only_when_the_checked_walk_finds_no_problem(
    repo: pygit2.Repository,
    base: list[tuple[bytes, RawNode]],
    extra: list[tuple[bytes, RawNode]],
    zero: bool,
    ignore_case: bool,
) -> None:
    current = _write_raw(repo, base, False)
    target = _write_raw(repo, [*base[: len(base) // 2], *extra], zero)
    known = tree_changes(repo, current, target)  # unchecked, as the neighbouring diffs are
    problems: list[Problem] = []
    walked = tree_changes(
        repo, current, target, validate=True, ignore_case=ignore_case, problems=problems
    )
    accepted = current != target and verified(repo, current, target, known, ignore_case)
    if accepted:
        assert problems == []
        assert walked == known
