"""The facts ledger/bridge/quick_start.py keeps without importing their owners (which load
pygit2) are those owners' facts: where a shadow repository's marker and a restore journal are."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.bridge import quick_start
from ledger.git.restore.journal import journal_dir
from ledger.git.shadow.layout import MARKER, SHADOW_DIR, shadow_home, shadow_key
from tests.gitkit import one_commit_repo


def test_the_shadow_marker_is_where_the_shadow_layout_puts_it(tmp_path: Path) -> None:
    assert Path(*quick_start.SHADOW_DIR) == SHADOW_DIR
    assert quick_start.SHADOW_MARKER == MARKER
    for name in ("proj", "a b", ".hidden", "ünï", "x" * 60, "-"):
        directory = tmp_path / name
        directory.mkdir()
        assert quick_start.shadow_key(str(directory)) == shadow_key(directory)
        assert tmp_path.joinpath(
            *quick_start.SHADOW_DIR, quick_start.shadow_key(str(directory))
        ) == shadow_home(tmp_path, directory)


def test_the_journal_directory_is_the_restore_journals(tmp_path: Path) -> None:
    from ledger.git.repo import GitRepo

    repo = GitRepo.discover(one_commit_repo(tmp_path / "repo"))
    assert repo.git_dir.joinpath(*quick_start.JOURNAL_DIR) == journal_dir(repo)


@pytest.mark.parametrize("where", ["root", "sub"])
def test_a_plain_repository_is_found_as_git_repo_finds_it(tmp_path: Path, where: str) -> None:
    from ledger.git.repo import GitRepo

    root = one_commit_repo(tmp_path / "repo")
    start = root if where == "root" else root / "sub"
    start.mkdir(exist_ok=True)
    found = quick_start.usual_start(str(start), tmp_path / "agent")
    repo = GitRepo.discover(start)
    assert found == (repo.root, repo.git_dir)


def test_an_unusual_start_is_left_to_the_full_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = one_commit_repo(tmp_path / "repo")
    agent = tmp_path / "agent"
    assert quick_start.usual_start(str(tmp_path), agent) is None  # not a repository
    assert quick_start.usual_start(str(root / "missing"), agent) is None
    (root / ".git" / "pi-rewind" / "journal").mkdir(parents=True)
    assert quick_start.usual_start(str(root), agent) is not None  # an empty journal directory
    (root / ".git" / "pi-rewind" / "journal" / "j.json").write_text("{}")
    assert quick_start.usual_start(str(root), agent) is None
    (root / ".git" / "pi-rewind" / "journal" / "j.json").unlink()
    marker = agent.joinpath(*quick_start.SHADOW_DIR, quick_start.shadow_key(str(root)))
    marker.mkdir(parents=True)
    (marker / quick_start.SHADOW_MARKER).write_text("{}")
    assert quick_start.usual_start(str(root), agent) is None
    (marker / quick_start.SHADOW_MARKER).unlink()
    with (root / ".git" / "config").open("a") as config:
        config.write("[extensions]\n\tworktreeConfig = true\n")
    assert quick_start.usual_start(str(root), agent) is None
    monkeypatch.setenv("GIT_DIR", str(root / ".git"))
    assert quick_start.usual_start(str(root), agent) is None


def test_the_bridge_looks_for_notices_where_they_are_left(tmp_path: Path) -> None:
    from ledger.bridge.overwrites import NOTICES_DIR
    from ledger.git.private import private_dir
    from ledger.overwrite_notices import NOTICES_DIR_NAME, addressee_dir

    assert NOTICES_DIR == NOTICES_DIR_NAME
    assert addressee_dir(tmp_path, "abc").parent == private_dir(tmp_path) / NOTICES_DIR
