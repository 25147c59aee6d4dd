"""Property: a restore plan's git-directory check (``_forbidden_paths`` in
ledger/git/restore/plan.py) refuses exactly the paths it refused when it asked every component
of every path (issue 34: it now asks each directory once, and never a component ``lstat``
shows missing or a plain file).

Random work trees of directories, files, git directories (``HEAD``, ``objects/``, ``refs/``),
symlinks to git directories, to directories and to files, and random paths through them (some
missing, some under a file, some through a symlink): the answer equals the per-component
reference below, with the plan's own ``lstat`` guard or without one.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.git.repo import GitRepo, is_git_dir, is_inside
from ledger.git.restore.plan import _forbidden_paths
from ledger.git.restore.safety import WorktreeGuard
from tests.gitkit import one_commit_repo

Layout = str | dict[str, "Layout"]
_NAMES = ["a", "b", "g"]
_KINDS = ["file", "gitdir", "link-gitdir", "link-dir", "link-file", "link-missing"]

layouts = st.recursive(
    st.sampled_from(_KINDS),
    lambda kids: st.dictionaries(st.sampled_from(_NAMES), kids, max_size=3),
    max_leaves=8,
)
paths = st.lists(
    st.lists(st.sampled_from([*_NAMES, "HEAD", "refs", "x"]), min_size=1, max_size=4).map("/".join),
    min_size=1,
    max_size=8,
)
_count = itertools.count()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    return GitRepo.discover(one_commit_repo(tmp_path_factory.mktemp("forbidden") / "repo"))


def _git_dir(path: Path) -> None:
    path.mkdir()
    (path / "HEAD").write_text("ref: refs/heads/main\n")
    (path / "objects").mkdir()
    (path / "refs").mkdir()


def _build(base: Path, node: Layout, elsewhere: Path) -> None:
    if isinstance(node, dict):
        base.mkdir()
        for name, child in node.items():
            _build(base / name, child, elsewhere)
    elif node == "file":
        base.write_text("x\n")
    elif node == "gitdir":
        _git_dir(base)
    else:
        base.symlink_to(
            {
                "link-gitdir": elsewhere / "bare.git",
                "link-dir": elsewhere / "plain",
                "link-file": elsewhere / "file.txt",
                "link-missing": elsewhere / "missing",
            }[node]
        )


def _reference(repo: GitRepo, paths: list[str]) -> list[str]:
    """The check as it was: every component of every path asked (is_git_dir), the first
    missing one ending the path's walk."""
    root = str(repo.root)
    inside = [d for d in {str(repo.git_dir), str(repo.common_dir)} if is_inside(d, repo.root)]
    known: dict[str, bool] = {}

    def in_git_dir(path: str) -> bool:
        parts = path.split("/")
        for i in range(len(parts) + 1):
            rel = "/".join(parts[:i])
            if rel not in known:
                known[rel] = is_git_dir(os.path.join(root, rel) if rel else root)
            if known[rel]:
                return True
        return False

    return [
        p
        for p in paths
        if any(is_inside(root + "/" + p, d) or is_inside(d, root + "/" + p) for d in inside)
        or in_git_dir(p)
    ]


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(layout=st.dictionaries(st.sampled_from(_NAMES), layouts, max_size=3), wanted=paths)
def test_the_git_directory_check_refuses_what_asking_every_component_refused(
    repo: GitRepo, layout: dict[str, Layout], wanted: list[str]
) -> None:
    top = f"w{next(_count)}"
    elsewhere = repo.root.parent / f"elsewhere-{top}"
    elsewhere.mkdir()
    _git_dir(elsewhere / "bare.git")
    (elsewhere / "plain").mkdir()
    _git_dir(elsewhere / "plain" / "g")
    (elsewhere / "file.txt").write_text("f\n")
    _build(repo.root / top, layout, elsewhere)
    planned = [f"{top}/{p}" for p in wanted]
    expected = _reference(repo, planned)
    assert _forbidden_paths(repo, planned) == expected
    guard = WorktreeGuard(repo.root)
    guard.check([], planned, [])  # the plan's guard has seen these paths first
    assert _forbidden_paths(repo, planned, guard) == expected
