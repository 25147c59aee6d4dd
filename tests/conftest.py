"""Test-wide isolation: every test gets its own $HOME, agent dir and git configuration.

Nothing a test does may read or write the developer's ~/.gitconfig, ~/.pi or system git config,
and a test must not pass because of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitkit import one_commit_repo
from tests.watchkit import watching

__all__ = ["watching"]  # a fixture of tests/watchkit.py, shared by the served-snapshot tests


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.needs("change_feed")`` and the like: the test exercises a Linux-only
    facility (:mod:`ledger.facilities`); where it is absent (another platform, or
    ``REWIND_PORTABLE=1``, as CI's second run has it) the test is skipped, saying which. Every
    other test runs there too: that run proves the fallbacks."""
    from ledger.facilities import facilities

    present = facilities()
    for item in items:
        for mark in item.iter_markers("needs"):
            for name in mark.args:
                if not getattr(present, name):
                    item.add_marker(
                        pytest.mark.skip(
                            reason=f"needs the {name.replace('_', ' ')}, absent here "
                            "(another platform, or REWIND_PORTABLE=1)"
                        )
                    )


_GIT_ENV_TO_DROP = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_DATE",
    "GIT_CEILING_DIRECTORIES",
    "PI_CODING_AGENT_DIR",
    "PI_CODING_AGENT_SESSION_DIR",
    "REWIND_DEBUG",
)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    for name in _GIT_ENV_TO_DROP:
        monkeypatch.delenv(name, raising=False)
    gitconfig = home / ".gitconfig"
    gitconfig.write_text('[init]\n\tdefaultBranch = main\n[protocol "file"]\n\tallow = always\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(home / ".pi" / "agent"))
    # Watchers are started by default (rewind.snapshot.autoWatchSeconds); one per test repository
    # would outlive its test by ten minutes. The tests of that default unset this.
    monkeypatch.setenv("REWIND_AUTO_WATCH", "0")
    return home


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh git repository with an identity and one commit (``README.md``)."""
    return one_commit_repo(tmp_path / "repo")
