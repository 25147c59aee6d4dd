"""A tree diff never reads a subtree both sides share (issue 34, item 3).

The proof is a shared subtree whose object is gone: a walk that skips equal subtree ids never
asks for it, so the diff of the one changed file still answers; libgit2's whole-tree diff (what
:func:`ledger.git.treediff.diff_values` ran before) reads every entry of both trees and fails.
The same holds for the ``/rewind`` list's unchecked walks through :func:`tree_changes`.
"""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode

from ledger.git.treediff import _libgit2_values, diff_values
from ledger.git.trees import tree_changes


def _shared_subtree_gone(tmp_path: Path) -> tuple[pygit2.Repository, str, str]:
    repo = pygit2.init_repository(str(tmp_path / "repo"), bare=True)
    inner = repo.TreeBuilder()
    for i in range(50):
        inner.insert(f"f{i:02d}.txt", repo.create_blob(f"file {i}\n".encode()), FileMode.BLOB)
    shared = inner.write()
    trees = []
    for text in (b"one\n", b"one\ntwo\n"):
        top = repo.TreeBuilder()
        top.insert("big", shared, FileMode.TREE)
        top.insert("small.txt", repo.create_blob(text), FileMode.BLOB)
        trees.append(str(top.write()))
    loose = Path(repo.path) / "objects" / str(shared)[:2] / str(shared)[2:]
    loose.unlink()  # the shared subtree's object is gone
    return repo, trees[0], trees[1]


def test_a_one_file_diff_does_not_read_the_subtree_both_sides_share(tmp_path: Path) -> None:
    repo, old, new = _shared_subtree_gone(tmp_path)
    deltas = diff_values(repo, old, new)
    assert [(f.status, f.new_path, f.additions, f.deletions) for f in deltas.files] == [
        ("modified", "small.txt", 1, 0)
    ]
    assert [c.path for c in tree_changes(repo, old, new)] == ["small.txt"]
    assert [c.path for c in tree_changes(repo, old, new, validate=True, problems=[])] == [
        "small.txt"
    ]


def test_libgit2s_whole_tree_diff_reads_it(tmp_path: Path) -> None:
    """What diff_values did before: it needs the shared subtree (the reason it cost 11–37 ms
    for one changed file at 100k files)."""
    repo, old, new = _shared_subtree_gone(tmp_path)
    with pytest.raises((KeyError, pygit2.GitError)):
        _libgit2_values(repo, repo[old], repo[new], find_renames=False)
