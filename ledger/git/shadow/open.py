"""Opening a directory for rewind: its git repository, or the shadow repository that serves it
(created, or migrated into a repository made since, as needed) (docs/shadow.md).

Why it exists: every entry point (a Pi session's bridge, the CLI, the watcher) asks the same
question of a directory, and the answer touches both the shadow layout (:mod:`ledger.git.shadow.layout`)
and the shadow's upkeep (:mod:`ledger.git.shadow.upkeep`, which migrates a shadow's snapshots
into a repository made after it). This module is above both, so neither imports the other's
callers.

Invariants: read-only unless ``create`` (a new shadow) or ``migrate`` (copying a shadow's
snapshots into the new repository's store); never writes inside the directory itself; refuses a
git directory (a bare repository, a ``--separate-git-dir`` target) as a work tree.
"""

from __future__ import annotations

from pathlib import Path

from ledger.errors import NoShadowError, NotARepositoryError, ShadowRefusedError, UnsafeLayoutError
from ledger.git.locate import Located
from ledger.git.repo import GitRepo, git_dir_at_or_above
from ledger.git.shadow.layout import (
    ShadowInfo,
    ShadowRepo,
    create_shadow,
    find_shadow,
    git_dir_reason,
    refusal,
    shadows_enabled,
    write_info,
)
from ledger.git.shadow.upkeep import migrate_if_needed
from ledger.plain import Plain


class OpenedWorkTree(Plain):
    """What :func:`open_work_tree` found, and what the user should be told once."""

    __slots__ = ("notices", "repo")
    repo: GitRepo
    notices: list[str]

    def __init__(self, repo: GitRepo, notices: list[str] | None = None) -> None:
        self.repo = repo
        self.notices = [] if notices is None else notices

    @property
    def shadow(self) -> ShadowInfo | None:
        return self.repo.shadow if isinstance(self.repo, ShadowRepo) else None


def open_work_tree(
    start: Path | str,
    agent_dir: Path,
    *,
    create: bool,
    migrate: bool | None = None,
    known: Located | None = None,
) -> OpenedWorkTree:
    """The repository for ``start``: the real one when git finds one, else the shadow serving
    ``start`` (created for ``start`` itself when ``create`` and none exists).

    ``migrate`` (default: ``create``): when the real repository's root has a shadow whose
    snapshots it does not hold yet (``git init`` happened), copy them over
    (:func:`ledger.git.shadow.upkeep.migrate_shadow`). Read-only callers pass neither.
    ``known``: see :meth:`GitRepo.discover`.

    Raises :class:`NotARepositoryError` (also :class:`UnsafeLayoutError`),
    :class:`ShadowRefusedError` or :class:`NoShadowError`."""
    path = Path(start)
    probe = path if path.is_dir() else path.parent
    try:
        repo = GitRepo.discover(path, known=known)
    except UnsafeLayoutError:
        raise
    except NotARepositoryError:
        if not probe.is_dir():
            raise
    else:
        opened = OpenedWorkTree(repo)
        if create if migrate is None else migrate:
            opened.notices += migrate_if_needed(repo, agent_dir)
        return opened
    info = find_shadow(probe, agent_dir)
    notices: list[str] = []
    git_dir = git_dir_at_or_above(probe)
    if git_dir is not None:
        # Also for a shadow an older version made: never capture or restore git's own files.
        raise ShadowRefusedError(probe, git_dir_reason(probe, git_dir), git_dir=git_dir)
    if info is None:
        reason = refusal(probe, agent_dir)
        if reason is not None:
            raise ShadowRefusedError(probe, reason)
        if not create:
            raise NoShadowError(probe)
        if not shadows_enabled(agent_dir, probe):
            raise NotARepositoryError(probe)
        info = create_shadow(probe, agent_dir)
        notices.append(
            f"{info.directory} is not a git repository: rewind keeps its snapshots in a shadow "
            f"repository ({info.home}); nothing is written inside the directory"
        )
    elif info.migrated_to is not None and (create if migrate is None else migrate):
        # The repository it was migrated into is gone (.git deleted): serve the directory again.
        info = info.migrated(None, None)
        write_info(info)
    return OpenedWorkTree(ShadowRepo.open(info), notices)


__all__ = ["OpenedWorkTree", "open_work_tree"]
