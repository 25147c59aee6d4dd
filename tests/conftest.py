"""Test-wide isolation: every test gets its own $HOME, agent dir and git configuration.

Nothing a test does may read or write the developer's ~/.gitconfig, ~/.pi or system git config,
and a test must not pass because of them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

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
    return home


def git(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    """Run real git in ``cwd`` and return stdout (text)."""
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
    return result.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh git repository with an identity and one commit."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    git(path, "config", "user.name", "Rewind Test")
    git(path, "config", "user.email", "rewind@example.com")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "initial")
    return path


def source_repo(parent: Path, name: str = "source", text: str = "submodule v1\n") -> Path:
    """A small repository with one commit of ``file.txt``, to add as a submodule."""
    source = parent / name
    source.mkdir()
    git(source, "init", "-q")
    git(source, "config", "user.name", "T")
    git(source, "config", "user.email", "t@e")
    (source / "file.txt").write_text(text)
    git(source, "add", "-A")
    git(source, "commit", "-qm", "v1")
    return source
