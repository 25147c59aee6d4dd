"""Fixtures for the end-to-end tests with the real Pi CLI (see :mod:`tests.e2e.pikit`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.pikit import (
    PiRunner,
    PiUnavailable,
    RpcPi,
    TmuxPi,
    TmuxUnavailable,
    ensure_pi,
    ensure_tmux,
)
from tests.gitkit import git


@pytest.fixture(scope="session")
def pi_cli() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip(
            "end-to-end tests need Node.js and npm (to install and run the real Pi 0.73.1); "
            "node or npm is not installed"
        )
    try:
        return ensure_pi()
    except PiUnavailable as exc:  # node and npm exist: a failed install is a failure, not a skip
        pytest.fail(str(exc))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository with one commit and an ignore rule."""
    path = tmp_path / "project"
    path.mkdir()
    git(path, "init", "-q")
    git(path, "config", "user.name", "E2E")
    git(path, "config", "user.email", "e2e@example.com")
    (path / "README.md").write_text("# e2e\n")
    (path / ".gitignore").write_text("build/\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    return path.resolve()


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    path = tmp_path / "agent"
    path.mkdir()
    return path


@pytest.fixture
def pi(pi_cli: Path, project: Path, agent_dir: Path) -> PiRunner:
    return PiRunner(pi_cli, project, agent_dir)


@pytest.fixture
def start_rpc(pi_cli: Path, project: Path, agent_dir: Path):
    """Start ``pi --mode rpc`` (extra env allowed); every client is closed after the test."""
    clients: list[RpcPi] = []

    def start(*extra: str, env: dict[str, str] | None = None) -> RpcPi:
        client = RpcPi(pi_cli, project, agent_dir, *extra, env=env)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.close()


@pytest.fixture(scope="session")
def tmux_bin() -> str:
    """tmux, installed with apt-get when missing; the interactive tests skip only if it cannot be had."""
    try:
        return ensure_tmux()
    except TmuxUnavailable as exc:
        pytest.skip(f"interactive end-to-end tests need tmux: {exc}")


@pytest.fixture
def start_tui(tmux_bin: str, pi_cli: Path, project: Path, agent_dir: Path):
    """Start the real interactive Pi in tmux (settings: /tree lists user messages and asks no
    summary question, so a test picks entries by typing a search); every pane is closed after."""
    import json

    panes: list[TmuxPi] = []

    def start(
        *extra: str,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        settings: dict | None = None,
    ) -> TmuxPi:
        merged = {
            "treeFilterMode": "user-only",
            "branchSummary": {"skipPrompt": True},
            **(settings or {}),
        }
        (agent_dir / "settings.json").write_text(json.dumps(merged))
        pane = TmuxPi(tmux_bin, pi_cli, project, agent_dir, *extra, env=env, args=args)
        panes.append(pane)
        pane.wait_for("scripted-1", timeout=90)
        return pane

    yield start
    for pane in panes:
        pane.close()
