"""One work tree, however shadow repositories nest: the git directories whose work trees share
files with this one, and the live sessions of all of them (docs/shadow.md#nested-directories).

Why it exists: a Pi session in ``scratch/sub`` (not git) records into a shadow repository for
``sub``; a session started later in ``scratch`` gets a second shadow, for ``scratch``, whose
work tree holds ``sub/`` too. Every per-repository safeguard keyed by a git directory (the turn
gate :mod:`ledger.turngate`, the presence registry :mod:`ledger.presence`) then existed twice
for one file: a restore in ``scratch`` overwrote ``sub/work.txt`` during a turn of the ``sub``
session, which nobody named. This module says which git directories form one **scope**: this
one, and every shadow of the same agent dir whose directory contains this one's or lies inside
it (:func:`ledger.git.shadow.layout.overlapping_shadows`). The turn gate holds all of their
gates, and every listing of "the sessions here" (the gate's words, the footer, ``rewind
status``/``doctor``, attribution) is the union of their registries.

Invariants:
- Read-only: lists directories and reads registries through :func:`ledger.presence.
  live_sessions` (which also removes dead entries there, as any listing does).
- A real repository's scope is itself alone: a shadow inside a repository's work tree does not
  serve it (the repository wins), and a repository inside a shadowed directory is a gitlink its
  shadow never writes into (docs/design.md#submodules-and-embedded-repositories).
- Deterministic: the scope's git directories are sorted by path, the one global order in which
  gates are taken (two restores never deadlock).
"""

from __future__ import annotations

import os
import posixpath
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.plain import FrozenPlain

if TYPE_CHECKING:
    from ledger.git.repo import GitRepo
    from ledger.git.restore.journal import Journal
    from ledger.presence import Presence


class Member(FrozenPlain):
    """One git directory of a scope and the directory its work tree is. Not a dataclass: created
    before a spawned bridge's first answer (ledger/plain.py)."""

    __slots__ = ("git_dir", "own", "root")
    git_dir: Path
    root: Path | None
    """The work tree's directory (a shadow's served directory; for a repository ``<root>/.git``
    its parent), or None when the git directory does not say (then it names nothing)."""
    own: bool

    def __init__(self, git_dir: Path, root: Path | None, own: bool = False) -> None:
        self._init(git_dir=git_dir, root=root, own=own)

    def path_from(self, own_root: Path | None, path: str) -> str | None:
        """``path`` (relative to ``own_root``, ``/``-separated as git has it) relative to this
        member's root, or None when it lies outside this member's work tree."""
        if self.own or self.root is None or own_root is None:
            return path if self.own else None
        return translate(path, own_root, self.root)


def translate(path: str, from_root: Path, to_root: Path) -> str | None:
    """A work-tree path under ``from_root`` as the same file's path under ``to_root`` (one root
    inside the other), or None when the file is not in ``to_root``'s tree."""
    source, target = os.fspath(from_root), os.fspath(to_root)
    if source == target:
        return path
    if target.startswith(source.rstrip(os.sep) + os.sep):  # an inner work tree
        prefix = Path(os.path.relpath(target, source)).as_posix() + "/"
        return path[len(prefix) :] if path.startswith(prefix) else None
    if source.startswith(target.rstrip(os.sep) + os.sep):  # an enclosing one
        return posixpath.join(Path(os.path.relpath(source, target)).as_posix(), path)
    return None


def root_of(git_dir: Path) -> Path | None:
    """The directory whose files ``git_dir`` records (see :attr:`Member.root`)."""
    git_dir = Path(git_dir)
    if git_dir.name == ".git":  # never a shadow's (``GIT_SUBDIR``): no need to load pygit2
        return Path(os.path.realpath(git_dir.parent))
    from ledger.git.shadow.layout import GIT_SUBDIR, served_directory

    if git_dir.name == GIT_SUBDIR:
        served = served_directory(git_dir.parent)
        if served is not None:
            return Path(served)
    if git_dir.name == ".git":
        return Path(os.path.realpath(git_dir.parent))
    return None


def scope(git_dir: Path) -> list[Member]:
    """This git directory first, then the overlapping shadows' (sorted by git dir)."""
    git_dir = Path(git_dir)
    if git_dir.name == ".git":  # a repository's own: no shadow overlaps it (as below)
        return [Member(git_dir, root_of(git_dir), own=True)]
    from ledger.git.shadow.layout import GIT_SUBDIR, overlapping_shadows, served_directory

    served = served_directory(git_dir.parent) if git_dir.name == GIT_SUBDIR else None
    if served is None:
        return [Member(git_dir, root_of(git_dir), own=True)]
    others = [Member(g, d) for g, d in overlapping_shadows(git_dir.parent, served)]
    return [Member(git_dir, Path(served), own=True), *others]


def gate_order(members: list[Member]) -> list[Member]:
    """The scope in the one global order gates are taken in (by git directory path)."""
    return sorted(members, key=lambda member: os.fspath(member.git_dir))


def live_here(git_dir: Path) -> list[tuple[Presence, Member]]:
    """The live sessions of every git directory of the scope, each with its member, oldest
    first (one session announces itself once, in its own registry)."""
    from ledger.presence import live_sessions

    found: list[tuple[Presence, Member]] = []
    for member in scope(git_dir):
        found.extend((entry, member) for entry in live_sessions(member.git_dir))
    found.sort(key=lambda pair: (pair[0].started_ms, pair[0].stem))
    return found


def live_sessions_here(git_dir: Path) -> list[Presence]:
    """:func:`live_here` without the members: the sessions whose agents write this work tree."""
    return [entry for entry, _ in live_here(git_dir)]


def where(member: Member) -> str | None:
    """The directory to name for a session of ``member`` when it is not this work tree's own."""
    return None if member.own or member.root is None else str(member.root)


def running_restores_here(repo: GitRepo) -> list[Journal]:
    """The running restores (live journals) of every git directory of the scope, oldest first."""
    from ledger.errors import LedgerError
    from ledger.git.restore.journal import open_journals
    from ledger.git.shadow.layout import ShadowRepo, shadow_of_git_dir

    running: list[Journal] = []
    for member in scope(repo.git_dir):
        if member.own:
            handle: GitRepo = repo
        else:
            info = shadow_of_git_dir(member.git_dir)
            if info is None:
                continue
            try:
                handle = ShadowRepo.open(info)
            except LedgerError:
                continue  # a shadow that cannot be opened runs nothing here
        journals, _ = open_journals(handle)
        running.extend(j for j in journals if j.owner_alive())
    running.sort(key=lambda j: (j.started_ms, j.id))
    return running


class ScopeView:
    """The bridge's cached view of :func:`live_sessions_here` for its footer: listed again when
    a registry directory or the set of shadows changed (a session came or went, a shadow was
    made or removed), or after :data:`TTL_S` (a process died). Between changes an event costs
    a few ``stat`` calls, as :class:`ledger.presence.PresenceView` does for one registry."""

    TTL_S = 1.0

    def __init__(self) -> None:
        self._key: tuple[tuple[str, int], ...] | None = None
        self._at = 0.0
        self._live: list[Presence] = []
        self._members: tuple[str, int, list[Member]] | None = None
        """The scope as last listed, keyed by the shadow root and its modification time."""

    def live(self, git_dir: Path) -> list[Presence]:
        now = time.monotonic()
        key = self._change_key(git_dir)
        if key != self._key or now - self._at >= self.TTL_S:
            self._live = live_sessions_here(git_dir)
            # The listing may have removed dead entries: key on the directories as they are now.
            self._key, self._at = self._change_key(git_dir), now
        return self._live

    def _scope(self, git_dir: Path) -> list[Member]:
        git_dir = Path(git_dir)
        if git_dir.name == ".git":  # never a shadow's: a spawned bridge's first answer does
            return [Member(git_dir, None, own=True)]  # without pygit2 (bridge/quick_start.py)
        from ledger.git.shadow.layout import GIT_SUBDIR, served_directory

        if git_dir.name != GIT_SUBDIR or served_directory(git_dir.parent) is None:
            return [Member(git_dir, None, own=True)]
        mtime = _mtime(git_dir.parent.parent)  # the shadow root: a shadow made or removed
        cached = self._members
        if cached is None or cached[0] != str(git_dir) or cached[1] != mtime or mtime == 0:
            cached = self._members = (str(git_dir), mtime, scope(git_dir))
        return cached[2]

    def _change_key(self, git_dir: Path) -> tuple[tuple[str, int], ...]:
        """The modification times of what a listing reads: the registries of the scope (and,
        through :meth:`_scope`, the shadow root: a new shadow joins the scope)."""
        from ledger.presence import registry_dir

        members = self._scope(git_dir)
        key = [(str(m.git_dir), _mtime(registry_dir(m.git_dir))) for m in members]
        return tuple(key)


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


__all__ = [
    "Member",
    "ScopeView",
    "gate_order",
    "live_here",
    "live_sessions_here",
    "root_of",
    "running_restores_here",
    "scope",
    "translate",
    "where",
]
