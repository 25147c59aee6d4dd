"""Fixtures of the integration tests: real repositories, real git, no mocks.

The helpers live in :mod:`tests.gitkit` (git, repositories, oracles) and :mod:`tests.snapshotkit`
(capture, snapshot, restore through ledger); fixtures here only wrap them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridgekit import FakePi
from tests.gitkit import (
    git,
    init_repo,
    write,
)
from tests.snapshotkit import snapshot


@pytest.fixture
def agent_dir(isolated_env: Path) -> Path:
    """Pi's agent dir inside the test's own ``$HOME``."""
    return isolated_env / ".pi" / "agent"


@pytest.fixture
def bridge_pi(repo: Path, agent_dir: Path) -> Iterator[FakePi]:
    """A fake Pi host on a real ``rewind serve --stdio``, its session started."""
    fake = FakePi(repo, agent_dir)
    assert fake.event("session_start", {"reason": "startup"}).error is None
    yield fake
    fake.close()


@pytest.fixture
def superproject(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Reference case 15's setup: a source repository with commits v1 and v2, and a
    superproject with an empty commit and the source added as submodule ``nested``, checked out
    at v2. Returns the superproject and snapshot commits ``before`` (no submodule), ``first``
    (v1), ``second`` (v2), and the source's ``v1`` commit."""
    src = init_repo(tmp_path / "src")
    write(src, "file.txt", "submodule v1\n")
    git(src, "add", "file.txt")
    git(src, "commit", "-q", "-m", "v1")
    write(src, "file.txt", "submodule v2\n")
    git(src, "commit", "-q", "-am", "v2")

    sup = init_repo(tmp_path / "super")
    git(sup, "commit", "-q", "--allow-empty", "-m", "empty")
    points = {"before": snapshot(sup)}
    git(sup, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(src), "nested")
    git(sup / "nested", "checkout", "-q", "HEAD~1")
    git(sup, "commit", "-q", "-am", "pin v1")
    points["first"] = snapshot(sup)
    git(sup / "nested", "checkout", "-q", "main")
    git(sup, "commit", "-q", "-am", "pin v2")
    points["second"] = snapshot(sup)
    points["v1"] = git(src, "rev-parse", "HEAD~1").strip()
    return sup, points


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Real child processes a test starts (writers, lock holders); killed at its end, stopped
    ones too."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()  # SIGKILL ends a stopped process too
        child.wait()
