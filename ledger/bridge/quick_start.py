"""Pi's ``session_start`` answered before the engine and pygit2 are loaded (issue 34 item 2).

Why it exists: Pi waits for the spawned bridge's answer to ``session_start`` before it goes on
(tools/pi-extension/rewind-ledger.ts). Starting the engine costs a fresh process ~250 ms of
imports at 100k files (pygit2 with ``ssl``, and ~85 modules of the engine), yet for the usual
start (a new session in a plain git repository, nothing left over) the answer is known without
any of it: no notices, and the footer ``◆ 0 points / 0 snapshots``. This module decides, with a
few ``stat`` calls and one ``git rev-parse``, whether the start is that usual one
(:func:`usual_start`); :mod:`ledger.bridge.dispatch` then answers from what it found and starts
the engine right after the answer (:func:`ledger.bridge.dispatch.finish_start`), before it reads
the next event.

Invariants:
- The answer is the one the full start gives, or this path is not taken. It is taken only for
  a spawned bridge (``kind == "bridge"``; a watcher's hosted sessions have the engine loaded),
  a start that is not a fork's (a fork imports its parent's records), no ``GIT_DIR``,
  ``GIT_WORK_TREE`` or ``GIT_COMMON_DIR`` in the environment, a work tree whose git directory
  is its own ``.git`` directory (no linked worktree, no separate git dir), a repository
  configuration without ``extensions`` (libgit2 might refuse one that git accepts), no shadow
  repository of that work tree (no migration to tell of), no restore journal (no interrupted
  restore to tell of), and a session with no ledger records and no parent session (its footer
  counts no points). Anything else takes the full start, as before.
- Read-only: the checks write nothing, so a start that does not qualify loses nothing.
- Imports nothing that loads pygit2 or the engine (pinned by
  tests/integration/test_quick_start.py); ``REWIND_QUICK_START=0`` turns the path off.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ledger.git.locate import locate

SHADOW_DIR = ("rewind", "shadow")
"""``ledger.git.shadow.layout.SHADOW_DIR`` (that module loads pygit2; a unit test holds the two
equal), under the agent directory."""
SHADOW_MARKER = "shadow.json"
"""``ledger.git.shadow.layout.MARKER``."""
JOURNAL_DIR = ("pi-rewind", "journal")
"""``ledger.git.restore.journal.journal_dir`` below the git directory."""
GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR")
"""Environment that moves git's discovery away from the plain layout: the full start decides."""


def shadow_key(directory: str) -> str:
    """``ledger.git.shadow.layout.shadow_key`` (held equal by a unit test)."""
    from ledger.digests import sha256  # not OpenSSL's _hashlib (~4 ms, issue 34)

    real = os.path.realpath(directory)
    digest = sha256(os.fsencode(real)).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real))[:40].lstrip(".") or "dir"
    return f"{name}-{digest}"


def usual_start(cwd: str | None, agent_dir: Path) -> tuple[Path, Path] | None:
    """``(root, git dir)``, both resolved as :class:`~ledger.git.repo.GitRepo` resolves them,
    when ``cwd`` is in a plain git work tree with nothing to tell at a session's start (module
    docstring); else None (the full start decides). Reads only."""
    if any(os.environ.get(name) for name in GIT_ENV):
        return None
    probe = Path(cwd or ".")
    if not probe.is_dir():
        return None
    found = locate(probe)
    if found is None:
        return None
    root, git_dir, common = (os.path.realpath(path) for path in found)
    start = os.path.realpath(probe)
    if git_dir != os.path.join(root, ".git") or common != git_dir or not os.path.isdir(git_dir):
        return None
    if not (start == root or start.startswith(root.rstrip(os.sep) + os.sep)):
        return None
    try:
        with open(os.path.join(git_dir, "config"), "rb") as config:
            if b"extensions" in config.read().lower():
                return None
    except OSError:
        return None
    shadows = os.path.join(agent_dir, *SHADOW_DIR)
    # No shadow directory, no marker: its key (a sha256) is needed only when there are shadows.
    if os.path.lexists(shadows) and os.path.lexists(
        os.path.join(shadows, shadow_key(root), SHADOW_MARKER)
    ):
        return None
    try:
        if os.listdir(os.path.join(git_dir, *JOURNAL_DIR)):
            return None
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError:
        return None
    return Path(root), Path(git_dir)


__all__ = ["usual_start"]
