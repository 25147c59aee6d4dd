"""Shadow repositories over time: ``git init`` later, moved or deleted directories.

Why it exists: a shadow repository (:mod:`ledger.git.shadow.layout`) outlives the situation it was made
for. When the served directory becomes a git repository, its recorded rewind points must stay
restorable there; when the directory moves or disappears, the shadow is orphaned and only takes
space (docs/shadow.md#git-init-later, docs/shadow.md#orphaned-shadow-repositories).

Invariants:
- Migration copies objects into the real repository (git objects only: ``pack-objects`` piped
  into ``index-pack``) and appends the shadow's snapshots to its ``refs/pi-rewind/store`` with
  one compare-and-swap that keeps whatever the store already holds. It never touches the
  user's index, HEAD or branches, and is idempotent: a second run appends nothing. The shadow is
  then marked migrated (``shadow.json``), with the store head it migrated, so that snapshots a
  still running session adds later are migrated by the next writer.
- Only a shadow whose served directory **is** the repository's root is migrated: a shadow of a
  subdirectory holds trees rooted there, which a restore at the repository root must never see.
- Listing reads only; removal deletes only shadow homes under ``<agent-dir>/rewind/shadow`` that
  are orphaned when re-checked right before removal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from ledger.errors import GitError, LedgerError, NotARepositoryError
from ledger.git.repo import GitRepo
from ledger.git.runner import GitRunner
from ledger.git.shadow.layout import (
    GIT_SUBDIR,
    ShadowInfo,
    ShadowRepo,
    read_info,
    shadow_home,
    shadow_root,
    write_info,
)
from ledger.git.store.chain import Store
from ledger.plain import FrozenPlain

# --- git init later -----------------------------------------------------------------------


def migrate_if_needed(repo: GitRepo, agent_dir: Path) -> list[str]:
    """Migrate the shadow of ``repo.root`` if it has snapshots ``repo`` does not hold yet;
    the notices to show (one, on the migration that moved something)."""
    if isinstance(repo, ShadowRepo):
        return []
    info = read_info(shadow_home(agent_dir, repo.root))
    if info is None or str(info.directory) != str(repo.root):
        return []
    shadow_repo = ShadowRepo.open(info)
    head = Store(shadow_repo).head()
    if info.migrated_to == str(repo.root) and info.migrated_head == head:
        return []
    try:
        moved = migrate_shadow(shadow_repo, repo)
    except LedgerError as exc:
        return [
            f"{repo.root} became a git repository; moving the rewind points of its shadow "
            f"repository ({info.home}) into it failed: {exc.message}. They stay in the shadow; "
            "the next snapshot tries again"
        ]
    if info.migrated_to is None and moved:
        return [
            f"{repo.root} became a git repository: its {moved} rewind snapshot(s) were moved from "
            f"the shadow repository ({info.home}) into it; every recorded rewind point stays "
            "restorable"
        ]
    return []


def migrate_shadow(shadow: ShadowRepo, repo: GitRepo) -> int:
    """Copy the shadow's objects into ``repo`` and append its snapshots to ``repo``'s store;
    mark the shadow migrated. Returns how many snapshots were appended."""
    from ledger.git.store.chain import git_identity

    source = Store(shadow)
    head = source.head()
    appended: list[str] = []
    if head is not None:
        _copy_objects(shadow, repo)
        target = Store(repo)
        when = int(time.time())
        appended = target.append_many(
            source.snapshots(),
            git_identity(repo),
            when,
            int(time.localtime(when).tm_gmtoff // 60),
        )
    write_info(shadow.shadow.migrated(str(repo.root), head))
    return len(appended)


def _copy_objects(shadow: ShadowRepo, repo: GitRepo) -> None:
    """Every object the shadow's refs reach, into ``repo``'s object store (a new pack)."""
    source = GitRunner(shadow.root, shadow.git_dir)
    target = GitRunner(repo.root, repo.git_dir)
    try:
        packer = subprocess.Popen(
            source.command(["pack-objects", "--all", "--stdout", "-q"]),
            cwd=str(shadow.git_dir),
            env=source.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert packer.stdout is not None
        indexer = subprocess.run(
            target.command(["index-pack", "--stdin", "--fix-thin"]),
            cwd=str(repo.root),
            env=target.env(),
            stdin=packer.stdout,
            capture_output=True,
            check=False,
        )
        packer.stdout.close()
        pack_err = packer.stderr.read() if packer.stderr else b""
        packer.wait()
    except OSError as exc:
        raise GitError("copy shadow objects", str(exc)) from exc
    if packer.returncode != 0:
        raise GitError("git pack-objects (shadow)", pack_err.decode("utf-8", "replace"))
    if indexer.returncode != 0:
        raise GitError("git index-pack", indexer.stderr.decode("utf-8", "replace"))


# --- orphaned shadows ---------------------------------------------------------------------


class ShadowStatus(FrozenPlain):
    __slots__ = ("bytes", "directory", "home", "state")
    home: Path
    directory: str
    state: str
    """``active`` (serves its directory), ``gone`` (the directory no longer exists),
    ``migrated`` (its snapshots are in the directory's own repository now), ``in-repository``
    (the directory now lies inside another git work tree) or ``unreadable`` (no shadow.json)."""
    bytes: int

    def __init__(self, home: Path, directory: str, state: str, bytes: int) -> None:
        self._init(home=home, directory=directory, state=state, bytes=bytes)

    @property
    def orphaned(self) -> bool:
        return self.state != "active"

    def to_json(self) -> dict[str, object]:
        return {
            "home": str(self.home),
            "directory": self.directory,
            "state": self.state,
            "bytes": self.bytes,
        }


def shadow_state(info: ShadowInfo | None) -> str:
    if info is None:
        return "unreadable"
    if not info.directory.is_dir() or os.path.realpath(info.directory) != str(info.directory):
        return "gone"
    if info.migrated_to is not None:
        return "migrated"
    try:
        repo = GitRepo.discover(info.directory)
    except NotARepositoryError:
        return "active"
    return "migrated" if repo.root == info.directory else "in-repository"


def list_shadows(agent_dir: Path) -> list[ShadowStatus]:
    """Every shadow repository under the agent dir with its state and size on disk."""
    root = shadow_root(agent_dir)
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    found = []
    for name in names:
        home = root / name
        if name.startswith(".") or home.is_symlink() or not home.is_dir():
            continue
        if not (home / GIT_SUBDIR).is_dir():
            continue
        info = read_info(home)
        found.append(
            ShadowStatus(
                home,
                str(info.directory) if info else "?",
                shadow_state(info),
                _disk_usage(home),
            )
        )
    return found


def remove_orphaned(agent_dir: Path) -> list[ShadowStatus]:
    """Delete the orphaned shadow repositories; returns what was removed."""
    removed = []
    for status in list_shadows(agent_dir):
        if not status.orphaned:
            continue
        # Re-checked right before removal: the directory may have come back meanwhile.
        if shadow_state(read_info(status.home)) == "active":
            continue
        shutil.rmtree(status.home)
        removed.append(status)
    return removed


def _disk_usage(path: Path) -> int:
    total = 0
    for directory, _subdirs, files in os.walk(path, followlinks=False):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except OSError:
                continue
    return total


__all__ = [
    "ShadowStatus",
    "list_shadows",
    "migrate_if_needed",
    "migrate_shadow",
    "remove_orphaned",
    "shadow_state",
]
