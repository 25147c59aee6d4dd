"""Where git says the work tree, the git directory and the common directory are, seen from a
directory: the one ``git rev-parse`` every way into the repository starts with.

Why it exists apart from :mod:`ledger.git.repo`: that module loads pygit2, and a spawned bridge
answers Pi's first ``session_start`` before loading it (:mod:`ledger.bridge.quick_start`). Both
ask git here, the same way. Imports nothing but the standard library.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def locate(probe: Path) -> tuple[Path, Path, Path] | None:
    """``(work tree, git dir, common dir)`` as git sees them from ``probe``, or None outside a
    work tree (including inside a ``.git`` directory and in a bare repository).

    git reads the caller's ``GIT_DIR``/``GIT_WORK_TREE`` here on purpose: they say which work
    tree the user means. Everything after discovery runs git with these paths set explicitly
    (:mod:`ledger.git.runner`)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE", "GIT_PREFIX")
    }
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"],
            cwd=probe,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    # One path a line, split on b"\n" only: str.splitlines() would also split a directory name
    # holding U+2028 or \x1c, and every path is os.fsdecode of its bytes, as everywhere else.
    lines = [os.fsdecode(line) for line in result.stdout.split(b"\n")]
    if lines and not lines[-1]:
        lines.pop()
    if result.returncode != 0 or len(lines) != 3 or not lines[0]:
        return None
    common = Path(lines[2])
    if not common.is_absolute():
        common = probe / common
    return Path(lines[0]), Path(lines[1]), common


__all__ = ["locate"]
