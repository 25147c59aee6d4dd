"""Hostile snapshots: trees written object by object with pygit2 (as an attacker who can write
objects could) are refused before anything is written, with a reason and the offending path.

Each case starts from a snapshot of a small repository and adds hostile entries next to a
legitimate change, so that "refused" also means "the legitimate part was not applied either".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest

from ledger.errors import UnsafeRestoreError
from ledger.git.repo import GitRepo
from ledger.git.restore.run import plan_restore
from ledger.git.store.chain import STORE_REF
from tests.gitkit import files, git, user_state, write
from tests.snapshotkit import NO_PROTECTION, restore, snapshot

TREE, BLOB, EXEC, LINK, GITLINK = 0o040000, 0o100644, 0o100755, 0o120000, 0o160000
Entries = list[tuple[int, bytes, str]]


class Builder:
    """Raw tree and commit objects, with no validation at all."""

    def __init__(self, repo: Path) -> None:
        self.r = pygit2.Repository(str(repo))

    def blob(self, data: bytes) -> str:
        return str(self.r.create_blob(data))

    def tree(self, entries: Entries) -> str:
        raw = b"".join(
            b"%o %s\0" % (mode, name) + bytes.fromhex(oid) for mode, name, oid in entries
        )
        return str(self.r.odb.write(pygit2.enums.ObjectType.TREE, raw))

    def entries(self, tree: str) -> Entries:
        return [(e.filemode, e.raw_name, str(e.id)) for e in self.r.get(tree)]

    def commit(self, tree: str) -> str:
        who = b"Rewind Test <rewind@example.com> 1700000000 +0000"
        raw = b"tree %s\nauthor %s\ncommitter %s\n\npi rewind snapshot\n" % (
            tree.encode(),
            who,
            who,
        )
        return str(self.r.odb.write(pygit2.enums.ObjectType.COMMIT, raw))


@pytest.fixture
def world(repo: Path, tmp_path: Path) -> tuple[Path, Path, Builder, str]:
    """A repository with a snapshot (whose root tree is returned) and a directory outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside the repository\n")
    write(repo, "src/app.py", "print('point')\n")
    point = snapshot(repo)
    write(repo, "src/app.py", "print('latest')\n")  # the legitimate change a restore would undo
    b = Builder(repo)
    root = str(b.r.get(point).tree_id)
    return repo, outside, b, root


def _with(b: Builder, root: str, *extra: tuple[int, bytes, str]) -> str:
    return b.commit(b.tree(b.entries(root) + list(extra)))


def _nest(b: Builder, names: list[bytes], leaf: tuple[int, bytes, str]) -> tuple[int, bytes, str]:
    """``names[0]/names[1]/…/leaf`` as nested tree entries."""
    entry = leaf
    for name in reversed(names):
        entry = (TREE, name, b.tree([entry]))
    return entry


Case = Callable[[Builder, str, Path], tuple[str, str]]
"""(builder, root tree, outside dir) -> (hostile commit, expected reason fragment)."""


def dotdot_top(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    evil = b.blob(b"escaped\n")
    return _with(b, root, _nest(b, [b".."], (BLOB, b"escaped.txt", evil))), "'..'"


def dotdot_deep(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    evil = b.blob(b"escaped\n")
    return (_with(b, root, _nest(b, [b"a", b"..", b"..", b".."], (BLOB, b"x.txt", evil))), "'..'")


def dot(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    return _with(b, root, _nest(b, [b"."], (BLOB, b"x.txt", b.blob(b"x")))), "'..' or '.'"


def dotgit_hook(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    hook = b.blob(b"#!/bin/sh\ntouch /tmp/pwned\n")
    return _with(b, root, _nest(b, [b".git", b"hooks"], (EXEC, b"post-checkout", hook))), ".git"


def dotgit_config(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    cfg = b.blob(b"[core]\n\tfsmonitor = touch /tmp/pwned\n")
    return _with(b, root, _nest(b, [b".git"], (BLOB, b"config", cfg))), ".git"


@pytest.mark.parametrize(
    "spelling",
    [
        b".GIT",
        b".Git",
        b"git~1",
        b".git.",
        b".git ",
        b".git::$INDEX_ALLOCATION",
        ".g\u200cit".encode(),
    ],
)
def test_every_spelling_of_dotgit_is_refused(
    world: tuple[Path, Path, Builder, str], spelling: bytes
) -> None:
    repo, outside, b, root = world
    commit = _with(b, root, _nest(b, [b"sub", spelling], (BLOB, b"config", b.blob(b"x"))))
    _assert_refused(repo, outside, commit, ".git")


def dotgit_file(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    return _with(b, root, (BLOB, b".git", b.blob(b"gitdir: /tmp/elsewhere\n"))), ".git"


def absolute(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    name = os.fsencode(outside / "pwned.txt")
    return _with(b, root, (BLOB, name, b.blob(b"absolute\n"))), "absolute path"


def slash_in_name(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    return _with(b, root, (BLOB, b"../escaped.txt", b.blob(b"x"))), "'/' inside a name"


def empty_name(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    return _with(b, root, (BLOB, b"", b.blob(b"x"))), "empty name"


def duplicate_symlink_and_dir(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    link = b.blob(os.fsencode(outside))
    inner = b.tree([(BLOB, b"pwned.txt", b.blob(b"through the link\n"))])
    return _with(b, root, (LINK, b"escape", link), (TREE, b"escape", inner)), "used twice"


def symlinked_gitattributes(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    link = b.blob(os.fsencode(outside / "attributes"))
    return _with(b, root, (LINK, b".gitattributes", link)), "symlinked .gitattributes"


def symlinked_gitmodules(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    return _with(b, root, (LINK, b".gitmodules", b.blob(b"/etc/passwd"))), "symlinked .gitmodules"


def bad_mode(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    return _with(b, root, (0o100666, b"odd.txt", b.blob(b"x"))), "unsupported mode"


def tree_entry_is_a_blob(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    return _with(b, root, (TREE, b"notatree", b.blob(b"x"))), "incomplete"


def missing_blob(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    return _with(b, root, (BLOB, b"missing.txt", "1" * 40)), "missing or not files"


def blob_entry_is_a_tree(b: Builder, root: str, outside: Path) -> tuple[str, str]:
    return _with(b, root, (BLOB, b"notafile", root)), "missing or not files"


CASES: dict[str, Case] = {
    f.__name__: f
    for f in (
        dotdot_top,
        dotdot_deep,
        dot,
        dotgit_hook,
        dotgit_config,
        dotgit_file,
        absolute,
        slash_in_name,
        empty_name,
        duplicate_symlink_and_dir,
        symlinked_gitattributes,
        symlinked_gitmodules,
        bad_mode,
        tree_entry_is_a_blob,
        missing_blob,
        blob_entry_is_a_tree,
    )
}


def _assert_refused(repo: Path, outside: Path, commit: str, reason: str) -> UnsafeRestoreError:
    state = user_state(repo)
    outside_before = files(outside)
    parent_before = sorted(p.name for p in repo.parent.iterdir())
    store_before = git(repo, "rev-parse", "-q", "--verify", STORE_REF, check=False)

    with pytest.raises(UnsafeRestoreError, match="restore refused") as info:
        restore(repo, commit)
    assert reason in str(info.value)
    with pytest.raises(UnsafeRestoreError):
        plan_restore(GitRepo.discover(repo), commit, NO_PROTECTION)

    assert user_state(repo) == state  # work tree (with mtimes) and .git untouched
    assert files(outside) == outside_before
    assert sorted(p.name for p in repo.parent.iterdir()) == parent_before
    assert git(repo, "rev-parse", "-q", "--verify", STORE_REF, check=False) == store_before
    assert (repo / "src/app.py").read_text() == "print('latest')\n"
    assert info.value.paths
    return info.value


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_tree_is_refused_with_nothing_written(
    world: tuple[Path, Path, Builder, str], case: str
) -> None:
    repo, outside, b, root = world
    commit, reason = CASES[case](b, root, outside)
    _assert_refused(repo, outside, commit, reason)


# --- symlink tricks that need the work tree --------------------------------------------------


def test_writing_through_an_ignored_symlink_is_refused(
    world: tuple[Path, Path, Builder, str],
) -> None:
    repo, outside, b, root = world
    write(repo, ".gitignore", "escape\n")
    os.symlink(outside, repo / "escape")  # ignored, so not in the current capture
    git_ignore = b.blob((repo / ".gitignore").read_bytes())
    commit = _with(
        b,
        root,
        (BLOB, b".gitignore", git_ignore),
        _nest(b, [b"escape"], (BLOB, b"pwned.txt", b.blob(b"through the link\n"))),
    )

    error = _assert_refused(repo, outside, commit, "written through a symlink")
    assert error.paths == ["escape/pwned.txt"]


def test_replacing_an_ignored_file_by_a_directory_is_refused(
    world: tuple[Path, Path, Builder, str],
) -> None:
    repo, outside, b, root = world
    write(repo, ".gitignore", "*.log\n")
    write(repo, "cache.log", "the user's ignored file\n")
    commit = _with(
        b,
        root,
        (BLOB, b".gitignore", b.blob(b"*.log\n")),
        _nest(b, [b"cache.log"], (BLOB, b"x", b.blob(b"x"))),
    )

    _assert_refused(repo, outside, commit, "does not hold")


def test_writing_into_an_ignored_nested_repository_is_refused(
    world: tuple[Path, Path, Builder, str],
) -> None:
    repo, outside, b, root = world
    write(repo, ".gitignore", "vendor/\n")
    (repo / "vendor").mkdir()
    git(repo / "vendor", "init", "-q")
    commit = _with(b, root, _nest(b, [b"vendor"], (BLOB, b"x.c", b.blob(b"int x;\n"))))

    _assert_refused(repo, outside, commit, "nested git repository")


def test_a_captured_symlink_replaced_by_a_directory_is_unlinked_not_followed(
    world: tuple[Path, Path, Builder, str],
) -> None:
    repo, outside, b, root = world
    os.symlink(outside, repo / "escape")  # captured: a symlink blob in the current tree
    commit = _with(b, root, _nest(b, [b"escape"], (BLOB, b"secret.txt", b.blob(b"inside\n"))))
    before_outside = files(outside)

    restore(repo, commit)

    assert not (repo / "escape").is_symlink()
    assert (repo / "escape/secret.txt").read_text() == "inside\n"
    assert files(outside) == before_outside


def test_a_symlink_in_the_snapshot_is_restored_as_a_link_and_never_followed(
    world: tuple[Path, Path, Builder, str],
) -> None:
    repo, outside, b, root = world
    commit = _with(b, root, (LINK, b"to-outside", b.blob(os.fsencode(outside / "secret.txt"))))
    before_outside = files(outside)

    restore(repo, commit)

    assert os.readlink(repo / "to-outside") == str(outside / "secret.txt")
    assert files(outside) == before_outside


def test_a_hostile_entry_deep_in_an_unchanged_looking_tree_is_found(
    world: tuple[Path, Path, Builder, str],
) -> None:
    repo, outside, b, root = world
    src = next(e for e in b.entries(root) if e[1] == b"src")
    hostile_src = b.tree(b.entries(src[2]) + [_nest(b, [b".git"], (BLOB, b"config", b.blob(b"x")))])
    entries = [e for e in b.entries(root) if e[1] != b"src"] + [(TREE, b"src", hostile_src)]
    commit = b.commit(b.tree(entries))

    error = _assert_refused(repo, outside, commit, ".git")
    assert error.paths == ["src/.git"]
