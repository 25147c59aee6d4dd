"""Property: the tree diffs that skip equal subtrees say exactly what the whole-tree diffs said
(issue 34, item 3).

- :func:`ledger.git.treediff.diff_values` (the changed paths from our walk, libgit2's counts per
  changed pair of blobs) against libgit2's own tree-to-tree diff of the same two trees: status,
  paths, modes, ids, additions, deletions, binary, sizes, order. Random trees drawn as a common
  base with two overlays (so that most subtrees are shared, some replaced, some removed), with
  regular, executable, symlink and submodule (gitlink) entries, empty, binary, control-byte and
  unterminated contents, files that become directories and back.
- :func:`ledger.git.trees.tree_changes` (levels read in bulk, :mod:`ledger.git.tree_records`)
  against the per-entry reader it replaced, on raw tree objects with hostile names (``.git`` in
  its spellings, ``..``, ``/`` inside a name, a symlinked ``.mailmap``, non-ASCII), names used
  twice, non-canonical modes and case folds: the same changes and the same problems.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pygit2.enums import FileMode

from ledger.git.tree_names import Problem
from ledger.git.treediff import _libgit2_values, diff_values
from ledger.git.trees import Change, TreeReader, tree_changes
from ledger.git.trees import FileMode as TreeMode

Leaf = tuple[str, bytes]
Node = Leaf | dict[str, "Node"] | None

_NAMES = ["a", "b", "a.b", "a-b", "A", "c d", "é", "z"]
_KINDS = ["blob", "blob", "exec", "link", "gitlink"]
_CONTENTS = [
    b"",
    b"one\n",
    b"one\ntwo\n",
    b"one\nTWO\nthree\n",
    b"no newline",
    b"a\x00b\n",
    b"\x01\x02\x03\x04\x05\x06x\n",
    b"one\n" * 40,
]
_MODES = {"blob": FileMode.BLOB, "exec": FileMode.BLOB_EXECUTABLE, "link": FileMode.LINK}

leaves = st.tuples(st.sampled_from(_KINDS), st.sampled_from(_CONTENTS))
nodes = st.recursive(
    leaves, lambda kids: st.dictionaries(st.sampled_from(_NAMES), kids, max_size=4), max_leaves=14
)
trees = st.dictionaries(st.sampled_from(_NAMES), nodes, max_size=5)
overlays = st.recursive(
    st.one_of(leaves, st.none()),
    lambda kids: st.dictionaries(st.sampled_from(_NAMES), kids, max_size=3),
    max_leaves=5,
)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> pygit2.Repository:
    path = tmp_path_factory.mktemp("treediff")
    return pygit2.init_repository(str(path), bare=True)


def _merge(base: dict[str, Node], over: dict[str, Node]) -> dict[str, Node]:
    out = dict(base)
    for name, value in over.items():
        if value is None:
            out.pop(name, None)
        elif isinstance(value, dict) and isinstance(out.get(name), dict):
            below = out[name]
            assert isinstance(below, dict)
            out[name] = _merge(below, value)
        else:
            out[name] = value
    return out


def _write(repo: pygit2.Repository, tree: dict[str, Node]) -> str:
    builder = repo.TreeBuilder()
    for name, node in tree.items():
        if node is None:
            continue
        if isinstance(node, dict):
            if node:
                builder.insert(name, repo[_write(repo, node)].id, FileMode.TREE)
            continue
        kind, content = node
        if kind == "gitlink":
            fake = hashlib.sha1(b"commit " + content).hexdigest()
            builder.insert(name, pygit2.Oid(hex=fake), FileMode.COMMIT)
        else:
            builder.insert(name, repo.create_blob(content), _MODES[kind])
    return str(builder.write())


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(base=trees, left=overlays, right=overlays)
def test_tree_diff_values_equal_libgit2s_whole_tree_diff(
    repo: pygit2.Repository, base: dict[str, Node], left: Node, right: Node
) -> None:
    a = _write(repo, _merge(base, left if isinstance(left, dict) else {}))
    b = _write(repo, _merge(base, right if isinstance(right, dict) else {}))
    ours = diff_values(repo, a, b)
    theirs = _libgit2_values(repo, repo[a], repo[b], find_renames=False)
    assert ours.files == theirs


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"f": ("blob", b"a\nb\n")}, {"f": ("link", b"a\nb\n")}),  # file → symlink
        ({"l": ("link", b"target")}, {"l": ("blob", b"target\nmore\n")}),  # symlink → file
        ({"l": ("link", b"old")}, {"l": ("link", b"new")}),  # symlink retargeted
        ({"g": ("gitlink", b"1")}, {"g": ("gitlink", b"2")}),  # submodule moved
        ({"g": ("gitlink", b"1")}, {"g": ("blob", b"now a file\n")}),  # submodule → file
        ({}, {"g": ("gitlink", b"1")}),  # submodule added
        ({"g": ("gitlink", b"1")}, {}),  # submodule removed
        ({"d": ("blob", b"file\n")}, {"d": {"x": ("blob", b"x\n")}}),  # file → directory
        ({"d": {"x": ("blob", b"x\n")}}, {"d": ("blob", b"file\n")}),  # directory → file
        ({"m": ("blob", b"same\n")}, {"m": ("exec", b"same\n")}),  # mode only
        ({"b": ("blob", b"a\x00b\n")}, {"b": ("blob", b"a\x00c\n")}),  # binary
        ({"e": ("blob", b"")}, {"e": ("blob", b"x\n")}),  # empty → one line
    ],
)
def test_typechanges_submodules_symlinks_and_directories_count_as_libgit2_counts(
    repo: pygit2.Repository, before: dict[str, Node], after: dict[str, Node]
) -> None:
    base: dict[str, Node] = {"keep": {"deep": ("blob", b"unchanged\n")}}
    a = _write(repo, {**base, **before})
    b = _write(repo, {**base, **after})
    ours = diff_values(repo, a, b)
    assert ours.files == _libgit2_values(repo, repo[a], repo[b], find_renames=False)
    assert ours.files, "each case changes something"


# --- tree_changes against the per-entry reader, on raw (possibly hostile) tree objects -------

_RAW_NAMES = [
    b"a",
    b"A",
    b"b",
    b".git",
    b".GIT",
    b"git~1",
    b".git. ",
    b".mailmap",
    b".gitmodules",
    b"..",
    b".",
    b"x/y",
    b"\xc3\xa9",
    b"\xe2\x80\x8c.git",
    b"legit",
]
_RAW_MODES = [0o100644, 0o100644, 0o100755, 0o120000, 0o160000, 0o100664, 0o100600, 0o644]
RawNode = tuple[int, bytes] | list[tuple[bytes, "RawNode"]]
raw_leaves = st.tuples(st.sampled_from(_RAW_MODES), st.sampled_from(_CONTENTS[:4]))
raw_nodes = st.recursive(
    raw_leaves,
    lambda kids: st.lists(st.tuples(st.sampled_from(_RAW_NAMES), kids), max_size=4),
    max_leaves=10,
)
raw_trees = st.lists(st.tuples(st.sampled_from(_RAW_NAMES), raw_nodes), max_size=5)


def _write_raw(repo: pygit2.Repository, entries: list[tuple[bytes, RawNode]], zero: bool) -> str:
    """A tree object holding ``entries`` as given (any order, names used twice), directory modes
    spelt ``040000`` when ``zero`` (git's old spelling)."""
    data = b""
    for name, node in entries:
        if isinstance(node, list):
            oid = _write_raw(repo, node, zero)
            mode = b"040000" if zero else b"40000"
        else:
            mode = b"%o" % node[0]
            oid = (
                hashlib.sha1(node[1]).hexdigest()
                if node[0] == 0o160000
                else str(repo.create_blob(node[1]))
            )
        data += mode + b" " + name + b"\0" + bytes.fromhex(oid)
    return str(repo.odb.write(pygit2.enums.ObjectType.TREE, data))


def _reference(
    repo: pygit2.Repository,
    old: str,
    new: str,
    *,
    ignore_case: bool,
    problems: list[Problem] | None,
) -> list[Change]:
    """The per-entry walk tree_changes was before levels were read in bulk."""
    reader = TreeReader(repo, ignore_case=ignore_case)
    out: list[tuple[bytes, Change]] = []
    stack: list[tuple[bytes, str | None, str | None]] = [(b"", old, new)]
    while stack:
        prefix, a_id, b_id = stack.pop()
        if a_id is not None and a_id == b_id:
            continue
        a_entries = reader.entries(a_id, prefix, None) if a_id else {}
        b_entries = reader.entries(b_id, prefix, problems) if b_id else {}
        for name in a_entries.keys() | b_entries.keys():
            a, b = a_entries.get(name), b_entries.get(name)
            if a == b:
                continue
            path = prefix + name
            a_tree = a is not None and a.mode == TreeMode.TREE
            b_tree = b is not None and b.mode == TreeMode.TREE
            if a_tree or b_tree:
                stack.append(
                    (
                        path + b"/",
                        a.oid if a is not None and a_tree else None,
                        b.oid if b is not None and b_tree else None,
                    )
                )
            a_leaf = a if a is not None and not a_tree else None
            b_leaf = b if b is not None and not b_tree else None
            if a_leaf is not None or b_leaf is not None:
                out.append((path, Change(os.fsdecode(path), a_leaf, b_leaf)))
    out.sort(key=lambda item: item[0])
    return [change for _, change in out]


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    base=raw_trees,
    extra=raw_trees,
    zero=st.booleans(),
    ignore_case=st.booleans(),
    validate=st.booleans(),
)
def test_tree_changes_read_in_bulk_equal_the_per_entry_reader(
    repo: pygit2.Repository,
    base: list[tuple[bytes, RawNode]],
    extra: list[tuple[bytes, RawNode]],
    zero: bool,
    ignore_case: bool,
    validate: bool,
) -> None:
    old = _write_raw(repo, base, False)
    new = _write_raw(repo, [*base[: len(base) // 2], *extra], zero)
    expected_problems: list[Problem] = []
    found_problems: list[Problem] = []
    expected = _reference(
        repo, old, new, ignore_case=ignore_case, problems=expected_problems if validate else None
    )
    found = tree_changes(
        repo,
        old,
        new,
        validate=validate,
        ignore_case=ignore_case,
        problems=found_problems if validate else None,
    )
    assert found == expected
    # The order of the levels a walk visits was never fixed (names come out of a set), so the
    # problems are compared as a collection; within a level they stay in entry order.
    assert sorted(found_problems, key=repr) == sorted(expected_problems, key=repr)
    assert bool(found_problems) == bool(expected_problems)


def test_a_missing_old_tree_still_raises(repo: pygit2.Repository, tmp_path: Path) -> None:
    new = _write_raw(repo, [(b"a", (0o100644, b"x\n"))], False)
    with pytest.raises(KeyError):
        tree_changes(repo, "1" * 40, new)
