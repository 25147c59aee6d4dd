"""A capture equals the fresh-index ``git -c core.autocrlf=false add -A`` tree, case by case.

Every test captures (usually twice, so that the kept private index is exercised as well as the
first build) and compares with :func:`fresh_tree`.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from ledger.errors import DirtySubmoduleError
from ledger.git.capture.scan import capture_tree
from ledger.git.repo import GitRepo
from tests.gitkit import fresh_tree, git, ls_tree
from tests.snapshotkit import NO_PROTECTION, assert_parity, capture


def test_capture_matches_fresh_index_for_tracked_and_untracked_files(repo: Path) -> None:
    (repo / "README.md").write_text("changed\n")
    (repo / "new.txt").write_text("untracked\n")
    (repo / "dir" / "deep").mkdir(parents=True)
    (repo / "dir" / "deep" / "x.py").write_text("print(1)\n")
    assert_parity(repo)
    assert_parity(repo)


def test_capture_keeps_exec_bits_and_symlinks_as_links(repo: Path) -> None:
    script = repo / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    (repo / "link").symlink_to("README.md")
    (repo / "dangling").symlink_to("nowhere/at/all")
    (repo / "dirlink").symlink_to(repo / "README.md")
    tree = assert_parity(repo)
    listing = ls_tree(repo, tree)
    assert "100755 blob" in listing and "120000 blob" in listing
    script.chmod(0o644)
    tree = assert_parity(repo)
    assert "100755" not in ls_tree(repo, tree)
    (repo / "link").unlink()
    (repo / "link").write_text("now a file\n")
    assert_parity(repo)


def test_capture_ignores_empty_directories(repo: Path) -> None:
    (repo / "empty" / "nested").mkdir(parents=True)
    assert_parity(repo)
    (repo / "empty" / "nested" / "f").write_text("f\n")
    assert_parity(repo)
    (repo / "empty" / "nested" / "f").unlink()
    assert_parity(repo)


@pytest.mark.parametrize(
    "name",
    [
        "spaced name.txt",
        "ünïcödé-ファイル.txt",
        "star*.txt",
        "q?.txt",
        "[abc].txt",
        "-dash.txt",
        ":colon",
        "back\\slash",
        "tab\tname",
        "new\nline",
        'quote"d',
        "#hash",
        "!bang",
    ],
)
def test_capture_handles_odd_file_names_literally(repo: Path, name: str) -> None:
    (repo / name).write_text(f"{name}\n")
    (repo / "a.txt").write_text("a\n")  # a sibling a glob would also match
    assert_parity(repo)
    (repo / name).write_text("changed\n")
    assert_parity(repo)
    (repo / name).unlink()
    assert_parity(repo)


def test_capture_handles_non_utf8_file_names(repo: Path) -> None:
    raw = os.fsdecode(b"latin1-\xe9t\xe9.txt")
    (repo / raw).write_bytes(b"bytes\n")
    assert_parity(repo)
    (repo / raw).write_bytes(b"other\n")
    assert_parity(repo)


def test_capture_follows_deleted_and_renamed_files(repo: Path) -> None:
    (repo / "a.txt").write_text("same content\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "b.txt").write_text("b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "more")
    assert_parity(repo)
    (repo / "a.txt").rename(repo / "renamed.txt")
    (repo / "sub" / "b.txt").unlink()
    (repo / "README.md").unlink()
    assert_parity(repo)
    (repo / "sub").rmdir()
    (repo / "sub").write_text("file where a dir was\n")
    assert_parity(repo)
    (repo / "sub").unlink()
    (repo / "sub" / "again").mkdir(parents=True)
    (repo / "sub" / "again" / "x").write_text("x\n")
    assert_parity(repo)


def test_capture_applies_nested_ignore_files_and_drops_ignored_tracked_files(repo: Path) -> None:
    (repo / "keep.log").write_text("tracked before the rule\n")
    git(repo, "add", "keep.log")
    git(repo, "commit", "-qm", "log")
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_text("o\n")
    (repo / "pkg" / "inner").mkdir(parents=True)
    (repo / "pkg" / ".gitignore").write_text("*.tmp\n!keep.tmp\n")
    (repo / "pkg" / "a.tmp").write_text("tmp\n")
    (repo / "pkg" / "keep.tmp").write_text("keep\n")
    (repo / "pkg" / "inner" / ".gitignore").write_text("*\n")
    (repo / "pkg" / "inner" / "hidden.txt").write_text("hidden\n")
    (repo / ".git" / "info" / "exclude").write_text("secret.txt\n")
    (repo / "secret.txt").write_text("s\n")
    tree = assert_parity(repo)
    listing = ls_tree(repo, tree)
    assert "keep.log" not in listing and "keep.tmp" in listing and "hidden.txt" not in listing
    assert_parity(repo)


def test_capture_started_from_a_subdirectory_covers_the_whole_root(repo: Path) -> None:
    (repo / "a" / "b").mkdir(parents=True)
    (repo / "a" / "b" / "c.txt").write_text("c\n")
    (repo / "top.txt").write_text("top\n")
    assert_parity(repo, start=repo / "a" / "b")
    (repo / "top.txt").write_text("top changed\n")
    assert_parity(repo, start=repo / "a")


def test_capture_keeps_exact_crlf_bytes_with_autocrlf_enabled(repo: Path) -> None:
    """Reference case 19 (D10): bytes are captured exactly even with core.autocrlf=true."""
    git(repo, "config", "core.autocrlf", "true")
    (repo / "run.sh").write_bytes(b"#!/bin/sh\necho before\n")
    (repo / "windows.txt").write_bytes(b"one\r\ntwo\r\n")
    (repo / "untouched.sh").write_bytes(b"echo untouched\r\n")
    tree = assert_parity(repo)
    blob = git(repo, "rev-parse", f"{tree}:windows.txt").strip()
    raw = subprocess.run(
        ["git", "cat-file", "blob", blob], cwd=repo, capture_output=True, check=True
    ).stdout
    assert raw == b"one\r\ntwo\r\n"
    (repo / "windows.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    assert_parity(repo)


def _make_source(tmp: Path, name: str) -> Path:
    src = tmp / name
    src.mkdir()
    git(src, "init", "-q")
    git(src, "config", "user.name", "S")
    git(src, "config", "user.email", "s@example.com")
    (src / "file.txt").write_text("submodule v1\n")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "v1")
    return src


def test_capture_records_submodules_and_embedded_repos_as_gitlinks_at_head(
    repo: Path, tmp_path: Path
) -> None:
    src = _make_source(tmp_path, "src")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(src), "nested")
    git(repo, "commit", "-qm", "sub")
    embedded = repo / "embedded"
    embedded.mkdir()
    git(embedded, "init", "-q")
    (embedded / "e.txt").write_text("e\n")
    git(embedded, "add", "-A")
    git(embedded, "-c", "user.name=E", "-c", "user.email=e@x", "commit", "-qm", "e")
    tree = assert_parity(repo)
    listing = ls_tree(repo, tree)
    assert "160000 commit" in listing and "e.txt" not in listing
    # Moving the embedded repository's HEAD moves the gitlink.
    (embedded / "e.txt").write_text("e2\n")
    git(embedded, "-c", "user.name=E", "-c", "user.email=e@x", "commit", "-qam", "e2")
    assert_parity(repo)
    # Untracked files inside do not make it dirty.
    (embedded / "scratch").write_text("s\n")
    assert_parity(repo)


def test_capture_fails_naming_a_dirty_submodule(repo: Path, tmp_path: Path) -> None:
    """Reference case 17 (D6)."""
    src = _make_source(tmp_path, "src")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(src), "nested")
    git(repo, "commit", "-qm", "sub")
    capture(repo)
    (repo / "nested" / "file.txt").write_text("dirty\n")
    with pytest.raises(DirtySubmoduleError, match="dirty submodule: nested"):
        capture(repo)
    (repo / "nested" / "file.txt").write_text("submodule v1\n")
    assert_parity(repo)


def test_capture_fails_on_a_dirty_submodule_without_gitmodules(repo: Path, tmp_path: Path) -> None:
    """Reference case 18: the gitlink stays mode 160000 after .gitmodules is deleted."""
    src = _make_source(tmp_path, "src")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(src), "nested")
    git(repo, "commit", "-qm", "sub")
    (repo / ".gitmodules").unlink()
    (repo / "nested" / "file.txt").write_text("dirty\n")
    with pytest.raises(DirtySubmoduleError, match="dirty submodule: nested"):
        capture(repo)


def test_capture_fails_on_a_newly_seen_dirty_embedded_repo(repo: Path) -> None:
    embedded = repo / "embedded"
    embedded.mkdir()
    git(embedded, "init", "-q")
    (embedded / "e.txt").write_text("e\n")
    git(embedded, "add", "-A")
    git(embedded, "-c", "user.name=E", "-c", "user.email=e@x", "commit", "-qm", "e")
    (embedded / "e.txt").write_text("changed\n")
    with pytest.raises(DirtySubmoduleError, match="dirty submodule: embedded"):
        capture(repo)


def test_capture_skips_a_fresh_nested_repo_without_commits(repo: Path) -> None:
    """``git add -A`` fails on it; a capture leaves it out and says so."""
    nested = repo / "fresh"
    nested.mkdir()
    git(nested, "init", "-q")
    (nested / "wip.txt").write_text("wip\n")
    (repo / "other.txt").write_text("other\n")
    result = capture_tree(GitRepo.discover(repo), NO_PROTECTION)
    assert result.tree == fresh_tree(repo, exclude=("fresh",))
    assert [(s.path, s.reason) for s in result.skipped] == [
        ("fresh/", "embedded-repo-without-commit")
    ]
    # Once it has a commit, it becomes a gitlink like any embedded repository.
    git(nested, "add", "-A")
    git(nested, "-c", "user.name=E", "-c", "user.email=e@x", "commit", "-qm", "first")
    assert_parity(repo)


def test_capture_sees_a_directory_that_becomes_an_embedded_repo_and_back(repo: Path) -> None:
    (repo / "lib").mkdir()
    (repo / "lib" / "a.txt").write_text("a\n")
    assert_parity(repo)
    git(repo / "lib", "init", "-q")
    git(repo / "lib", "add", "-A")
    git(repo / "lib", "-c", "user.name=E", "-c", "user.email=e@x", "commit", "-qm", "lib")
    assert "160000" in ls_tree(repo, assert_parity(repo))
    import shutil

    shutil.rmtree(repo / "lib" / ".git")
    assert "160000" not in ls_tree(repo, assert_parity(repo))


def test_capture_of_an_unborn_repository(tmp_path: Path) -> None:
    path = tmp_path / "unborn"
    path.mkdir()
    git(path, "init", "-q")
    (path / "a.txt").write_text("a\n")
    assert_parity(path)
    (path / "a.txt").unlink()
    assert capture(path) == fresh_tree(path) == "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def test_capture_does_not_depend_on_file_modes_of_the_checkout(repo: Path) -> None:
    (repo / "ro.txt").write_text("read only\n")
    (repo / "ro.txt").chmod(stat.S_IRUSR)
    assert_parity(repo)


def test_capture_follows_core_filemode_false_like_a_fresh_index(repo: Path) -> None:
    git(repo, "config", "core.fileMode", "false")
    tool = repo / "tool.sh"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert "100755" not in ls_tree(repo, assert_parity(repo))
    tool.write_text("#!/bin/sh\necho changed\n")
    assert_parity(repo)
    git(repo, "config", "core.fileMode", "true")
    assert "100755" in ls_tree(repo, assert_parity(repo))


def test_capture_follows_links_becoming_files_and_back(repo: Path) -> None:
    (repo / "target.txt").write_text("t\n")
    (repo / "entry").symlink_to("target.txt")
    assert_parity(repo)
    (repo / "entry").unlink()
    (repo / "entry").write_text("plain file now\n")
    assert_parity(repo)
    (repo / "entry").unlink()
    (repo / "entry").symlink_to("elsewhere")
    assert_parity(repo)
