"""What a restore may touch: hostile-tree rules, work-tree checks, deletes that never follow links.

Why it exists: a snapshot commit is data. It can come from another tool, another machine or an
attacker who can write objects, and git's own protections (``verify_path``, leading-symlink checks)
act only while git is already writing, so a refusal half-way would leave the user between two
states. Every check here runs on the trees (while :mod:`ledger.git.trees` reads them) and on the
work tree (``lstat``) *before* the first change; the deletes that follow never traverse a symlink
(docs/design.md#restore).

Invariants:
- :class:`~ledger.git.tree_names.EntryCheck` judges every entry of every target-side tree level
  that is read (:mod:`ledger.git.tree_names`). Problems are collected, never partly acted on.
- :class:`WorktreeGuard` decides from ``lstat`` alone (never following a link) whether each path
  to delete or write is reachable through real directories only. A leading component may be a
  symlink or a file only when the restore deletes it first (the current capture holds it). A
  directory may be replaced by a file only when everything in it is being deleted. Nothing is
  written inside a nested repository.
- :class:`SafeFs` deletes relative to directory descriptors opened with ``O_NOFOLLOW``: a symlink
  that appears after the checks makes the delete fail; it is never followed. It removes only
  files, symlinks and empty directories, never the root.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence

from ledger.git.restore.nofollow import DIR_FLAGS, NotADirectoryOnPath, open_dir
from ledger.git.tree_names import Problem
from ledger.quoting import display_name

# --- the work tree ------------------------------------------------------------------------


def parents(path: str) -> list[str]:
    """``a/b/c`` → ``["a", "a/b"]`` (leading components, outermost first)."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def under(path: str, prefixes: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``prefixes`` or lies inside one of them, or one of them lies
    inside ``path`` (a directory prefix is written ``dir/``; both forms match)."""
    for prefix in prefixes:
        p = prefix.rstrip("/")
        if path == p or path.startswith(p + "/") or p.startswith(path + "/"):
            return True
    return False


class WorktreeGuard:
    """``lstat``-only checks of the paths a restore will delete and write (see the module)."""

    def __init__(self, root: os.PathLike[str] | str) -> None:
        self.root = os.fsencode(os.fspath(root))
        self._stats: dict[str, os.stat_result | None] = {}
        self._repos: dict[str, bool] = {}

    def lstat(self, rel: str) -> os.stat_result | None:
        if rel not in self._stats:
            try:
                self._stats[rel] = os.lstat(self.root + b"/" + os.fsencode(rel))
            except FileNotFoundError:
                self._stats[rel] = None
            except NotADirectoryError:
                self._stats[rel] = None
        return self._stats[rel]

    def _is_repo(self, rel: str) -> bool:
        if rel not in self._repos:
            self._repos[rel] = os.path.lexists(self.root + b"/" + os.fsencode(rel) + b"/.git")
        return self._repos[rel]

    def check(
        self, deletes: Sequence[str], writes: Sequence[str], problems: list[Problem]
    ) -> list[str]:
        """Append problems; return the directories standing where a file will be written
        (each holds only files being deleted, and directories)."""
        deleted = set(deletes)
        for path in deletes:
            for parent in parents(path):
                st = self.lstat(parent)
                if st is None:
                    break
                if stat.S_ISLNK(st.st_mode):
                    problems.append(Problem("a path would be deleted through a symlink", path))
                    break
                if not stat.S_ISDIR(st.st_mode):
                    problems.append(Problem("a path to delete lies under a file", path))
                    break
            else:
                st = self.lstat(path)
                if st is not None and stat.S_ISDIR(st.st_mode):
                    problems.append(
                        Problem("a file to delete is a directory now (the work tree changed)", path)
                    )
        replace_dirs: list[str] = []
        for path in writes:
            blocked = False
            for parent in parents(path):
                st = self.lstat(parent)
                if st is None:
                    break
                if stat.S_ISDIR(st.st_mode):
                    if self._is_repo(parent):
                        problems.append(Problem("a path lies inside a nested git repository", path))
                        blocked = True
                        break
                    continue
                if parent in deleted:  # a captured file or symlink, removed before writing
                    break
                if stat.S_ISLNK(st.st_mode):
                    problems.append(Problem("a path would be written through a symlink", path))
                else:
                    problems.append(
                        Problem(
                            "a path would replace a file the current capture does not hold "
                            "(ignored or protected)",
                            path,
                        )
                    )
                blocked = True
                break
            if blocked:
                continue
            st = self.lstat(path)
            if st is not None and stat.S_ISDIR(st.st_mode):
                strays = self._strays(path, deleted)
                if strays:
                    problems.append(
                        Problem(
                            "a path would replace a directory holding files the current capture "
                            "does not hold (ignored, protected or a repository)",
                            strays[0],
                        )
                    )
                else:
                    replace_dirs.append(path)
        return replace_dirs

    def _strays(self, rel: str, deleted: set[str]) -> list[str]:
        """Entries under the directory ``rel`` that the restore would not delete."""
        base = self.root + b"/" + os.fsencode(rel)
        strays: list[str] = []
        for dirpath, dirnames, filenames in os.walk(base):  # does not follow symlinks
            rel_dir = os.fsdecode(dirpath[len(self.root) + 1 :])
            if ".git" in [os.fsdecode(n) for n in dirnames + filenames]:
                strays.append(rel_dir + "/.git")
                dirnames[:] = []
                continue
            for name in filenames:
                child = rel_dir + "/" + os.fsdecode(name)
                if child not in deleted:
                    strays.append(child)
            for name in list(dirnames):
                full = os.path.join(dirpath, name)
                if os.path.islink(full):
                    child = rel_dir + "/" + os.fsdecode(name)
                    if child not in deleted:
                        strays.append(child)
        return sorted(strays)


class UnsafePathError(OSError):
    """A delete met a symlink or a non-directory where a directory was expected."""


class SafeFs:
    """Deletes under the work tree root without following symlinks (see the module)."""

    def __init__(self, root: os.PathLike[str] | str) -> None:
        self.root = os.fsencode(os.fspath(root))

    def _open_parent(self, rel: str) -> tuple[int | None, bytes]:
        """A descriptor of ``rel``'s parent directory (``None`` if a component is missing)
        and ``rel``'s last component."""
        parts = os.fsencode(rel).split(b"/")
        try:
            fd = open_dir(self.root, parts[:-1], missing_ok=True)
        except NotADirectoryOnPath as exc:
            raise UnsafePathError(
                exc.errno,
                f"{display_name(rel)}: {display_name(exc.part)} is not a directory (symlink?)",
            ) from None
        return fd, parts[-1]

    def unlink(self, rel: str) -> bool:
        """Remove the file or symlink ``rel``; ``False`` if it was already gone."""
        fd, name = self._open_parent(rel)
        if fd is None:
            return False
        try:
            try:
                st = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                return False
            if stat.S_ISDIR(st.st_mode):
                raise UnsafePathError(
                    errno.EISDIR, f"{display_name(rel)} is a directory, expected a file"
                )
            os.unlink(name, dir_fd=fd)
            return True
        finally:
            os.close(fd)

    def rmdir_if_empty(self, rel: str) -> bool:
        """Remove the directory ``rel`` if it exists and is empty (never the root)."""
        if not rel:
            return False
        fd, name = self._open_parent(rel)
        if fd is None:
            return False
        try:
            os.rmdir(name, dir_fd=fd)
            return True
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.ENOTDIR):
                return False
            raise
        finally:
            os.close(fd)

    def remove_empty_tree(self, rel: str) -> None:
        """Remove the directory ``rel`` and the directories inside it, all of which must be
        empty of anything else by now (their files were deleted first)."""
        if not rel:
            raise UnsafePathError(errno.EPERM, "refusing to remove the work tree root")
        fd, name = self._open_parent(rel)
        if fd is None:
            return
        try:
            self._remove_dir_at(fd, name, rel)
        finally:
            os.close(fd)

    def _remove_dir_at(self, parent_fd: int, name: bytes, rel: str) -> None:
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafePathError(
                    exc.errno, f"{display_name(rel)} is not a directory"
                ) from None
            raise
        try:
            for child in os.listdir(fd):
                self._remove_dir_at(fd, os.fsencode(child), f"{rel}/{os.fsdecode(child)}")
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=parent_fd)


__all__ = [
    "SafeFs",
    "UnsafePathError",
    "WorktreeGuard",
    "parents",
    "under",
]
