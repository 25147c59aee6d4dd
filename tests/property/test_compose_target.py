"""Property: the agent tool's composed restore target (docs/pi.md#the-agents-rewind-tool) is the
point's tree with exactly the left-alone paths as they are now, and nothing else moved.

Random "now" and "point" trees over a small set of paths (files, executables, files that become
directories and back), a random subset of the changed paths kept as they are now: the composed
tree, diffed against the point, changes only kept paths and the taken paths a kept one blocks (a
file where the other side has a directory: the kept file wins); diffed against now, changes only
taken paths that nothing blocks; every kept or blocked path holds exactly its current entry (or
stays absent). The file/directory case was found by this test. Real git
objects (pygit2 in a temporary repository), no mocks.
"""

from __future__ import annotations

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.git.repo import GitRepo
from ledger.git.restore.compose import keep_as_now
from ledger.git.trees import entry_at, leaf_changes
from tests.gitkit import git

PATHS = ["a", "b", "d/x", "d/y", "d/e/z", "a/inner", "q"]
CONTENTS = [b"", b"one\n", b"two\n", b"\x00bin"]


def _tree(repo: pygit2.Repository, files: dict[str, tuple[int, bytes]]) -> str:
    index = pygit2.Index()
    for path, (mode, data) in sorted(files.items()):
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), mode))
    return str(index.write_tree(repo))


def _files() -> st.SearchStrategy[dict[str, tuple[int, bytes]]]:
    entry = st.tuples(st.sampled_from([0o100644, 0o100755]), st.sampled_from(CONTENTS))

    def valid(files: dict[str, tuple[int, bytes]]) -> bool:
        # a path cannot be a file and a directory at once
        return not any(p != q and q.startswith(p + "/") for p in files for q in files)

    return st.dictionaries(st.sampled_from(PATHS), entry, max_size=len(PATHS)).filter(valid)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    base = tmp_path_factory.mktemp("compose")
    git(base, "init", "-q")
    return GitRepo.discover(base)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    now=_files(),
    point=_files(),
    pick=st.lists(st.booleans(), min_size=len(PATHS), max_size=len(PATHS)),
)
def test_the_composed_target_moves_only_the_paths_not_kept(
    repo: GitRepo,
    now: dict[str, tuple[int, bytes]],
    point: dict[str, tuple[int, bytes]],
    pick: list[bool],
) -> None:
    raw = repo.pygit2
    now_tree, point_tree = _tree(raw, now), _tree(raw, point)
    changes = leaf_changes(repo, now_tree, point_tree) or []
    kept = [c for c in changes if pick[PATHS.index(c.path)]]
    taken = {c.path for c in changes} - {c.path for c in kept}
    composed = keep_as_now(repo, point_tree, [(c.path, c.old) for c in kept])
    kept_paths = {c.path for c in kept}
    # A taken path that a kept one blocks (a kept file where the point has a directory, or a
    # kept file inside a directory where the point has a file) cannot be restored: the user's
    # file wins, and the blocked path stays as it is now.
    present = {c.path for c in kept if c.old is not None}  # a kept absence blocks nothing
    blocked = {
        t for t in taken if any(t.startswith(k + "/") or k.startswith(t + "/") for k in present)
    }
    # Only kept and blocked paths differ from the point ...
    from_point = {c.path for c in leaf_changes(repo, point_tree, composed) or []}
    assert from_point <= kept_paths | blocked
    # ... and every path a restore to it would change from now is one that was taken.
    from_now = {c.path for c in leaf_changes(repo, now_tree, composed) or []}
    assert from_now <= taken - blocked
    for change in kept:
        assert entry_at(repo, composed, change.path) == change.old
    for change in changes:
        if change.path in blocked:
            assert entry_at(repo, composed, change.path) == change.old
