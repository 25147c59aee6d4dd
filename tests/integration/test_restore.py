"""``restore_commit`` / ``plan_restore``: exact restores of real repositories with real git.

The shared helpers live in ``tests/gitkit.py`` and ``tests/snapshotkit.py``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from ledger.errors import MissingCommitError, UnsafeRestoreError
from ledger.git.repo import GitRepo
from ledger.git.restore.run import plan_restore, restore_commit
from ledger.git.store.chain import STORE_REF
from ledger.git.store.snapshot import LastExact, take_snapshot
from ledger.git.trees import diff_trees, patch
from ledger.settings import SnapshotSettings
from tests.gitkit import files, fresh_tree, git, user_state, write
from tests.snapshotkit import NO_PROTECTION, restore, snapshot, store_snapshots


def git_restore_files(repo: Path, commit: str) -> dict[str, tuple[object, ...]]:
    """The oracle for bytes: what ``git -c core.autocrlf=false restore --source=<commit>
    --worktree -- .`` writes into an empty work tree (fresh index, the repository's config)."""
    with tempfile.TemporaryDirectory(prefix="oracle-") as tmp:
        work = Path(tmp) / "wt"
        work.mkdir()
        env = {
            "GIT_DIR": str(repo / ".git"),
            "GIT_WORK_TREE": str(work),
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
        }
        git(
            work,
            "-c",
            "core.autocrlf=false",
            "restore",
            f"--source={commit}",
            "--worktree",
            "--",
            ".",
            env=env,
        )
        return files(work)


# --- restore correctness -------------------------------------------------------------------


def test_restore_brings_back_modified_and_deleted_files_and_removes_created_ones(
    repo: Path,
) -> None:
    write(repo, "src/app.py", "print('v1')\n")
    write(repo, "src/deep/nested/mod.py", "x = 1\n")
    write(repo, "notes.txt", "untracked but captured\n")
    point = snapshot(repo)
    before = files(repo)

    write(repo, "src/app.py", "print('v2')\n")
    (repo / "src/deep/nested/mod.py").unlink()
    (repo / "notes.txt").unlink()
    write(repo, "created/after/the/point.txt", "new\n")
    write(repo, "src/extra.py", "extra\n")

    outcome = restore(repo, point, verify="capture")

    assert files(repo) == before
    assert outcome.changed and outcome.exact and outcome.current_commit == point
    assert fresh_tree(repo) == outcome.plan.target_tree
    assert outcome.plan.to_json() == {
        "added": ["notes.txt", "src/deep/nested/mod.py"],
        "modified": ["src/app.py"],
        "deleted": ["created/after/the/point.txt", "src/extra.py"],
    }
    assert not (repo / "created").exists()  # directories left empty by the restore are removed


def test_restore_writes_only_the_paths_that_differ(repo: Path) -> None:
    for i in range(20):
        write(repo, f"pkg/m{i}.py", f"v = {i}\n")
    point = snapshot(repo)
    write(repo, "pkg/m3.py", "v = 'changed'\n")
    untouched = {
        p: (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in (repo / "pkg").iterdir()
        if p.name != "m3.py"
    }

    outcome = restore(repo, point)

    assert outcome.plan.modified == ("pkg/m3.py",) and not outcome.plan.added
    assert (repo / "pkg/m3.py").read_text() == "v = 3\n"
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in untouched} == untouched


def test_restore_sets_exec_bits_and_restores_symlinks_as_links(repo: Path) -> None:
    write(repo, "bin/run.sh", "#!/bin/sh\necho hi\n", mode=0o755)
    write(repo, "plain.txt", "plain\n", mode=0o644)
    write(repo, "target.txt", "target\n")
    os.symlink("target.txt", repo / "link-to-file")
    os.symlink("bin", repo / "link-to-dir")
    os.symlink("/nonexistent/outside", repo / "dangling")
    point = snapshot(repo)
    before = files(repo)

    (repo / "bin/run.sh").chmod(0o644)
    (repo / "plain.txt").chmod(0o755)
    (repo / "link-to-file").unlink()
    write(repo, "link-to-file", "now a regular file\n")
    (repo / "link-to-dir").unlink()
    os.symlink("plain.txt", repo / "link-to-dir")
    (repo / "dangling").unlink()

    restore(repo, point)

    assert files(repo) == before
    assert (repo / "link-to-dir").is_symlink() and os.readlink(repo / "link-to-dir") == "bin"
    assert os.readlink(repo / "dangling") == "/nonexistent/outside"


def test_restore_switches_files_directories_and_symlinks_in_both_directions(repo: Path) -> None:
    write(repo, "was-file", "a file\n")
    write(repo, "was-dir/inner/x.txt", "x\n")
    write(repo, "was-dir/y.txt", "y\n")
    os.symlink("was-dir", repo / "was-link")
    point = snapshot(repo)
    before = files(repo)

    (repo / "was-file").unlink()
    write(repo, "was-file/now/deep.txt", "deep\n")
    shutil.rmtree(repo / "was-dir")
    write(repo, "was-dir", "now a file\n")
    (repo / "was-link").unlink()
    write(repo, "was-link/child.txt", "through a real directory\n")
    changed = snapshot(repo)

    restore(repo, point)
    assert files(repo) == before
    restore(repo, changed)
    assert (repo / "was-file/now/deep.txt").read_text() == "deep\n"
    assert (repo / "was-dir").read_text() == "now a file\n"
    assert not (repo / "was-link").is_symlink()
    assert (repo / "was-link/child.txt").read_text() == "through a real directory\n"
    restore(repo, point)
    assert files(repo) == before


@pytest.mark.parametrize(
    "name",
    [
        "ünïcödé/ファイル.txt",
        "*.txt",
        "[ab].txt",
        ":(exclude)magic",
        "-dash.txt",
        "with space/and tab\t.txt",
        "back\\slash",
        "new\nline.txt",
        "caf\u00e9 (NFC).txt",
    ],
)
def test_restore_handles_unicode_and_pathspec_magic_names(repo: Path, name: str) -> None:
    write(repo, name, "original\n")
    write(repo, "ab.txt", "must not be matched by a glob\n")
    point = snapshot(repo)
    before = files(repo)
    write(repo, name, "changed\n")
    write(repo, "ab.txt", "changed too\n")
    write(repo, name + ".new", "created\n")

    outcome = restore(repo, point)

    assert files(repo) == before
    assert set(outcome.plan.modified) == {name, "ab.txt"}
    assert outcome.plan.deleted == (name + ".new",)


def test_empty_directories_not_emptied_by_the_restore_are_left(repo: Path) -> None:
    (repo / "empty-before").mkdir()
    write(repo, "keep/file.txt", "k\n")
    point = snapshot(repo)
    write(repo, "keep/new.txt", "n\n")
    write(repo, "gone/a/b.txt", "b\n")

    restore(repo, point)

    assert (repo / "empty-before").is_dir()
    assert (repo / "keep").is_dir() and not (repo / "gone").exists()
    assert repo.is_dir()


def test_ignored_and_protected_files_are_left_untouched(repo: Path) -> None:
    write(repo, ".gitignore", "*.log\nbuild/\n")
    write(repo, "src/a.py", "a\n")
    point = snapshot(repo, SnapshotSettings())
    write(repo, "debug.log", "ignored, created after the point\n")
    write(repo, "build/out.bin", "ignored directory\n")
    write(repo, "node_modules/pkg/index.js", "protected, untracked\n")
    write(repo, "src/a.py", "changed\n")

    outcome = restore(repo, point, SnapshotSettings())

    assert (repo / "src/a.py").read_text() == "a\n"
    assert (repo / "debug.log").read_text() == "ignored, created after the point\n"
    assert (repo / "build/out.bin").exists()
    assert (repo / "node_modules/pkg/index.js").read_text() == "protected, untracked\n"
    assert outcome.plan.modified == ("src/a.py",) and not outcome.plan.deleted


def test_paths_under_a_protected_directory_are_skipped_with_a_warning(repo: Path) -> None:
    write(repo, "node_modules/pkg/index.js", "v1\n")
    point = snapshot(repo)  # captured while not protected
    write(repo, "node_modules/pkg/index.js", "v2, now protected\n")
    write(repo, "app.js", "changed\n")

    outcome = restore(repo, point, SnapshotSettings())

    assert (repo / "node_modules/pkg/index.js").read_text() == "v2, now protected\n"
    assert not (repo / "app.js").exists()
    assert outcome.plan.skipped == ("node_modules/pkg/index.js",)
    assert any("node_modules/pkg/index.js" in w for w in outcome.plan.warnings)
    assert not outcome.exact


def test_user_index_head_and_branch_are_never_touched(repo: Path) -> None:
    write(repo, "tracked.txt", "committed\n")
    git(repo, "add", "tracked.txt")
    git(repo, "commit", "-q", "-m", "tracked")
    point = snapshot(repo)
    write(repo, "tracked.txt", "staged\n")
    write(repo, "staged-new.txt", "staged new file\n")
    git(repo, "add", "tracked.txt", "staged-new.txt")
    write(repo, "tracked.txt", "unstaged on top\n")
    index_bytes = (repo / ".git/index").read_bytes()
    meta = user_state(repo)["git"]
    head = git(repo, "rev-parse", "HEAD")
    staged = git(repo, "diff", "--cached", "--name-status")

    restore(repo, point)

    assert (repo / "tracked.txt").read_text() == "committed\n"
    assert not (repo / "staged-new.txt").exists()
    assert (repo / ".git/index").read_bytes() == index_bytes
    assert user_state(repo)["git"] == meta
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git(repo, "diff", "--cached", "--name-status") == staged


def test_restoring_the_current_state_changes_nothing_and_takes_no_undo_snapshot(repo: Path) -> None:
    point = snapshot(repo)
    count = store_snapshots(repo)
    state = user_state(repo)

    outcome = restore(repo, point)

    assert not outcome.changed and outcome.undo_commit is None and outcome.plan.noop
    assert outcome.current_commit == point
    assert store_snapshots(repo) == count
    assert user_state(repo)["worktree"] == state["worktree"]


def test_the_undo_snapshot_takes_the_work_tree_back(repo: Path) -> None:
    write(repo, "a.txt", "point\n")
    point = snapshot(repo)
    write(repo, "a.txt", "latest\n")
    write(repo, "b/new.txt", "new\n")
    latest = files(repo)

    outcome = restore(repo, point)
    assert outcome.undo_commit is not None
    assert git(repo, "merge-base", "--is-ancestor", outcome.undo_commit, STORE_REF) == ""
    restore(repo, outcome.undo_commit)

    assert files(repo) == latest


def test_undo_snapshot_reuses_the_latest_exact_snapshot(repo: Path) -> None:
    point = snapshot(repo)
    write(repo, "a.txt", "work\n")
    gitrepo = GitRepo.discover(repo)
    latest = take_snapshot(gitrepo, NO_PROTECTION, last_exact=None)
    count = store_snapshots(repo)

    outcome = restore_commit(
        gitrepo, point, NO_PROTECTION, last_exact=LastExact(latest.commit, latest.tree)
    )

    assert outcome.undo_commit == latest.commit and outcome.undo_reused
    assert store_snapshots(repo) == count


def test_plan_restore_lists_the_changes_and_changes_nothing(repo: Path) -> None:
    write(repo, "keep.txt", "k\n")
    write(repo, "old.txt", "o\n")
    point = snapshot(repo)
    write(repo, "keep.txt", "changed\n")
    (repo / "old.txt").unlink()
    write(repo, "new.txt", "n\n")
    state = user_state(repo)

    plan = plan_restore(GitRepo.discover(repo), point, NO_PROTECTION)

    assert plan.to_json() == {
        "added": ["old.txt"],
        "modified": ["keep.txt"],
        "deleted": ["new.txt"],
    }
    assert not plan.noop and plan.target_commit == point
    assert plan.current_tree == fresh_tree(repo)
    assert user_state(repo)["worktree"] == state["worktree"]


def test_restore_warns_when_the_point_was_recorded_on_another_branch_or_head(repo: Path) -> None:
    write(repo, "a.txt", "on main\n")
    point = snapshot(repo)
    main_head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "commit", "-q", "--allow-empty", "-m", "feature work")
    write(repo, "a.txt", "on feature\n")

    outcome = restore(repo, point)

    text = " | ".join(outcome.plan.warnings)
    assert "branch main" in text and "branch feature" in text
    assert main_head[:12] in text
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/feature"
    assert (repo / "a.txt").read_text() == "on main\n"


def test_restore_on_the_same_branch_and_head_has_no_warning(repo: Path) -> None:
    point = snapshot(repo)
    write(repo, "x.txt", "x\n")
    assert restore(repo, point).plan.warnings == ()


def test_a_missing_or_non_commit_target_is_refused(repo: Path) -> None:
    gitrepo = GitRepo.discover(repo)
    tree = fresh_tree(repo)
    blob = git(repo, "hash-object", "-w", "README.md").strip()
    for sha in ("1" * 40, tree, blob, "not-a-sha"):
        with pytest.raises(MissingCommitError):
            restore_commit(gitrepo, sha, NO_PROTECTION)
        with pytest.raises(MissingCommitError):
            plan_restore(gitrepo, sha, NO_PROTECTION)


def test_diff_trees_has_no_rename_detection_and_patch_is_a_unified_diff(repo: Path) -> None:
    write(repo, "old-name.txt", "same content\n" * 20)
    write(repo, "edit.txt", "one\n")
    a = snapshot(repo)
    (repo / "old-name.txt").rename(repo / "new-name.txt")
    write(repo, "edit.txt", "two\n")
    b = snapshot(repo)
    gitrepo = GitRepo.discover(repo)

    assert diff_trees(gitrepo, a, b) == (("new-name.txt",), ("edit.txt",), ("old-name.txt",))
    text = patch(gitrepo, a, b)
    assert "diff --git a/edit.txt b/edit.txt" in text and "-one\n+two\n" in text
    assert "rename" not in text and "deleted file mode 100644" in text
    with pytest.raises(MissingCommitError):
        diff_trees(gitrepo, a, "2" * 40)


def test_restored_bytes_equal_what_git_restore_writes_under_attributes(repo: Path) -> None:
    write(repo, ".gitattributes", "*.crlf text eol=crlf\n*.id ident\n*.bin binary\n")
    write(repo, "a.crlf", "line one\nline two\n")
    write(repo, "+sorts-before-attributes.crlf", "early\nfile\n")
    write(repo, "b.id", "$Id$\nbody\n")
    write(repo, "c.bin", b"\x00\x01\r\n\xff")
    write(repo, "d.txt", "mixed\r\nendings\n")
    write(repo, "sub/.gitattributes", "*.txt text eol=crlf\n")
    write(repo, "sub/e.txt", "sub\nfile\n")
    point = snapshot(repo)

    # Change the attributes too: the restore must convert under the target's attributes.
    write(repo, ".gitattributes", "* -text\n")
    (repo / "sub/.gitattributes").unlink()
    for rel in ("a.crlf", "+sorts-before-attributes.crlf", "b.id", "c.bin", "d.txt", "sub/e.txt"):
        write(repo, rel, "something else\n")

    restore(repo, point)

    assert files(repo) == git_restore_files(repo, point)
    assert (repo / "a.crlf").read_bytes() == b"line one\r\nline two\r\n"
    assert (repo / "+sorts-before-attributes.crlf").read_bytes() == b"early\r\nfile\r\n"
    assert (repo / "b.id").read_bytes().startswith(b"$Id: ")


def test_a_directory_holding_ignored_files_is_not_replaced_by_a_file(repo: Path) -> None:
    write(repo, ".gitignore", "*.log\n")
    write(repo, "out", "a file at the point\n")
    point = snapshot(repo)
    (repo / "out").unlink()
    write(repo, "out/result.txt", "captured\n")
    write(repo, "out/run.log", "ignored: the capture does not hold it\n")
    state = user_state(repo)

    with pytest.raises(UnsafeRestoreError, match="does not hold") as info:
        restore(repo, point)

    assert info.value.paths == ["out/run.log"]
    assert user_state(repo) == state
