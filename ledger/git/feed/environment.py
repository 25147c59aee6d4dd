"""The files outside the work tree whose changes the change feed cannot see as events.

Why it exists: a fed capture (:mod:`ledger.git.feed.service`) is exact only while the rules git
applies are those of its base. Configuration files, ``core.excludesFile`` and
``core.attributesFile`` can live anywhere, so no inotify watch reports their edits; the feed
compares their stat data (:func:`stat_sig`) at each capture instead, over the files
:func:`config_origins` names.

Invariants: read-only (one ``git config --list`` per call of :func:`config_origins`); a file
that cannot be stated has the signature ``None``, so its appearance is a change too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.git.capture.scan import Capturer

_ENV_PREFIXES = ("GIT_",)
_ENV_KEYS = ("HOME", "XDG_CONFIG_HOME")


def stat_sig(path: str) -> tuple[int, ...] | None:
    """Size, mtime, ctime and inode of ``path`` (``None``: it cannot be stated)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def config_origins(capturer: Capturer) -> list[str]:
    """The configuration files git reads, and the files ``core.excludesFile`` and
    ``core.attributesFile`` name (their rules apply to every path, and no event reports them)."""
    result = capturer.git.run(
        ["config", "--list", "--show-origin", "-z"], operation="git config", check=False
    )
    out: set[str] = set()
    named: dict[str, str] = {}
    for i, record in enumerate(result.lines_z()):
        if i % 2 == 0:
            if record.startswith(b"file:"):
                name = os.fsdecode(record[5:])
                out.add(name if os.path.isabs(name) else os.path.join(capturer.root_s, name))
            continue
        key, _, value = os.fsdecode(record).partition("\n")
        if key.lower() in ("core.excludesfile", "core.attributesfile"):
            named[key.lower()] = value  # the last one wins, as in git
    home = os.environ.get("HOME", "")
    for value in named.values():
        if value.startswith("~/") and home:
            value = os.path.join(home, value[2:])
        if value:
            out.add(value if os.path.isabs(value) else os.path.join(capturer.root_s, value))
    return sorted(out)


__all__ = ["config_origins", "stat_sig"]


def env_signature(
    origins: list[str], git_dir: Path, common: Path, include_index: bool
) -> tuple[Any, ...]:
    """Stat data of every file outside the work tree that shapes a capture (``origins``: the
    configuration files :func:`config_origins` named), and the environment; ``include_index``:
    the user's index too (it decides whether skipped protected directories and too-large files
    are captured)."""
    home = os.environ.get("HOME", "")
    xdg = os.environ.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    files = [
        *origins,
        str(git_dir / "config"),
        str(common / "config"),
        str(git_dir / "config.worktree"),
        str(common / "info" / "exclude"),
        str(common / "info" / "attributes"),
        os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        os.path.join(xdg, "git", "ignore"),
        os.path.join(xdg, "git", "attributes"),
        "/etc/gitconfig",
        "/etc/gitattributes",
    ]
    if include_index:
        files.append(str(git_dir / "index"))
    sigs = tuple((f, stat_sig(f)) for f in sorted(set(files)))
    env = tuple(
        sorted(
            (k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES) or k in _ENV_KEYS
        )
    )
    return sigs + env
