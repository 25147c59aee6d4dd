"""The repositories a watcher opened for the commands it serves, kept from one command to the
next while nothing git's discovery reads has changed.

Why it exists: a served command (:mod:`ledger.bridge.served_commands`) opens its repository as a
command of its own would, through ``git rev-parse`` (:func:`ledger.git.locate.locate`) and
libgit2: ~3 ms of a served ``rewind restore`` whose whole budget is ~80 ms at 100k files
(issue 34). The watcher runs every served command in one environment (the clients' own, checked
in the hello), so what git answers from a directory changes only when the files discovery
reads change; this module keeps the answer, with a stamp of those files, and opens again when
any of them differs.

Invariants:
- Only a real repository that opened without a notice is kept (never a shadow: their layout is
  the agent dir's, and opening one may create or migrate it), for one start directory and one
  agent dir; a writer's migration check (:func:`ledger.git.shadow.upkeep.migrate_if_needed`)
  runs at every command, as it does when the repository is opened.
- Reused only when the stamp is equal: the identity (device, inode, type, owner; and for a file
  its modification time and size) of every directory from the start up to the work tree's
  root and of what git looks for in each (``.git``; ``HEAD``, ``objects``, ``refs`` of a bare
  directory): creating or removing a ``.git``, a mount, a rename, a change of owner or of a
  ``.git`` file's ``gitdir:`` line changes one. Also the git dir's ``config``,
  ``config.worktree`` and ``commondir`` (``core.worktree``, ``core.bare``, a linked work
  tree's common dir). A directory's own modification time is left out (a root changes at every
  write). The stamp is taken *before* the repository is opened and checked again after: a
  change during the opening is never kept. The start is resolved (``realpath``) at every
  look-up, so a symlink changed in its path is another key. Git's discovery is redirected by
  none of the environment (:func:`ledger.cli.served.find_repository` declines then).
- Only for the watcher's served commands, which run one at a time
  (``served_commands._ONE_AT_A_TIME``); a lock keeps this safe anyway. Bounded: a few entries.
"""

from __future__ import annotations

import os
import stat
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from ledger.git.repo import GitRepo

_MAX = 8
"""Start directories kept (a watcher serves one repository; its users start from a few)."""

Identity = tuple[int, int, int, int, int, int]
"""``(st_dev, st_ino, file type, st_uid, st_mtime_ns or 0 for a directory, st_size)``."""
Stamp = tuple[Identity | None, ...]

_KEPT: dict[tuple[str, str], tuple[Stamp, GitRepo]] = {}
_LOCK = threading.Lock()


def _identity(path: str) -> Identity | None:
    """``path``'s identity, ``None`` when absent. A directory's modification time is left out:
    what discovery reads of a directory is what it is (and what holds it), not the files
    created in it meanwhile (a work tree's root and its ``.git`` change at every write)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    changed = 0 if stat.S_ISDIR(info.st_mode) else info.st_mtime_ns
    return info.st_dev, info.st_ino, stat.S_IFMT(info.st_mode), info.st_uid, changed, info.st_size


_LOOKED_AT = (".git", "HEAD", "objects", "refs")
"""What git looks for in each directory on its way up: a ``.git``, or the directory itself
being a git dir (a bare repository holds ``HEAD``, ``objects`` and ``refs``)."""


def stamp(start: str, root: str, git_dir: str) -> Stamp | None:
    """What git's discovery from ``start`` reads when it finds the work tree ``root`` with the
    git dir ``git_dir``, as identities; ``None`` when ``start`` is not inside ``root``."""
    here = start
    chain: list[Identity | None] = []
    while True:
        chain.append(_identity(here))
        chain += [_identity(os.path.join(here, name)) for name in _LOOKED_AT]
        if here == root:
            break
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
    chain += [
        _identity(os.path.join(git_dir, "config")),
        _identity(os.path.join(git_dir, "config.worktree")),
        _identity(os.path.join(git_dir, "commondir")),
    ]
    return tuple(chain)


class Pending:
    """The stamp of a start directory taken *before* its repository is opened: kept with the
    repository only when the opening found what the stamp assumed and nothing changed meanwhile
    (a change during the opening is never kept as if it had been seen)."""

    __slots__ = ("git_dir", "key", "root", "stamp")

    def __init__(self, key: tuple[str, str], root: str, git_dir: str, stamp: Stamp) -> None:
        self.key, self.root, self.git_dir, self.stamp = key, root, git_dir, stamp


def kept(start: Path, agent_dir: Path) -> GitRepo | Pending | None:
    """The repository opened before from ``start`` (for ``agent_dir``) when nothing its
    discovery reads has changed since; else what to pass to :func:`keep` once it is opened
    (``None``: nothing will be kept, e.g. git's discovery is redirected by the environment)."""
    from ledger.cli.served import find_repository

    real = os.path.realpath(start)
    key = (real, str(agent_dir))
    found = find_repository(real)
    if found is None:
        return None
    root, git_dir = found
    now = stamp(real, root, git_dir)
    if now is None or now[0] is None or now[-3] is None:  # a git dir with its own config
        return None
    with _LOCK:
        held = _KEPT.get(key)
    if held is not None:
        then, repo = held
        if then == now and (str(repo.root), str(repo.git_dir)) == found:
            return repo
        with _LOCK:
            _KEPT.pop(key, None)
    return Pending(key, root, git_dir, now)


def keep(pending: Pending, repo: GitRepo) -> None:
    """Keep ``repo``, just opened without a notice from the start of ``pending``, when it is
    the repository ``pending`` assumed and nothing discovery reads changed meanwhile."""
    from ledger.git.shadow.layout import ShadowRepo

    if isinstance(repo, ShadowRepo) or (str(repo.root), str(repo.git_dir)) != (
        pending.root,
        pending.git_dir,
    ):
        return
    if stamp(pending.key[0], pending.root, pending.git_dir) != pending.stamp:
        return
    with _LOCK:
        if len(_KEPT) >= _MAX:
            _KEPT.clear()
        _KEPT[pending.key] = (pending.stamp, repo)


def forget() -> None:
    """Drop every kept repository (tests)."""
    with _LOCK:
        _KEPT.clear()


__all__ = ["Pending", "forget", "keep", "kept", "stamp"]
