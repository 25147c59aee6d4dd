"""A session the watcher hosts opens its repository from the watcher's own git answer when its
cwd is the work tree's root, instead of running ``git rev-parse`` again (~2 ms of every hosted
``session_start``, issue 34; docs/capture.md#hosted-sessions). Elsewhere git is asked as before,
and every layout check still runs on the answer given."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from ledger.bridge.hosted import HostedSessions, socket_path
from ledger.errors import NotARepositoryError
from ledger.git import repo as repo_module
from ledger.git.locate import Located, locate
from ledger.git.repo import GitRepo
from tests.bridgekit import FakePi, prompts_stay_exact


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    asked: list[Path] = []
    real = repo_module.locate

    def counting(probe: Path) -> Located | None:
        asked.append(probe)
        return real(probe)

    monkeypatch.setattr(repo_module, "locate", counting)
    return asked


def test_a_known_answer_opens_the_root_and_a_symlink_to_it_without_asking_git(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    known = locate(repo)
    assert known is not None
    asked = _counting(monkeypatch)
    link = tmp_path / "link"
    link.symlink_to(repo)
    for start in (repo, link):
        opened = GitRepo.discover(start, known=known)
        plain = GitRepo.discover(start)
        assert (opened.root, opened.git_dir, opened.common_dir) == (
            plain.root,
            plain.git_dir,
            plain.common_dir,
        )
    assert asked == [repo, link], "only the discoveries without the known answer asked git"


def test_a_subdirectory_asks_git_as_before(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    known = locate(repo)
    assert known is not None
    (repo / "sub").mkdir()
    asked = _counting(monkeypatch)
    opened = GitRepo.discover(repo / "sub", known=known)
    assert asked == [repo / "sub"] and opened.root == known[0]


def test_a_known_answer_naming_no_repository_is_refused_as_git_would(
    repo: Path, tmp_path: Path
) -> None:
    # The checks after git's answer run on a known one too: nothing is opened from a git dir
    # that is not one.
    bogus = tmp_path / "not-a-git-dir"
    bogus.mkdir()
    with pytest.raises(NotARepositoryError):
        GitRepo.discover(repo, known=(Path(os.path.realpath(repo)), bogus, bogus))


@pytest.mark.needs("peer_credentials")
def test_a_hosted_session_at_the_root_asks_git_nothing_to_open_its_repository(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The watcher's hosting in this process, as `rewind serve --watch` makes it; what the
    # session's own thread asks git is counted (the watcher's other threads, its sweeps and
    # verifications, open their own repositories as before).
    watched = GitRepo.discover(repo)
    asked: list[str] = []
    real = repo_module.locate

    def counting(probe: Path) -> Located | None:
        asked.append(threading.current_thread().name)
        return real(probe)

    monkeypatch.setattr(repo_module, "locate", counting)
    hosting = HostedSessions(watched.root, watched.git_dir, common_dir=watched.common_dir)
    assert hosting.start(), hosting.refusal
    try:
        pi = FakePi(repo, isolated_env / ".pi" / "agent", hosted=socket_path(repo / ".git"))
        assert pi.event("session_start", {"reason": "startup"}).error is None
        prompts_stay_exact(pi, 2, "hosted at the root")
        assert pi.close() == 0
    finally:
        hosting.close()
    assert hosting.hosted == 1
    assert "rewind-hosted-session" not in asked, asked
