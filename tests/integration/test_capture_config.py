"""Configuration and saved state as a capture reads them: git's booleans, and state files it
cannot trust (a rebuild, never a crash)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.git.capture.fingerprint import git_bool
from ledger.git.capture.index import PrivateIndex
from ledger.git.capture.scan import Capturer
from ledger.git.repo import GitRepo
from tests.gitkit import git, write


def _set_core(repo: Path, line: str) -> None:
    """Append ``line`` (written by hand: ``git config`` cannot write a valueless key) to
    ``[core]`` of the repository's own configuration."""
    config = repo / ".git" / "config"
    config.write_text(config.read_text() + f"[core]\n\t{line}\n")


def _second_capture_rebuilt(repo: Path) -> bool:
    gitrepo = GitRepo.discover(repo)
    Capturer(gitrepo).capture()
    write(repo, "edit.txt", "changed\n")
    return Capturer(gitrepo).capture().rebuilt


@pytest.mark.parametrize(
    ("line", "git_says", "rebuilt"),
    [("ignorecase =", "false", False), ("ignorecase", "true", True)],
)
def test_core_ignorecase_is_read_as_git_reads_it(
    repo: Path, line: str, git_says: str, rebuilt: bool
) -> None:
    # An empty value is false for git; a key without "=" is true. With ignoreCase on, a kept
    # index cannot see case-only renames, so every capture starts from an empty index.
    _set_core(repo, line)
    assert git(repo, "config", "--type=bool", "core.ignorecase").strip() == git_says
    assert GitRepo.discover(repo).config_bool("core.ignorecase", True) is (git_says == "true")
    assert _second_capture_rebuilt(repo) is rebuilt


def test_git_booleans_follow_git() -> None:
    assert git_bool(None, False) is True  # "[core] key" without "="
    assert git_bool("", True) is False  # "key ="
    assert [git_bool(v, False) for v in ("yes", "On", "TRUE", "1", "2")] == [True] * 5
    assert [git_bool(v, True) for v in ("no", "off", "false", "0")] == [False] * 4
    assert git_bool("maybe", True) is True  # git refuses it; we keep the default


@pytest.mark.parametrize(
    "damage",
    [
        lambda state: state.update(version=0),
        lambda state: state["dirs"].update({"": [[1, 2, 3, 4], None, False]}),
        lambda state: state["dirs"].update({"": [None, None]}),
        lambda state: state["dirs"].update({"": [["x", 2, 3, 4, "d"], None, False]}),
        lambda state: state.pop("gitlinks"),
    ],
    ids=["other-version", "short-signature", "short-dir-rules", "text-size", "missing-key"],
)
def test_a_state_file_of_another_shape_means_a_full_rebuild_never_a_crash(
    repo: Path, damage: Callable[[dict[str, Any]], object]
) -> None:
    gitrepo = GitRepo.discover(repo)
    first = Capturer(gitrepo).capture()
    index = PrivateIndex(gitrepo.git_dir)
    state = json.loads(index.state_path.read_bytes())
    damage(state)
    index.state_path.write_text(json.dumps(state))
    assert index.load_state() is None
    assert index.health() == "stale"

    again = Capturer(gitrepo).capture()
    assert again.rebuilt and again.tree == first.tree
    assert index.load_state() is not None
