"""A real headless Chromium for the report tests, installed from Debian's packages if missing.

The install runs once per test session under a file lock (several workers may ask at once); the
tests are skipped with a message only when Chromium cannot be had (no root, no apt, no network).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

_LOCK = Path(tempfile.gettempdir()) / "rewind-ledger-chromium-install.lock"


def _find() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _install() -> str:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "chromium is not installed and cannot be installed here (needs root and apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=900, check=False
        )
        if proc.returncode != 0:
            return f"installing chromium failed ({' '.join(cmd)}): {proc.stderr.strip()[-300:]}"
    return ""


@pytest.fixture(scope="session")
def chromium() -> str:
    found = _find()
    if found:
        return found
    with open(_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _find()
        if found:
            return found
        problem = _install()
    found = _find()
    if not found:
        pytest.skip(f"no Chromium for the browser test: {problem or 'not found after installing'}")
    return found
