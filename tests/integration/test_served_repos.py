"""A watcher keeps the repository it opened for a served command while nothing git's discovery
reads has changed (ledger/cli/served_repos.py), and never answers from a stale one: after each
change below, a served command's repository is the one a command of its own opens."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ledger.cli import served_repos
from ledger.cli.context import CliContext
from ledger.errors import LedgerError
from ledger.git.locate import Located
from ledger.git.repo import GitRepo
from tests.gitkit import git, one_commit_repo


@pytest.fixture(autouse=True)
def _nothing_kept() -> Iterator[None]:
    served_repos.forget()
    yield
    served_repos.forget()


def _opened(cwd: Path, agent: Path, *, served: bool) -> tuple[str, str] | str:
    """``(root, git dir)`` of the repository a command run in ``cwd`` works on (``served``: as
    the watcher runs it), or the error's class name."""
    ctx = CliContext(None, str(agent), False, cwd=cwd, served=served)
    try:
        repo = ctx.repo(create=True)
    except LedgerError as exc:
        return type(exc).__name__
    return str(repo.root), str(repo.git_dir)


def _same_as_a_command_of_its_own(cwd: Path, agent: Path) -> tuple[str, str] | str:
    served = _opened(cwd, agent, served=True)
    assert served == _opened(cwd, agent, served=False), cwd
    return served


def test_an_unchanged_repository_is_opened_once_whatever_is_written_in_its_work_tree(
    tmp_path: Path, isolated_env: Path
) -> None:
    repo = one_commit_repo(tmp_path / "repo", {"src/a.txt": "a\n"})
    agent = isolated_env / ".pi" / "agent"
    first = CliContext(None, str(agent), False, cwd=repo / "src", served=True).repo(create=True)
    (repo / "new.txt").write_text("a file in the root\n")
    (repo / "src" / "b.txt").write_text("and one here\n")
    git(repo, "add", "-A")  # git writes its index (and a lock) in .git
    again = CliContext(None, str(agent), False, cwd=repo / "src", served=True).repo(create=True)
    assert again is first
    local = CliContext(None, str(agent), False, cwd=repo / "src").repo(create=True)
    assert local is not first  # a command of its own never uses what the watcher keeps


def _nested_repository(repo: Path) -> None:
    git(repo / "sub", "init", "-q")


def _nested_removed(repo: Path) -> None:
    git(repo / "sub", "init", "-q")
    _same_as_a_command_of_its_own(repo / "sub" / "deep", repo.parent / "agent")
    for path in sorted((repo / "sub" / ".git").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (repo / "sub" / ".git").rmdir()


def _gitfile_in_between(repo: Path) -> None:
    other = one_commit_repo(repo.parent / "other")
    git(other, "worktree", "add", "-q", str(repo.parent / "linked"))
    (repo / "sub" / ".git").write_text((repo.parent / "linked" / ".git").read_text())


def _work_tree_moved_by_config(repo: Path) -> None:
    git(repo, "config", "core.worktree", str(repo / "sub"))


def _bare_directory_in_between(repo: Path) -> None:
    (repo / "sub" / "objects").mkdir()
    (repo / "sub" / "refs").mkdir()
    (repo / "sub" / "HEAD").write_text("ref: refs/heads/main\n")


def _directory_replaced_by_a_link(repo: Path) -> None:
    os.rename(repo / "sub", repo.parent / "elsewhere")
    one_commit_repo(repo.parent / "elsewhere-repo")
    (repo.parent / "elsewhere-repo" / "sub" / "deep").mkdir(parents=True)
    (repo / "sub").symlink_to(repo.parent / "elsewhere-repo" / "sub")


@pytest.mark.parametrize(
    "change",
    [
        _nested_repository,
        _nested_removed,
        _gitfile_in_between,
        _work_tree_moved_by_config,
        _bare_directory_in_between,
        _directory_replaced_by_a_link,
    ],
)
def test_after_a_change_discovery_reads_the_served_command_opens_what_git_finds(
    tmp_path: Path, isolated_env: Path, change: Callable[[Path], None]
) -> None:
    repo = one_commit_repo(tmp_path / "repo", {"sub/deep/a.txt": "a\n"})
    agent = tmp_path / "agent"
    start = repo / "sub" / "deep"
    before = _same_as_a_command_of_its_own(start, agent)
    assert before == (str(repo), str(repo / ".git"))
    assert served_repos.kept(start, agent) is not None
    change(repo)
    _same_as_a_command_of_its_own(start, agent)
    _same_as_a_command_of_its_own(start, agent)  # and from what it keeps then


def test_a_repository_changed_while_it_was_being_opened_is_not_kept(
    tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stamp is taken before the repository is opened: a ``.git`` created in between (here,
    during the opening) leaves nothing kept, so the next command looks again."""
    repo = one_commit_repo(tmp_path / "repo", {"sub/a.txt": "a\n"})
    agent = tmp_path / "agent"
    real = GitRepo.discover

    def discover_then_change(start: Path | str, *, known: Located | None = None) -> GitRepo:
        opened = real(start, known=known)
        git(repo / "sub", "init", "-q")
        return opened

    monkeypatch.setattr(GitRepo, "discover", discover_then_change)
    assert _opened(repo / "sub", agent, served=True) == (str(repo), str(repo / ".git"))
    monkeypatch.setattr(GitRepo, "discover", real)
    assert _same_as_a_command_of_its_own(repo / "sub", agent) == (
        str(repo / "sub"),
        str(repo / "sub" / ".git"),
    )
