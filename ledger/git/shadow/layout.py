"""Shadow repositories: rewind in a directory that is not inside any git work tree.

Why it exists: Pi users run agents in plain directories too (scratch folders, unpacked archives,
documents). There, snapshots go to a private git directory under the agent dir whose work tree
is the user's directory (docs/shadow.md). Everything above the opening (capture, store, restore,
records) is unchanged: a :class:`ShadowRepo` is a :class:`~ledger.git.repo.GitRepo` whose
``git_dir`` lies outside its ``root``.

Layout: ``<agent-dir>/rewind/shadow/<basename>-<sha256(realpath)[:16]>/`` holds ``git/`` (a
git directory: ``core.bare=false``, ``core.worktree`` = the directory) and ``shadow.json`` (the
served directory's real path, creation time, and the migration mark once ``git init`` made the
directory a repository).

Invariants:
- Nothing is ever created or written inside the served directory: the git directory, its
  ``info/exclude``, the private index and every other file live under the shadow's home. Every
  git subprocess gets ``GIT_DIR`` and ``GIT_WORK_TREE`` explicitly (:mod:`ledger.git.runner`).
- Keyed by the real path: two directories with the same name never share a shadow; a moved
  directory is a new one (its old shadow is orphaned, ``rewind doctor`` lists it).
- Refused (:class:`~ledger.errors.ShadowRefusedError`): ``/``, the user's home directory, any
  directory containing the agent dir or lying inside it, anything inside a ``.git``, and any
  git directory (bare, ``--separate-git-dir``, any name) or directory inside one, also when a
  shadow for it was created by an older version.
- A real repository always wins: :func:`ledger.git.shadow.open.open_work_tree` tries git's own discovery first.
- Only callers that may write (``create=True``: capture) create a shadow; a read-only open
  of a directory without one is a :class:`~ledger.errors.NoShadowError`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import time
from pathlib import Path

import pygit2

from ledger.digests import sha256
from ledger.errors import NotARepositoryError, ShadowRefusedError
from ledger.git.owned import replace_private_file
from ledger.git.private import private_dir
from ledger.git.repo import GitRepo, git_dir_at_or_above, is_inside
from ledger.plain import FrozenPlain
from ledger.settings import SnapshotSettings, load_settings

SHADOW_DIR = Path("rewind") / "shadow"
MARKER = "shadow.json"
GIT_SUBDIR = "git"
FORMAT = 1
LAST_SNAPSHOT = (
    "last-snapshot.json"  # ledger.git.store.snapshot.LAST_SNAPSHOT_FILE (no import cycle)
)
UNBORN_HEAD = "ref: refs/heads/shadow"
EXCLUDE_HEADER = "# rewind-ledger shadow excludes (rewind.snapshot.shadowExcludes); rewritten"


class ShadowInfo(FrozenPlain):
    """One shadow repository, as its ``shadow.json`` describes it."""

    __slots__ = ("created", "directory", "home", "migrated_head", "migrated_to")
    home: Path
    directory: Path
    """The served directory's real path."""
    created: str
    migrated_to: str | None
    """The repository root the shadow's snapshots were copied into (``git init`` happened)."""
    migrated_head: str | None
    """The shadow store head at the last migration (a later snapshot means: migrate again)."""

    def __init__(
        self,
        home: Path,
        directory: Path,
        created: str,
        migrated_to: str | None = None,
        migrated_head: str | None = None,
    ) -> None:
        self._init(
            home=home,
            directory=directory,
            created=created,
            migrated_to=migrated_to,
            migrated_head=migrated_head,
        )

    def at(self, home: Path) -> ShadowInfo:
        """The same shadow, its home at ``home`` (a staging directory before the rename)."""
        return ShadowInfo(home, self.directory, self.created, self.migrated_to, self.migrated_head)

    def migrated(self, to: str | None, head: str | None) -> ShadowInfo:
        """The same shadow, migrated into the repository at ``to`` at store head ``head``
        (both ``None``: serving its directory again)."""
        return ShadowInfo(self.home, self.directory, self.created, to, head)

    @property
    def git_dir(self) -> Path:
        return self.home / GIT_SUBDIR

    def to_json(self) -> dict[str, object]:
        return {
            "format": FORMAT,
            "directory": str(self.directory),
            "created": self.created,
            "migratedTo": self.migrated_to,
            "migratedHead": self.migrated_head,
        }


class ShadowRepo(GitRepo):
    """A repository whose git directory is a shadow's, with the served directory as work tree."""

    shadow: ShadowInfo

    @classmethod
    def open(cls, info: ShadowInfo) -> ShadowRepo:
        try:
            repository = pygit2.Repository(
                str(info.git_dir), pygit2.enums.RepositoryOpenFlag.NO_SEARCH
            )
            # In memory only, as GitRepo.discover does.
            repository.workdir = str(info.directory)
        except (pygit2.GitError, OSError, ValueError) as exc:
            raise NotARepositoryError(info.directory) from exc
        repo = cls(repository)
        repo.shadow = info
        return repo


# --- layout -------------------------------------------------------------------------------


def shadow_root(agent_dir: Path) -> Path:
    return Path(agent_dir) / SHADOW_DIR


def shadow_key(directory: Path | str) -> str:
    """``<basename>-<sha256(realpath)[:16]>``; the basename only makes listings readable."""
    real = os.path.realpath(directory)
    digest = sha256(os.fsencode(real)).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real))[:40].lstrip(".") or "dir"
    return f"{name}-{digest}"


def shadow_home(agent_dir: Path, directory: Path | str) -> Path:
    return shadow_root(agent_dir) / shadow_key(directory)


def read_info(home: Path) -> ShadowInfo | None:
    """The shadow at ``home``, or None when it has no readable ``shadow.json``."""
    try:
        data = json.loads((home / MARKER).read_text("utf-8"))
        directory = data["directory"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(directory, str) or not os.path.isabs(directory):
        return None

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) and value else None

    return ShadowInfo(
        home=home,
        directory=Path(directory),
        created=text("created") or "",
        migrated_to=text("migratedTo"),
        migrated_head=text("migratedHead"),
    )


def write_info(info: ShadowInfo) -> None:
    # Every file of a shadow is ours: written through a temporary that is its own lock, so that
    # one a kill leaves is named and swept (ledger/git/owned.py, ledger/git/store/leftovers.py).
    text = json.dumps(info.to_json(), indent=1) + "\n"
    replace_private_file(info.home / MARKER, text.encode("utf-8"))


def refusal(directory: Path | str, agent_dir: Path) -> str | None:
    """Why ``directory`` (resolved) may not get a shadow repository, or None."""
    real = os.path.realpath(directory)
    agent = os.path.realpath(agent_dir)
    home = os.path.realpath(Path.home())
    if real == os.sep:
        return "the root directory"
    if real == home:
        return "your home directory"
    if is_inside(agent, real):
        return f"it contains the agent dir {agent}"
    if is_inside(real, agent):
        return f"it lies inside the agent dir {agent}"
    if ".git" in Path(real).parts:
        return "it lies inside a .git directory"
    # Git's own data is not a work tree: a bare repository, the target of --separate-git-dir,
    # or any directory inside one. A shadow there would capture objects/ and refs/, and a
    # restore would write them back over later pushes (docs/design.md#git-directories-are-not-
    # work-trees).
    git_dir = git_dir_at_or_above(real)
    if git_dir is not None:
        return git_dir_reason(real, git_dir)
    return None


def git_dir_reason(directory: Path | str, git_dir: Path) -> str:
    if os.path.realpath(directory) == str(git_dir):
        return "it is a git directory (a bare repository or a separate git dir: objects and refs)"
    return f"it lies inside the git directory {git_dir}"


# --- opening ------------------------------------------------------------------------------


def find_shadow(start: Path | str, agent_dir: Path) -> ShadowInfo | None:
    """The shadow serving ``start`` or its nearest ancestor that has one (as git looks for
    ``.git`` upwards), or None."""
    current = os.path.realpath(start)
    while True:
        info = read_info(shadow_home(agent_dir, current))
        if info is not None and str(info.directory) == current:
            return info
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def create_shadow(directory: Path | str, agent_dir: Path) -> ShadowInfo:
    """Create (or, when another process just did, reuse) the shadow for ``directory``."""
    real = Path(os.path.realpath(directory))
    reason = refusal(real, agent_dir)
    if reason is not None:
        raise ShadowRefusedError(real, reason, git_dir=git_dir_at_or_above(real))
    home = shadow_home(agent_dir, real)
    existing = read_info(home)
    if existing is not None:
        return existing
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = home.with_name(f".{home.name}.{os.getpid()}.{time.time_ns()}.tmp")
    info = ShadowInfo(
        home=home, directory=real, created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    )
    try:
        staging.mkdir()
        repository = pygit2.init_repository(str(staging / GIT_SUBDIR), bare=True)
        config = repository.config
        config["core.bare"] = False
        config["core.worktree"] = str(real)
        config["core.logAllRefUpdates"] = False
        write_excludes(staging / GIT_SUBDIR, SnapshotSettings())
        write_info(info.at(staging))
        try:
            os.rename(staging, home)
        except OSError:
            # Another process created it first (rename onto a non-empty directory fails).
            existing = read_info(home)
            if existing is None:
                raise
            return existing
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return info


# --- nested shadows --------------------------------------------------------------------------

MAX_SHADOWS_LISTED = 4096
"""Shadow homes looked at per listing: far more plain directories than one user works in."""

_DIRECTORIES: dict[str, str] = {}
"""Shadow home → the real path of the directory it serves. A home's name is ``<basename>-<hash
of that real path>``, so it never comes to serve another directory: each ``shadow.json`` is read
once per process (at most one entry per shadow home)."""


def shadow_of_git_dir(git_dir: Path) -> ShadowInfo | None:
    """The shadow whose git directory ``git_dir`` is, or None (a real repository's)."""
    home = Path(git_dir).parent
    if Path(git_dir).name != GIT_SUBDIR or not (home / MARKER).is_file():
        return None
    return read_info(home)


def served_directory(home: Path) -> str | None:
    """The real path of the directory the shadow at ``home`` serves (its ``shadow.json`` read
    once per process: see :data:`_DIRECTORIES`), or None when it is not a shadow."""
    key = str(home)
    directory = _DIRECTORIES.get(key)
    if directory is None:
        info = read_info(home)
        if info is None:
            return None
        directory = _DIRECTORIES[key] = os.path.realpath(info.directory)
    return directory


def overlapping_shadows(home: Path, directory: Path | str) -> list[tuple[Path, Path]]:
    """``(git dir, served directory)`` of the other shadows of the same agent dir (the parent of
    ``home``) whose directories contain ``directory`` or lie inside it (nested plain
    directories: ``scratch`` and ``scratch/sub``), sorted by git dir. Their work trees share
    files with this one, so they share its turn gate and its list of live sessions
    (docs/shadow.md#nested-directories). Only shadows whose git directory exists; the shadow
    root is listed at each call (a shadow made a moment ago is never missed)."""
    root = Path(home).parent
    own = os.path.realpath(directory)
    found: list[tuple[Path, Path]] = []
    try:
        with os.scandir(root) as listing:
            names = [item.name for item in itertools.islice(listing, MAX_SHADOWS_LISTED)]
    except OSError:
        return []
    for name in names:
        if name.startswith(".") or name == Path(home).name:
            continue  # a shadow being made (its staging name), or this one
        other = served_directory(root / name)
        if other is None or other == own or not (is_inside(other, own) or is_inside(own, other)):
            continue
        git_dir = root / name / GIT_SUBDIR
        if git_dir.is_dir():
            found.append((git_dir, Path(other)))
    found.sort(key=lambda pair: str(pair[0]))
    return found


def reopen(root: Path, git_dir: Path) -> GitRepo:
    """A new handle on the same repository (threads need their own pygit2 objects)."""
    home = Path(git_dir).parent
    if Path(git_dir).name == GIT_SUBDIR and (home / MARKER).is_file():
        info = read_info(home)
        if info is not None:
            return ShadowRepo.open(info)
    return GitRepo.discover(root)


# --- capture settings ---------------------------------------------------------------------


def exclude_text(settings: SnapshotSettings) -> str:
    patterns = [p for p in settings.shadow_excludes if p.strip()]
    return "\n".join([EXCLUDE_HEADER, *patterns]) + "\n"


def write_excludes(git_dir: Path, settings: SnapshotSettings) -> None:
    """``<git-dir>/info/exclude`` = the shadow excludes (rewritten only when they changed; the
    capture fingerprints this file, so a change rebuilds the private index)."""
    path = git_dir / "info" / "exclude"
    text = exclude_text(settings)
    with contextlib.suppress(OSError):
        if path.read_text("utf-8") == text:
            return
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_private_file(path, text.encode("utf-8"))  # see write_info


def capture_settings(repo: GitRepo, settings: SnapshotSettings) -> SnapshotSettings:
    """The settings a capture uses in ``repo``: unchanged in a real repository; in a shadow,
    the excludes written to its ``info/exclude`` and ``shadowMaxFileBytes`` as the size limit
    (there is no .gitignore and no user index to say what matters)."""
    if not isinstance(repo, ShadowRepo):
        return settings
    write_excludes(repo.git_dir, settings)
    point_head_at_last_snapshot(repo)
    return settings.replace(max_untracked_file_bytes=settings.shadow_max_file_bytes)


def point_head_at_last_snapshot(repo: ShadowRepo) -> None:
    """Detach the shadow's own HEAD at the latest exact snapshot (its tree is what the private
    index holds), so that the capture's ``git status`` lists only what changed: with an unborn
    HEAD it lists every entry as added, which costs O(files) at every capture. The capture reads
    only the work-tree column of status, so HEAD never changes a result; snapshot commits of a
    shadow carry no ``Head:`` line (docs/shadow.md#speed). A HEAD naming a missing commit would
    make status fail: it is reset to unborn."""
    head_file = repo.git_dir / "HEAD"
    try:
        current = head_file.read_text("utf-8").strip()
    except OSError:
        current = ""
    target: str | None = None
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        data = json.loads((private_dir(repo.git_dir) / LAST_SNAPSHOT).read_text("utf-8"))
        commit = data["commit"]
        if isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{40}", commit):
            target = commit
    if target is not None and not repo.commit_exists(target):
        target = None
    if target is None:
        detached_gone = re.fullmatch(r"[0-9a-f]{40}", current) and not repo.commit_exists(current)
        if not detached_gone:
            return
        wanted = UNBORN_HEAD
    else:
        wanted = target
    if wanted == current:
        return
    # At every capture that changed something: a kill here must leave nothing unnamed.
    replace_private_file(head_file, (wanted + "\n").encode("utf-8"))


def shadows_enabled(agent_dir: Path, directory: Path | str) -> bool:
    """``rewind.snapshot.shadowRepositories`` for ``directory`` (its ``.pi/settings.json`` too)."""
    settings, _ = load_settings(agent_dir, directory)
    return settings.snapshot.shadow_repositories


__all__ = [
    "ShadowInfo",
    "ShadowRepo",
    "capture_settings",
    "create_shadow",
    "find_shadow",
    "git_dir_reason",
    "overlapping_shadows",
    "refusal",
    "reopen",
    "served_directory",
    "shadow_home",
    "shadow_key",
    "shadow_of_git_dir",
    "shadow_root",
]
