"""Finding a repository and asking it about objects, configuration and paths.

Why it exists: the rest of the package needs to know where a work tree's root is, whether a
snapshot commit still exists and what tree it holds, without importing pygit2 itself; and the git
layer needs one place for the "look the id up, swallow a malformed or missing id, check the type"
dance (:func:`lookup_commit`, :func:`peel_tree`) and for "is this path inside that root"
(:func:`is_inside`); and typed configuration reads that never raise (:class:`ConfigValues`,
:func:`config_value`).

Invariants: read-only. Opening a repository here never writes the index or any ref. A bare
repository, or a directory outside any work tree, is a :class:`NotARepositoryError`. A missing or
malformed object id gives ``None``, never an exception.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pygit2
from pygit2 import Commit, Object, Tree

from ledger.errors import NotARepositoryError, UnsafeLayoutError
from ledger.git.locate import Located, locate


class GitRepo:
    """A non-bare git repository, located by :meth:`discover`."""

    def __init__(self, repository: pygit2.Repository, *, common_dir: Path | None = None) -> None:
        if repository.is_bare or not repository.workdir:
            raise NotARepositoryError(repository.path)
        self._repo = repository
        self.root = Path(os.path.realpath(repository.workdir))
        self.git_dir = Path(os.path.realpath(repository.path))
        self.common_dir = Path(os.path.realpath(common_dir)) if common_dir else self.git_dir
        """Where objects and refs live: ``git_dir`` except in a linked worktree."""

    @classmethod
    def discover(cls, start: Path | str, *, known: Located | None = None) -> GitRepo:
        """The repository whose work tree contains ``start`` (a file or directory).

        The work tree is the one git itself uses from ``start`` (``git rev-parse
        --show-toplevel``), for every layout: a ``.git`` directory or file, a separate git dir,
        ``core.worktree``, ``GIT_DIR``/``GIT_WORK_TREE`` in the environment. Opening the git dir
        alone is not enough: libgit2 then takes the git dir's parent as the work tree, which for
        ``git init --separate-git-dir ~/proj.git`` is the home directory (data loss found in the
        fault campaign, docs/defects.md#separate-git-dir).

        ``known``: git's answer for a work tree's root, asked before by this process with the
        same environment (the watcher's own, for a session it hosts): used instead of asking
        again when ``start`` is that root (~2 ms of a hosted ``session_start``: issue 34). Every
        check below still runs on it.

        Raises :class:`NotARepositoryError`, or :class:`UnsafeLayoutError` when the work tree
        does not hold ``start`` or holds the git dir under another name than ``.git``."""
        path = Path(start)
        probe = path if path.is_dir() else path.parent
        if not probe.is_dir():
            raise NotARepositoryError(path)
        if known is not None and os.path.realpath(probe) == os.fspath(known[0]):
            located: Located | None = known
        else:
            located = locate(probe)
        if located is None:
            raise NotARepositoryError(path)
        root, git_dir, common = located
        try:
            repository = pygit2.Repository(str(git_dir), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
            # In memory only (libgit2 writes no .git file or config for this). As bytes: pygit2
            # encodes a str value as strict UTF-8, and the root's name may hold any byte.
            repository.workdir = os.fsencode(root)  # type: ignore[assignment]
        except (pygit2.GitError, OSError, ValueError) as exc:
            raise NotARepositoryError(path) from exc
        repo = cls(repository, common_dir=common)
        problem = layout_problem(
            Path(os.path.realpath(probe)), repo.root, repo.git_dir, repo.common_dir
        )
        if problem:
            raise UnsafeLayoutError(path, problem, root=repo.root, git_dir=repo.git_dir)
        return repo

    @property
    def pygit2(self) -> pygit2.Repository:
        """The underlying pygit2 repository, for the git layer's own modules."""
        return self._repo

    def contains(self, path: Path | str) -> bool:
        """Whether ``path`` (resolved) is the work tree root or lies inside it."""
        return is_inside(os.path.realpath(path), self.root)

    # --- objects --------------------------------------------------------------------------

    def object(self, sha: str) -> Object | None:
        """The object ``sha`` (a full id or a unique prefix), or ``None``."""
        return lookup_object(self._repo, sha)

    def commit(self, sha: str) -> Commit | None:
        """The commit ``sha``, or ``None`` when it is malformed, missing or not a commit."""
        return lookup_commit(self._repo, sha)

    def commit_exists(self, sha: str) -> bool:
        """``git cat-file -e <sha>^{commit}``: the object exists and is a commit."""
        return lookup_commit(self._repo, sha) is not None

    def tree_of(self, sha: str) -> str | None:
        """The tree id of the commit ``sha``, or ``None`` when it is not an existing commit."""
        commit = lookup_commit(self._repo, sha)
        return str(commit.tree_id) if commit is not None else None

    def peel_tree(self, sha: str) -> Tree | None:
        """The tree ``sha`` names (a commit's tree, or a tree itself), or ``None``."""
        return peel_tree(self._repo, sha)

    def has_tree(self, oid: str) -> bool:
        """The object exists and is a tree (read from its header only: its content is not
        parsed, so a corrupt tree is found later, entry by entry)."""
        return object_kind(self._repo, oid) == pygit2.enums.ObjectType.TREE

    # --- configuration --------------------------------------------------------------------

    def config_bool(self, key: str, default: bool) -> bool:
        """A boolean of the repository's configuration as git reads it (``key`` absent,
        or a value that is not a boolean: ``default``). pygit2 parses git's booleans: a key
        without ``=`` is true, an empty value (``key =``) is false."""
        try:
            return bool(self._repo.config.get_bool(key))
        except (KeyError, ValueError, pygit2.GitError):
            return default


class ConfigValues:
    """Typed reads of a repository's git configuration, for code outside the git layer.

    Every read gives ``None`` when the key is unset or its value is not of the type asked for
    (or unreadable): callers treat an invalid value as unset, as git's porcelain does for the
    settings they read. Read-only; one configuration snapshot serves any number of reads."""

    def __init__(self, repo: GitRepo) -> None:
        self._config = repo.pygit2.config

    def string(self, key: str) -> str | None:
        """The value as text (``key`` without ``=``: libgit2's rendering of it)."""
        try:
            return str(self._config[key])
        except (KeyError, ValueError, TypeError, pygit2.GitError):
            return None

    def integer(self, key: str) -> int | None:
        """The value as git parses an integer (``k``/``m``/``g`` suffixes)."""
        try:
            return int(self._config.get_int(key))
        except (KeyError, ValueError, TypeError, pygit2.GitError):
            return None

    def boolean(self, key: str) -> bool | None:
        """The value as git parses a boolean (a key without ``=`` is true, ``key =`` false)."""
        try:
            return bool(self._config.get_bool(key))
        except (KeyError, ValueError, TypeError, pygit2.GitError):
            return None


def config_value(repo: GitRepo, key: str) -> str | None:
    """One configuration value of ``repo`` as text, or ``None`` when unset or unreadable."""
    return ConfigValues(repo).string(key)


def layout_problem(start: Path, root: Path, git_dir: Path, common_dir: Path) -> str | None:
    """Why this layout is unsafe to capture and restore, or None (all paths resolved).

    Safe: ``start`` lies in ``root``, and each git directory lies outside ``root`` or inside a
    path component named ``.git`` (the standard layout; captures skip ``.git`` by name)."""
    if not is_inside(start, root):
        return f"the work tree does not contain {start}"
    for directory in (git_dir, common_dir):
        if is_inside(directory, root):
            rel = directory.relative_to(root).parts if directory != root else ()
            if ".git" not in rel:
                return f"the git directory {directory} lies inside the work tree"
    return None


_HEX_HEAD = re.compile(rb"[0-9a-f]{40}([0-9a-f]{24})?\s*")
_HEAD_PROBE_BYTES = 256


def is_git_dir(path: Path | str | bytes) -> bool:
    """Whether ``path`` is a git directory as git itself recognises one (``is_git_directory``
    in git's ``setup.c``): a valid ``HEAD`` (``ref: refs/…``, an object id, or a symlink into
    ``refs/``) beside ``objects/`` and ``refs/`` directories, or beside a ``commondir`` file
    (a linked worktree's git dir). Bare or not, whatever its name.

    Safety: git directories are git's data, never user files. A shadow repository is refused
    for one, captures leave one inside a work tree out, and a restore never writes into one
    (docs/design.md#git-directories-are-not-work-trees). Reads at most 256 bytes of ``HEAD``,
    never follows a symlink out of ``path`` for it, and never raises."""
    base = os.fsencode(path)
    head = os.path.join(base, b"HEAD")
    try:
        st = os.lstat(head)
        if stat.S_ISLNK(st.st_mode):
            if not os.readlink(head).startswith(b"refs/"):
                return False
        elif stat.S_ISREG(st.st_mode):
            fd = os.open(head, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                text = os.read(fd, _HEAD_PROBE_BYTES)
            finally:
                os.close(fd)
            if not (
                re.match(rb"ref:\s*refs/", text) is not None
                or _HEX_HEAD.fullmatch(text) is not None
            ):
                return False
        else:
            return False
        if os.path.isfile(os.path.join(base, b"commondir")):
            return True
        return os.path.isdir(os.path.join(base, b"objects")) and os.path.isdir(
            os.path.join(base, b"refs")
        )
    except (OSError, ValueError):
        return False


def git_dir_at_or_above(path: Path | str, *, stop: Path | str | None = None) -> Path | None:
    """The nearest of ``path`` (resolved) and its ancestors that is a git directory
    (:func:`is_git_dir`), up to ``stop`` (inclusive) or the file-system root; else ``None``."""
    current = os.path.realpath(path)
    end = os.path.realpath(stop) if stop is not None else None
    while True:
        if is_git_dir(current):
            return Path(current)
        parent = os.path.dirname(current)
        if parent == current or current == end:
            return None
        current = parent


def is_inside(path: Path | str, root: Path | str) -> bool:
    """Whether ``path`` is ``root`` or lies inside it (both already resolved)."""
    p, r = os.fspath(path), os.fspath(root).rstrip(os.sep) or os.sep
    return p == r or p.startswith(r + os.sep) or r == os.sep


# --- object look-ups on any pygit2 repository (also a quarantine's view) ------------------


def lookup_object(repository: pygit2.Repository, sha: str) -> pygit2.Object | None:
    """The object ``sha`` in ``repository``, or ``None`` when it is malformed or missing."""
    try:
        return repository.get(sha)
    except (ValueError, TypeError, pygit2.GitError):
        return None


def lookup_commit(repository: pygit2.Repository, sha: str) -> pygit2.Commit | None:
    """The commit ``sha`` in ``repository``, or ``None`` (malformed, missing, not a commit)."""
    obj = lookup_object(repository, sha)
    return obj if isinstance(obj, pygit2.Commit) else None


def peel_tree(repository: pygit2.Repository, sha: str) -> pygit2.Tree | None:
    """The tree ``sha`` names in ``repository``: a commit's tree or a tree; else ``None``."""
    obj = lookup_object(repository, sha)
    if isinstance(obj, pygit2.Commit):
        try:
            tree = obj.tree
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return tree if isinstance(tree, pygit2.Tree) else None
    return obj if isinstance(obj, pygit2.Tree) else None


def object_kind(repository: pygit2.Repository, oid: str) -> int | None:
    """The type of object ``oid`` from its header (``pygit2.enums.ObjectType``), or ``None``
    when it is missing or the id is malformed."""
    try:
        kind, _size = repository.odb.read_header(oid)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return int(kind)
