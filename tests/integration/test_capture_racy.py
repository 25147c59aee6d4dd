"""The kept private index stays exact where stat data lies: reference cases 20–22 and more.

Git here compares ctime in whole seconds and decides "racily clean" from mtime alone, so a
same-size rewrite that restores the mtime within one second is invisible to a kept index unless
the capture handles it. These tests make the captures and rewrites happen within one second
where it matters (retrying until the clock cooperates) and compare with a fresh-index capture.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.gitkit import fresh_tree, git, set_mtime
from tests.snapshotkit import assert_parity, capture


def _rewrite_keeping_stat(path: Path, content: bytes) -> None:
    """Same size, same mtime (to the nanosecond), same inode: only ctime moves."""
    before = path.stat()
    assert len(content) == before.st_size
    with open(path, "r+b") as handle:
        handle.write(content)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _within_one_second(action) -> None:  # type: ignore[no-untyped-def]
    """Run ``action`` until it started and finished within the same wall-clock second."""
    for _ in range(20):
        start = int(time.time())
        action()
        if int(time.time()) == start:
            return
    raise AssertionError("could not run the step within one second")


def _settle(repo: Path) -> None:
    """Capture again after the clock moved on, so that no entry is still held as racy and the
    next step must be caught by the rule-change checks themselves."""
    time.sleep(1.05)
    assert_parity(repo)


def test_capture_sees_same_size_rewrite_with_restored_mtime_in_the_same_second(repo: Path) -> None:
    target = repo / "notes.txt"
    target.write_bytes(b"aaaa\n")
    set_mtime(target, 60)
    capture(repo)
    contents = iter([b"bbbb\n", b"cccc\n", b"dddd\n", b"eeee\n"] * 10)

    def step() -> None:
        _rewrite_keeping_stat(target, next(contents))
        assert_parity(repo)
        _rewrite_keeping_stat(target, next(contents))
        assert_parity(repo)

    _within_one_second(step)


def test_capture_sees_same_size_rewrite_restoring_a_years_old_mtime(repo: Path) -> None:
    target = repo / "old.txt"
    target.write_bytes(b"aaaa\n")
    set_mtime(target, 3 * 365 * 86400)
    capture(repo)
    time.sleep(1.05)
    contents = iter([b"bbbb\n", b"cccc\n", b"dddd\n", b"eeee\n"] * 10)

    def step() -> None:
        _rewrite_keeping_stat(target, next(contents))
        assert_parity(repo)
        _rewrite_keeping_stat(target, next(contents))
        assert_parity(repo)

    _within_one_second(step)


def test_capture_sees_a_rewrite_after_an_identical_rewrite_with_restored_mtime(repo: Path) -> None:
    """git status refreshes the stat data of an identical rewrite silently; that entry is as
    racy as one we hashed."""
    target = repo / "same.txt"
    target.write_bytes(b"aaaa\n")
    set_mtime(target, 60)
    capture(repo)
    time.sleep(1.05)

    def step() -> None:
        _rewrite_keeping_stat(target, b"aaaa\n")
        assert_parity(repo)
        _rewrite_keeping_stat(target, b"zzzz\n")
        assert_parity(repo)
        _rewrite_keeping_stat(target, b"aaaa\n")

    _within_one_second(step)


def test_capture_sees_same_size_rewrite_with_restored_mtime_in_a_later_second(repo: Path) -> None:
    target = repo / "notes.txt"
    target.write_bytes(b"aaaa\n")
    set_mtime(target, 60)
    assert_parity(repo)
    time.sleep(1.05)
    _rewrite_keeping_stat(target, b"bbbb\n")
    assert_parity(repo)
    time.sleep(1.05)
    assert_parity(repo)
    _rewrite_keeping_stat(target, b"cccc\n")
    assert_parity(repo)


def test_checkpoints_equal_fresh_capture_across_edits_ignores_and_case_renames(repo: Path) -> None:
    """Reference case 20."""
    (repo / "a.txt").write_text("alpha\n")
    (repo / "gone.txt").write_text("gone\n")
    (repo / "dir").mkdir()
    (repo / "dir" / "b.txt").write_text("bravo\n")
    assert_parity(repo)
    (repo / "a.txt").write_text("ALPHA\n")  # same size, right after a capture
    assert_parity(repo)
    (repo / "new").mkdir()
    (repo / "new" / "c.txt").write_text("charlie\n")
    (repo / "gone.txt").unlink()
    _settle(repo)
    (repo / ".gitignore").write_text("dir/\n")
    tree = assert_parity(repo)
    assert "dir/b.txt" not in git(repo, "ls-tree", "-r", "--name-only", tree)
    (repo / "a.txt").rename(repo / "A.txt")
    assert_parity(repo)
    (repo / "new").rename(repo / "tmp-name")
    (repo / "tmp-name").rename(repo / "New")
    tree = assert_parity(repo)
    assert "New/c.txt" in git(repo, "ls-tree", "-r", "--name-only", tree)


def test_checkpoints_reapply_changed_attributes_and_line_ending_config(
    repo: Path, tmp_path: Path
) -> None:
    """Reference case 21."""
    git(repo, "config", "core.autocrlf", "false")
    (repo / "doc.md").write_bytes(b"# title\r\nbody\r\n")
    (repo / "notes.txt").write_bytes(b"one\r\ntwo\r\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "deep.txt").write_bytes(b"deep\r\n")
    for name in ("doc.md", "notes.txt", "sub/deep.txt"):
        set_mtime(repo / name, 3600)
    assert_parity(repo)
    _settle(repo)
    attributes = tmp_path / "global-attributes"
    git(repo, "config", "core.attributesFile", str(attributes))
    assert_parity(repo)
    attributes.write_text("*.md text eol=lf\n")
    assert_parity(repo)
    (repo / ".gitattributes").write_text("*.txt text eol=lf\n")
    assert_parity(repo)
    git(repo, "config", "core.autocrlf", "true")
    assert_parity(repo)
    (repo / ".gitattributes").write_text("*.txt -text\n")
    assert_parity(repo)


def test_checkpoints_see_rewrites_under_weakened_stat_config(repo: Path) -> None:
    """Reference case 22: trustctime=false, checkStat=minimal, ignoreStat=true."""
    git(repo, "config", "core.trustctime", "false")
    git(repo, "config", "core.checkStat", "minimal")
    git(repo, "config", "core.ignoreStat", "true")
    target = repo / "file.txt"
    target.write_text("0000\n")
    set_mtime(target, 60)
    assert_parity(repo)

    def same_second() -> None:
        target.write_text("1111\n")
        set_mtime(target, 60)
        assert_parity(repo)

    _within_one_second(same_second)
    time.sleep(1.05)
    target.write_text("2222\n")
    set_mtime(target, 60)
    assert_parity(repo)


def test_capture_drops_files_under_a_new_self_ignoring_directory(repo: Path) -> None:
    (repo / "cache").mkdir()
    (repo / "cache" / "data.bin").write_text("data\n")
    _settle(repo)
    (repo / "cache" / ".gitignore").write_text("*\n")  # ignores itself too
    tree = assert_parity(repo)
    assert "cache/" not in git(repo, "ls-tree", "-r", "--name-only", tree)


def test_capture_applies_an_ignored_gitattributes_file(repo: Path) -> None:
    (repo / "w").mkdir()
    (repo / "w" / "x.txt").write_bytes(b"x\r\n")
    _settle(repo)
    (repo / ".gitignore").write_text(".gitattributes\n")
    (repo / "w" / ".gitattributes").write_text("*.txt text eol=lf\n")
    assert_parity(repo)
    (repo / "w" / ".gitattributes").write_text("*.txt -text\n")
    assert_parity(repo)


def test_capture_follows_exclude_file_and_global_excludes_changes(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "a.secret").write_text("a\n")
    (repo / "b.local").write_text("b\n")
    _settle(repo)
    (repo / ".git" / "info" / "exclude").write_text("*.secret\n")
    assert_parity(repo)
    excludes = tmp_path / "excludes"
    excludes.write_text("*.local\n")
    git(repo, "config", "core.excludesFile", str(excludes))
    assert_parity(repo)
    excludes.write_text("")
    assert_parity(repo)


def test_capture_applies_a_changed_clean_filter(repo: Path) -> None:
    (repo / ".gitattributes").write_text("*.up filter=upper\n")
    (repo / "f.up").write_text("hello\n")
    assert_parity(repo)
    git(repo, "config", "filter.upper.clean", "tr a-z A-Z")
    assert_parity(repo)


def test_capture_rebuilds_a_corrupt_missing_or_locked_private_index(repo: Path) -> None:
    (repo / "a.txt").write_text("a\n")
    expected = assert_parity(repo)
    private = repo / ".git" / "pi-rewind"
    (private / "index").write_bytes(b"DIRC garbage")
    assert capture(repo) == expected
    (private / "index").unlink()
    assert capture(repo) == expected
    (private / "capture-state.json").write_text("{not json")
    assert capture(repo) == expected
    (private / "index.lock").write_text("left by a crash")
    (repo / "a.txt").write_text("changed\n")
    assert_parity(repo)


def test_capture_rebuilds_when_objects_only_it_knew_were_pruned(repo: Path) -> None:
    (repo / "scratch.txt").write_text("only in the private index\n")
    capture(repo)
    git(repo, "gc", "-q", "--prune=now")
    (repo / "other.txt").write_text("other\n")
    assert_parity(repo)


def test_capture_stays_exact_through_many_quick_edits(repo: Path) -> None:
    files = [repo / f"f{i}.txt" for i in range(5)]
    for i, f in enumerate(files):
        f.write_text(f"{i:04d}\n")
    old = time.time() - 120
    for round_ in range(12):
        target = files[round_ % len(files)]
        target.write_text(f"{round_:04d}\n")
        os.utime(target, (old, old))
        if round_ % 3 == 0:
            (repo / f"new{round_}.txt").write_text("n\n")
        if round_ % 4 == 0 and (repo / f"new{round_ - 4}.txt").exists():
            (repo / f"new{round_ - 4}.txt").unlink()
        assert capture(repo) == fresh_tree(repo)


def test_a_capture_interrupted_half_way_is_not_trusted(repo: Path) -> None:
    (repo / "a.txt").write_text("a\n")
    assert_parity(repo)
    (repo / ".git" / "pi-rewind" / "capture-in-progress").touch()  # as left by a crash
    (repo / "a.txt").write_text("b\n")
    assert_parity(repo)
    assert not (repo / ".git" / "pi-rewind" / "capture-in-progress").exists()
