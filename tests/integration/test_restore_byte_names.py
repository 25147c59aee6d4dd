"""Restores of paths whose names are not UTF-8, through the git layer (issue 32, item 5).

Paths are bytes from the tree to the work tree: the ignore checks ask git with the exact bytes
(``./``-prefixed, so a leading ``:`` is no pathspec magic), trees less some paths are written
from raw entries. These tests fail on the code before the fix, where libgit2 was asked
(``path_is_ignored`` and ``TreeBuilder`` take only UTF-8 names) and a target rule ``:!secret``
ended ``git check-ignore``; the leaf look-up test guards pygit2's byte-exact ``tree[path]``
(it encodes a path with ``os.fsencode``), which :func:`ledger.git.trees.entry_at` relies on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pygit2

from ledger.git.repo import GitRepo
from ledger.git.trees import entry_at, tree_without
from tests.gitkit import one_commit_repo
from tests.snapshotkit import restore, snapshot


def raw(repo: Path, name: bytes) -> bytes:
    return os.fsencode(repo) + b"/" + name


def write(repo: Path, name: bytes, data: bytes) -> None:
    path = raw(repo, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def read(repo: Path, name: bytes) -> bytes | None:
    try:
        with open(raw(repo, name), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def ls_tree(repo: Path, tree: str) -> list[bytes]:
    out = subprocess.run(
        ["git", "ls-tree", "-r", "-z", "--name-only", tree],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    return [p for p in out.split(b"\0") if p]


def test_a_tree_less_non_utf8_paths_is_what_git_lists_less_them(repo: Path) -> None:
    for name in (b"caf\xe9.txt", b"d\xff/x/f", b"d\xff/g", b"keep/h", b"keep/\xfei"):
        write(repo, name, b"data " + name)
    tree = str(pygit2.Repository(str(repo)).get(snapshot(repo)).tree_id)  # type: ignore[union-attr]
    r = GitRepo.discover(repo).pygit2
    everything = ls_tree(repo, tree)
    for removed in (
        [b"caf\xe9.txt"],
        [b"d\xff/x/f"],
        [b"d\xff/"],
        [b"keep/\xfei", b"d\xff/g"],
        [b"caf\xe9.txt", b"d\xff/", b"keep/", b"README.md"],
    ):
        pruned = tree_without(r, tree, [os.fsdecode(p) for p in removed])
        expected = [
            p
            for p in everything
            if not any(p == x or (x.endswith(b"/") and p.startswith(x)) for x in removed)
        ]
        assert ls_tree(repo, pruned) == expected, removed
    assert tree_without(r, tree, ["absent\udce9"]) == tree
    subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=repo, check=True)


def test_a_leaf_is_found_by_its_raw_name(repo: Path) -> None:
    write(repo, b"d\xff/x/f", b"deep")
    tree = str(pygit2.Repository(str(repo)).get(snapshot(repo)).tree_id)  # type: ignore[union-attr]
    git_repo = GitRepo.discover(repo)
    found = entry_at(git_repo, tree, "d\udcff/x/f")
    assert found is not None and found.oid == str(pygit2.hash(b"deep"))
    assert entry_at(git_repo, tree, "d\udcff/x") is None  # a directory
    assert entry_at(git_repo, tree, "d\udcff/x/f/g") is None
    assert entry_at(git_repo, tree, "d\udcfe/x/f") is None


def test_the_targets_gitignore_in_a_non_utf8_directory_keeps_a_file_it_ignores(
    repo: Path,
) -> None:
    write(repo, b"d\xe9/.gitignore", b"secret\n")
    write(repo, b"d\xe9/x.txt", b"tracked\n")
    target = snapshot(repo)
    os.unlink(raw(repo, b"d\xe9/.gitignore"))
    write(repo, b"d\xe9/secret", b"the user's secret, visible now\n")

    outcome = restore(repo, target)

    assert read(repo, b"d\xe9/.gitignore") == b"secret\n"
    assert read(repo, b"d\xe9/secret") == b"the user's secret, visible now\n"
    assert "d\udce9/secret" in outcome.plan.skipped


def test_a_name_starting_with_a_colon_is_no_pathspec_magic(repo: Path) -> None:
    write(repo, b".gitignore", b":!secret\n")
    write(repo, b":!x.txt", b"colon\n")
    target = snapshot(repo)
    os.unlink(raw(repo, b".gitignore"))
    os.unlink(raw(repo, b":!x.txt"))
    write(repo, b":!secret", b"ignored by the target's rule\n")

    outcome = restore(repo, target)

    assert read(repo, b":!x.txt") == b"colon\n"
    assert read(repo, b":!secret") == b"ignored by the target's rule\n"
    assert outcome.plan.skipped == (":!secret",)


def test_a_path_below_a_symlink_the_restore_replaces_is_judged_by_the_rules_above_it(
    repo: Path, tmp_path: Path
) -> None:
    write(repo, b"top\xe9/.gitignore", b".gitignore\n")  # ignores itself: never in a snapshot
    write(repo, b"top\xe9/dir/a.txt", b"a\n")
    write(repo, b"top\xe9/dir/b.log", b"b\n")
    write(repo, b"top\xe9/dir/c.tmp", b"c\n")
    target = snapshot(repo)
    shutil.rmtree(raw(repo, b"top\xe9/dir"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, raw(repo, b"top\xe9/dir"))
    # git refuses to answer for a path beyond a symlink; the rules above it apply to it now
    write(repo, b"top\xe9/.gitignore", b".gitignore\n*.log\n")
    with open(repo / ".git" / "info" / "exclude", "ab") as f:
        f.write(b"*.tmp\n")

    outcome = restore(repo, target)

    assert not os.path.islink(raw(repo, b"top\xe9/dir"))
    assert read(repo, b"top\xe9/dir/a.txt") == b"a\n"
    assert read(repo, b"top\xe9/dir/b.log") is None  # ignored now: never written
    assert read(repo, b"top\xe9/dir/c.tmp") is None
    assert outcome.plan.skipped == ("top\udce9/dir/b.log", "top\udce9/dir/c.tmp")
    assert os.listdir(elsewhere) == []


def test_a_repository_under_a_directory_named_with_any_bytes_is_found_and_restored(
    tmp_path: Path,
) -> None:
    # U+2028 and \x1c end a line for str.splitlines(), and \xe9 is no UTF-8: the work tree's
    # path as git prints it must be read as one line of bytes
    repo = one_commit_repo(tmp_path / "line\u2028sep\x1c caf\udce9" / "repo")
    assert GitRepo.discover(repo).root == repo
    write(repo, b"caf\xe9.txt", b"one\n")
    target = snapshot(repo)
    write(repo, b"caf\xe9.txt", b"two\n")

    restore(repo, target)

    assert read(repo, b"caf\xe9.txt") == b"one\n"
