"""git's configuration is kept per process only while nothing it came from changed
(ledger/git/config_view.py): the restore's in-process decision and the undo snapshot's identity
depend on it. Real git; the count of ``git config`` processes is read from ``GitRunner.run``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from ledger.git import config_view
from ledger.git.config_view import config_view as view_of
from ledger.git.repo import GitRepo
from ledger.git.runner import GitRunner
from tests.gitkit import git, write


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = GitRunner.run

    def listening(self: GitRunner, args: Sequence[str], **kwargs: object) -> object:
        seen.append(args[0])
        return real(self, args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(GitRunner, "run", listening)
    # These repositories' files were all written a moment ago, which the racy rule (a view of
    # files changed within two seconds is never kept) would apply to: off here, tested below.
    monkeypatch.setattr(config_view, "_FRESH_NS", 0)
    monkeypatch.setattr(config_view, "_FRESH_FINE_NS", 0)
    config_view.forget()
    return seen


def test_the_view_is_kept_while_nothing_changes(repo: Path, asked: list[str]) -> None:
    gitrepo = GitRepo.discover(repo)
    first = view_of(gitrepo)
    assert view_of(gitrepo) is first and view_of(gitrepo) is first
    assert asked.count("config") == 1
    assert first.values["user.name"] == "Rewind Test"


def test_a_changed_repository_config_is_read_again(repo: Path, asked: list[str]) -> None:
    gitrepo = GitRepo.discover(repo)
    assert "filter.x.smudge" not in view_of(gitrepo).values
    git(repo, "config", "filter.x.smudge", "cat")
    assert view_of(gitrepo).values["filter.x.smudge"] == "cat"
    assert asked.count("config") == 2


def test_an_include_created_later_is_seen(repo: Path, tmp_path: Path, asked: list[str]) -> None:
    """A missing include shows no origin in git's answer: its path is watched all the same."""
    included = tmp_path / "later.gitconfig"
    git(repo, "config", "include.path", str(included))
    gitrepo = GitRepo.discover(repo)
    assert not view_of(gitrepo).has_prefix("filter.")
    write(tmp_path, "later.gitconfig", '[filter "lfs"]\n\tsmudge = cat\n')
    assert view_of(gitrepo).has_prefix("filter.")


def test_a_relative_include_is_watched_beside_its_file(repo: Path, asked: list[str]) -> None:
    git(repo, "config", "include.path", "extra.config")  # relative to .git/config
    gitrepo = GitRepo.discover(repo)
    assert "core.eol" not in view_of(gitrepo).values
    write(repo / ".git", "extra.config", "[core]\n\teol = crlf\n")
    assert view_of(gitrepo).values["core.eol"] == "crlf"


def test_the_environment_is_part_of_the_view(
    repo: Path, monkeypatch: pytest.MonkeyPatch, asked: list[str]
) -> None:
    gitrepo = GitRepo.discover(repo)
    assert "core.eol" not in view_of(gitrepo).values
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.eol")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "crlf")
    assert view_of(gitrepo).values["core.eol"] == "crlf"


def test_a_new_global_file_is_seen(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch, asked: list[str]
) -> None:
    """``$XDG_CONFIG_HOME/git/config`` did not exist when the view was read."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(isolated_env / "xdg"))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")
    gitrepo = GitRepo.discover(repo)
    assert "core.attributesfile" not in view_of(gitrepo).values
    write(isolated_env, "xdg/git/config", "[core]\n\tattributesFile = /nowhere\n")
    assert view_of(gitrepo).values["core.attributesfile"] == "/nowhere"


def test_a_view_of_files_changed_within_two_seconds_is_not_kept(
    repo: Path, asked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """git's racy-timestamp rule: a file changed within the kernel's coarse clock tick of the
    read may change again in place, same size, same stat data; such a view is used, not kept
    (fails without the rule: the second view was the first)."""
    monkeypatch.setattr(config_view, "_FRESH_NS", 2_000_000_000)
    monkeypatch.setattr(config_view, "_FRESH_FINE_NS", 2_000_000_000)
    gitrepo = GitRepo.discover(repo)
    git(repo, "config", "core.eol", "lf")  # just written
    assert view_of(gitrepo) is not view_of(gitrepo)
    assert asked.count("config") == 2
    monkeypatch.setattr(config_view, "_FRESH_NS", 50_000_000)
    monkeypatch.setattr(config_view, "_FRESH_FINE_NS", 50_000_000)
    time.sleep(0.1)  # the files are now older than the (shortened) window
    first = view_of(gitrepo)
    assert view_of(gitrepo) is first
    assert asked.count("config") == 3


def test_the_pairs_are_gits_own_list_in_its_order(repo: Path, asked: list[str]) -> None:
    """What the capture's fingerprint hashes: ``git config -z --list`` exactly, a key set twice
    listed twice, a key without ``=`` as ``None``, ``key =`` as ``""`` (the private index's
    fingerprint must not change with the way it is read)."""
    git(repo, "config", "--add", "remote.x.fetch", "one")
    git(repo, "config", "--add", "remote.x.fetch", "two")
    with (repo / ".git" / "config").open("a") as f:
        f.write("[bare]\n\tflag\n\tempty =\n")
    runner = GitRunner(repo, repo / ".git")
    listed = []
    for record in runner.run(["config", "-z", "--list"]).lines_z():
        key, newline, value = record.decode("utf-8", "surrogateescape").partition("\n")
        listed.append((key.lower(), value if newline else None))
    pairs = view_of(GitRepo.discover(repo)).pairs
    assert list(pairs) == listed
    assert ("bare.flag", None) in pairs and ("bare.empty", "") in pairs
    assert [v for k, v in pairs if k == "remote.x.fetch"] == ["one", "two"]


def test_the_racy_window_is_one_clock_tick_where_times_have_fractions() -> None:
    """Whole-second times (FAT, old file systems): two seconds; sub-second times: 20 ms, above
    one tick of the kernel's coarse clock. A file changed later than the read counts (a clock
    set back, a server's clock ahead)."""
    now = 1_800_000_000_123_456_789
    fine = (1, 2, 3, now - 15_000_000, now - 15_000_000)
    assert config_view._racy(fine, now)
    assert not config_view._racy((1, 2, 3, now - 30_000_000, now - 30_000_000), now)
    whole = now - now % 1_000_000_000 - 1_000_000_000
    assert config_view._racy((1, 2, 3, whole, whole), now)
    assert not config_view._racy((1, 2, 3, whole - 2_000_000_000, whole - 2_000_000_000), now)
    assert config_view._racy((1, 2, 3, now + 5_000_000_000, now), now)
    assert not config_view._racy(None, now)
