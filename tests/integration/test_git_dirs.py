"""Git directories are not work trees (docs/design.md#git-directories-are-not-work-trees).

A bare repository, the target of ``--separate-git-dir`` or any directory inside one is refused as
a shadow; a git directory *inside* a shadowed directory or a work tree is left out of every
capture (full scan and change feed) and never written by a restore or an undo, so a commit
pushed into it survives both. Real repositories, real pushes, real inotify.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from ledger.engine.operations import restore, undo
from ledger.errors import ShadowRefusedError, UnsafeRestoreError
from ledger.git.capture.scan import Capturer, CaptureResult, capture_tree
from ledger.git.feed.service import Feed
from ledger.git.repo import GitRepo, is_git_dir
from ledger.git.restore.plan import build_plan, resolve_commit
from ledger.git.restore.run import restore_commit
from ledger.git.shadow.layout import create_shadow, shadow_root
from ledger.git.shadow.open import open_work_tree
from ledger.session.agent_dir import resolve_agent_dir
from ledger.settings import SnapshotSettings
from tests.cli.helpers import run_process
from tests.gitkit import fresh_tree, git
from tests.integration.test_shadow import shadow_agent, write
from tests.snapshotkit import NO_PROTECTION


@pytest.fixture
def agent_dir() -> Path:
    return resolve_agent_dir()


def bare(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    return path


def push_commit(bare_repo: Path, scratch: Path, text: str) -> str:
    """Commit ``text`` in a clone at ``scratch`` and push it to ``main`` of ``bare_repo``."""
    if not scratch.exists():
        subprocess.run(["git", "clone", "-q", str(bare_repo), str(scratch)], check=True)
        git(scratch, "checkout", "-q", "-B", "main")
        git(scratch, "config", "user.name", "Pusher")
        git(scratch, "config", "user.email", "pusher@example.com")
    (scratch / "f.txt").write_text(text)
    git(scratch, "add", "f.txt")
    git(scratch, "commit", "-q", "-m", text)
    git(scratch, "push", "-q", "origin", "HEAD:main")
    return branch(bare_repo)


def branch(bare_repo: Path) -> str:
    return subprocess.run(
        ["git", f"--git-dir={bare_repo}", "rev-parse", "main"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def has_commit(bare_repo: Path, sha: str) -> bool:
    probe = subprocess.run(
        ["git", f"--git-dir={bare_repo}", "cat-file", "-e", f"{sha}^{{commit}}"],
        capture_output=True,
    )
    return probe.returncode == 0


def tree_paths(repo: GitRepo, tree: str) -> list[str]:
    listed = subprocess.run(
        ["git", f"--git-dir={repo.git_dir}", "ls-tree", "-r", "--name-only", tree],
        check=True,
        capture_output=True,
        text=True,
    )
    return listed.stdout.split()


# --- what is a git directory -----------------------------------------------------------------


def test_git_directories_are_recognised_as_git_does(tmp_path: Path) -> None:
    assert is_git_dir(bare(tmp_path / "b.git"))
    work = tmp_path / "work"
    subprocess.run(
        ["git", "init", "-q", f"--separate-git-dir={tmp_path / 'sep'}", str(work)], check=True
    )
    assert is_git_dir(tmp_path / "sep") and is_git_dir(work / ".git") is False  # a .git file
    plain = tmp_path / "plain"
    (plain / "objects").mkdir(parents=True)
    (plain / "refs").mkdir()
    (plain / "HEAD").write_text("not a ref\n")
    assert not is_git_dir(plain), "HEAD must name a ref or an object, as git checks"
    (plain / "HEAD").write_text("ref: refs/heads/main\n")
    assert is_git_dir(plain)
    assert not is_git_dir(tmp_path / "missing")


# --- shadows ---------------------------------------------------------------------------------


def test_a_bare_repository_gets_no_shadow(tmp_path: Path, agent_dir: Path) -> None:
    repo = bare(tmp_path / "proj.git")
    for cwd, args, said in (
        (tmp_path, ("--repo", repo, "snapshot"), "it is a git directory"),
        (repo / "refs", ("snapshot",), f"inside the git directory {repo}"),
        (tmp_path, ("--repo", repo, "restore", "@", "@", "--mode", "files", "--yes"), "git dir"),
    ):
        result = run_process(*args, cwd=cwd)
        assert result.code == 1, result.err
        assert said in result.err and "hint: " in result.err
        assert "Traceback" not in result.err
    assert not shadow_root(agent_dir).exists(), "nothing was created for the git directory"


def test_a_separate_git_dir_target_gets_no_shadow(tmp_path: Path, agent_dir: Path) -> None:
    separate = tmp_path / "gitdirs" / "proj"
    separate.parent.mkdir()
    subprocess.run(
        ["git", "init", "-q", f"--separate-git-dir={separate}", str(tmp_path / "proj")], check=True
    )
    with pytest.raises(ShadowRefusedError, match="it is a git directory"):
        open_work_tree(separate, agent_dir, create=True)
    with pytest.raises(ShadowRefusedError, match="inside the git directory"):
        open_work_tree(separate / "objects", agent_dir, create=True)
    assert not shadow_root(agent_dir).exists()


def test_a_shadow_made_before_its_directory_became_a_git_directory_is_refused(
    tmp_path: Path, agent_dir: Path
) -> None:
    # An older version created shadows for git directories; opening one now is refused.
    directory = tmp_path / "later.git"
    directory.mkdir()
    (directory / "notes.txt").write_text("n\n")
    create_shadow(directory, agent_dir)
    bare(directory)
    with pytest.raises(ShadowRefusedError, match="git directory"):
        open_work_tree(directory, agent_dir, create=True)
    with pytest.raises(ShadowRefusedError, match="git directory"):
        open_work_tree(directory, agent_dir, create=False)


# --- a git directory inside a shadowed directory ---------------------------------------------


def test_a_pushed_commit_survives_restore_and_undo_in_a_shadowed_directory(
    tmp_path: Path, agent_dir: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("notes\n")
    app = bare(work / "app.git")
    first = push_commit(app, tmp_path / "clone", "one\n")
    agent = shadow_agent(work, agent_dir)
    agent.prompt("write a", write("a.txt", "a1\n"))
    second = push_commit(app, tmp_path / "clone", "two\n")
    u2, _ = agent.prompt("edit a", write("a.txt", "a2\n"))

    captured = capture_tree(agent.engine.repo)
    assert [(s.path, s.reason) for s in captured.skipped] == [("app.git/", "git-dir")]
    assert not [p for p in tree_paths(agent.engine.repo, captured.tree) if p.startswith("app.git")]

    third = push_commit(app, tmp_path / "clone", "three\n")
    report = restore(agent.engine, u2, mode="files")  # the files before prompt two
    assert (work / "a.txt").read_text() == "a1\n"
    assert branch(app) == third, "the restore did not move the bare repository's branch"
    assert all(has_commit(app, c) for c in (first, second, third))
    assert report.changed

    fourth = push_commit(app, tmp_path / "clone", "four\n")
    undo(agent.engine)
    assert (work / "a.txt").read_text() == "a2\n"
    assert branch(app) == fourth, "the undo did not lose the push made after the restore"
    assert has_commit(app, fourth)
    git(app, "fsck", "--no-dangling")


def test_an_old_snapshot_holding_a_git_directory_restores_around_it(
    tmp_path: Path, agent_dir: Path
) -> None:
    # A snapshot taken by an older version holds app.git/objects and app.git/refs: the restore
    # leaves them alone, and the executor's own check refuses if the capture did not skip them.
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("old\n")
    app = bare(work / "app.git")
    push_commit(app, tmp_path / "clone", "one\n")
    repo = open_work_tree(work, agent_dir, create=True).repo
    index = tmp_path / "old-index"
    env = {
        **os.environ,
        "GIT_DIR": str(repo.git_dir),
        "GIT_WORK_TREE": str(work),
        "GIT_INDEX_FILE": str(index),
        "GIT_AUTHOR_NAME": "Old",
        "GIT_AUTHOR_EMAIL": "old@example.com",
        "GIT_COMMITTER_NAME": "Old",
        "GIT_COMMITTER_EMAIL": "old@example.com",
    }
    subprocess.run(["git", "add", "-A"], cwd=work, env=env, check=True)
    old_tree = subprocess.run(
        ["git", "write-tree"], cwd=work, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    old = subprocess.run(
        ["git", "commit-tree", "-m", "old", old_tree],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert "app.git/refs/heads/main" in tree_paths(repo, old_tree)

    (work / "a.txt").write_text("new\n")
    pushed = push_commit(app, tmp_path / "clone", "two\n")
    git(app, "pack-refs", "--all")  # the loose ref the old snapshot holds is gone now
    assert not (app / "refs" / "heads" / "main").exists()
    captured = capture_tree(repo)
    unskipped = CaptureResult(captured.tree, (), captured.rebuilt, captured.updated, captured.ms)
    with pytest.raises(UnsafeRestoreError, match="inside a git directory") as refused:
        build_plan(repo, resolve_commit(repo, old), unskipped)
    assert "app.git/refs/heads/main" in refused.value.paths

    outcome = restore_commit(repo, old)
    assert (work / "a.txt").read_text() == "old\n"
    assert branch(app) == pushed and has_commit(app, pushed)
    assert not (app / "refs" / "heads" / "main").exists(), "no old ref written back"
    assert any("left alone" in w for w in outcome.plan.warnings)


# --- a git directory inside a real work tree --------------------------------------------------


def test_an_untracked_bare_repository_in_a_work_tree_is_left_out(repo: Path) -> None:
    (repo / "src.txt").write_text("src\n")
    app = bare(repo / "deps" / "app.git")
    push_commit(app, repo.parent / "clone", "one\n")
    gitrepo = GitRepo.discover(repo)
    result = capture_tree(gitrepo, SnapshotSettings())
    assert [(s.path, s.reason) for s in result.skipped] == [("deps/app.git/", "git-dir")]
    assert tree_paths(gitrepo, result.tree) == ["README.md", "src.txt"]
    # Tracked by the user's own index, it is the user's content and captured like any file.
    git(repo, "add", "deps/app.git")
    tracked = capture_tree(gitrepo, SnapshotSettings())
    assert tracked.skipped == () and tracked.tree == fresh_tree(repo)


def test_entries_an_older_capture_holds_under_a_new_git_directory_are_dropped(
    repo: Path,
) -> None:
    later = repo / "later"
    later.mkdir()
    (later / "notes.txt").write_text("kept by an earlier capture\n")
    gitrepo = GitRepo.discover(repo)
    assert "later/notes.txt" in tree_paths(gitrepo, capture_tree(gitrepo).tree)
    bare(later)
    again = capture_tree(gitrepo)
    assert [s.path for s in again.skipped] == ["later/"]
    assert not [p for p in tree_paths(gitrepo, again.tree) if p.startswith("later/")]


@pytest.mark.needs("change_feed")
def test_the_change_feed_leaves_a_pushed_git_directory_out(repo: Path) -> None:
    (repo / "a.txt").write_text("a\n")
    gitrepo = GitRepo.discover(repo)
    feed = Feed(gitrepo.root, gitrepo.git_dir, verify=False)
    feed.start()
    try:
        deadline = time.monotonic() + 10
        while not feed.watcher.ready and not feed.watcher.failed:
            assert time.monotonic() < deadline
            time.sleep(0.01)

        def fed() -> tuple[str, list[str]]:
            result = Capturer(gitrepo, NO_PROTECTION).capture_with(feed)
            return result.tree, [s.path for s in result.skipped]

        fed()
        app = bare(repo / "app.git")  # appears: a full scan leaves it out
        tree, skipped = fed()
        assert skipped == ["app.git/"] and tree_paths(gitrepo, tree) == ["README.md", "a.txt"]
        full = feed.counters.full
        push_commit(app, repo.parent / "clone", "pushed\n")
        (repo / "a.txt").write_text("b\n")
        tree, skipped = fed()
        assert skipped == ["app.git/"] and tree_paths(gitrepo, tree) == ["README.md", "a.txt"]
        assert feed.counters.full == full, "a push into it is fed, not a full scan"
        assert tree == capture_tree(gitrepo, NO_PROTECTION).tree
    finally:
        feed.close()
