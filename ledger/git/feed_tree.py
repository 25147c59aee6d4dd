"""The change feed's tree: a base capture plus the paths the watcher saw change.

Why it exists: :mod:`ledger.git.feed` decides *when* a fed capture can be trusted; this module
computes it (docs/design.md#the-private-index). Each dirty path is classified the way ``git add
-A`` into a fresh index would: an entry of the base is not ignored (ignore rules did not change:
the feed scans fully when they may have); a new path is asked to ``git check-ignore
--no-index``; its bytes come from ``git hash-object`` (attributes and clean filters applied)
through :func:`ledger.git.treeedit.current_entries`.

Invariants: writes only git objects. Anything the feed does not model (nested ``.git``, gitlinks,
protected directories, too-large files, special files, names git reads differently) raises
:class:`NeedScan`, and the caller scans fully instead.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

import pygit2
from pygit2.enums import FileMode

from ledger.git.capture_plan import SkippedPath, protected_prefix
from ledger.git.treeedit import LazyUnsupported, current_entries, edit_tree

if TYPE_CHECKING:
    from ledger.git.capture import Capturer

FED_MAX_PATHS = 5_000
"""More dirty paths than this: a full scan (hash-object and tree edits would cost more)."""


class NeedScan(Exception):
    """The dirty set holds something the feed does not model: scan fully."""


def fed_tree(
    capturer: Capturer,
    base_tree: str,
    base_skipped: tuple[SkippedPath, ...],
    filemode: bool,
    dirty: set[str],
) -> tuple[str, int]:
    """``(tree, changed paths)``: ``base_tree`` (a capture's tree, whose skipped paths are
    ``base_skipped``) with every path of ``dirty`` as it is now, classified the way ``git add -A``
    into a fresh index would. Raises :class:`NeedScan` for anything the feed does not model."""
    from ledger.git.capture import PRIVATE_CONFIG

    if len(dirty) > FED_MAX_PATHS:
        raise NeedScan(f"{len(dirty)} changed paths")
    repo = capturer.repo.pygit2
    root = capturer.root_s
    settings = capturer.settings
    limit = settings.max_untracked_file_bytes
    protected = set(settings.protected_dirs)
    tree = repo.get(base_tree)
    if not isinstance(tree, pygit2.Tree):
        raise NeedScan("base tree missing")
    skipped_files = {s.path for s in base_skipped if not s.path.endswith("/")}
    skipped_dirs = {s.path[:-1]: s.reason for s in base_skipped if s.path.endswith("/")}
    dirs: dict[str, str] = {}
    changes: dict[str, tuple[int, pygit2.Oid] | None] = {}
    known: list[str] = []
    new: list[str] = []
    pending = sorted(dirty)
    listed = set(dirty)
    for path in pending:  # grows while it is read: see the directory case below
        parts = path.split("/")
        if ".git" in parts:
            raise NeedScan(f"{path}: a nested repository changed")
        if parts[-1] in (".gitignore", ".gitattributes"):
            raise NeedScan(f"{path}: ignore or attribute rules changed")
        if path in skipped_files or path in skipped_dirs:
            raise NeedScan(f"{path}: a skipped path changed")
        under = _under_skipped(parts, skipped_dirs)
        if under is not None:
            if under[1] != "protected-dir" or not _real_dir(root, under[0]):
                raise NeedScan(f"{path}: changed under skipped {under[0]}/")
            continue  # still skipped: the user's index is watched (see _env_signature)
        parent = _parent_state(root, parts, dirs)
        if parent == "repo":
            raise NeedScan(f"{path}: inside a nested repository")
        if parent == "gone":
            changes[path] = None
            continue
        try:
            st = os.lstat(os.path.join(root, path))
        except FileNotFoundError:
            changes[path] = None
            continue
        existing = _entry(tree, path)
        if stat.S_ISDIR(st.st_mode):
            if os.path.lexists(os.path.join(root, path, ".git")):
                raise NeedScan(f"{path}: a nested repository")
            if existing is not None and existing[0] != FileMode.TREE:
                if existing[0] == FileMode.COMMIT:
                    raise NeedScan(f"{path}: a gitlink changed")
                changes[path] = None  # a file became a directory: its files follow
            elif existing is not None:
                # The watcher reports a directory moved away (and one made again under its name)
                # by its own path only: the files the base holds under it are re-read too.
                for leaf in _base_leaves(repo, existing[1], path):
                    if leaf not in listed:
                        listed.add(leaf)
                        pending.append(leaf)
                if len(pending) > FED_MAX_PATHS:
                    raise NeedScan(f"{len(pending)} changed paths")
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise NeedScan(f"{path}: not a file, symlink or directory")
        if existing is not None and existing[0] == FileMode.COMMIT:
            raise NeedScan(f"{path}: a gitlink changed")
        if limit and stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise NeedScan(f"{path}: larger than the untracked size limit")
        if existing is not None and existing[0] != FileMode.TREE:
            known.append(path)
        else:
            new.append(path)
    if new:
        ignored = _check_ignore(capturer, new)
        for path in new:
            if path in ignored:
                changes[path] = None
            elif protected and protected_prefix(path, protected, include_last=False):
                raise NeedScan(f"{path}: in a protected directory")
            else:
                known.append(path)
    try:
        if known:
            changes.update(
                current_entries(
                    capturer.git,
                    repo,
                    root,
                    known,
                    filemode=filemode,
                    config=PRIVATE_CONFIG,
                )
            )
        return edit_tree(repo, base_tree, changes), len(changes)
    except LazyUnsupported as exc:
        raise NeedScan(f"tree edit unsupported: {exc}") from None


def _check_ignore(capturer: Capturer, paths: list[str]) -> set[str]:
    """Which of ``paths`` git's exclude rules ignore (``check-ignore`` refuses literal pathspec
    mode, and would read a leading ``:`` as pathspec magic)."""
    if any(p.startswith(":") for p in paths):
        raise NeedScan("a new path starts with ':'")
    data = b"".join(os.fsencode(p) + b"\0" for p in paths)
    result = capturer.git.run(
        ["check-ignore", "--no-index", "-z", "--stdin"],
        input=data,
        operation="git check-ignore",
        check=False,
        extra_env={"GIT_LITERAL_PATHSPECS": "0"},
    )
    if result.returncode not in (0, 1):
        raise NeedScan("git check-ignore failed")
    return {os.fsdecode(p) for p in result.lines_z()}


def _entry(tree: pygit2.Tree, path: str) -> tuple[int, str] | None:
    try:
        obj = tree[path]
    except (KeyError, ValueError):
        return None
    return int(obj.filemode), str(obj.id)


def _base_leaves(repo: pygit2.Repository, tree_id: str, path: str) -> list[str]:
    """Every entry of the base tree ``tree_id`` (at ``path``) that is not a tree, as paths."""
    out: list[str] = []
    stack = [(tree_id, path)]
    while stack:
        oid, prefix = stack.pop()
        tree = repo.get(oid)
        if not isinstance(tree, pygit2.Tree):
            raise NeedScan(f"{prefix}: base tree missing")
        for entry in tree:
            if entry.raw_name is None:
                raise NeedScan(f"{prefix}: an entry without a name")
            child = f"{prefix}/{os.fsdecode(entry.raw_name)}"
            if entry.filemode == FileMode.TREE:
                stack.append((str(entry.id), child))
            else:
                out.append(child)
    return out


def _under_skipped(parts: list[str], skipped_dirs: dict[str, str]) -> tuple[str, str] | None:
    for i in range(1, len(parts)):
        prefix = "/".join(parts[:i])
        if prefix in skipped_dirs:
            return prefix, skipped_dirs[prefix]
    return None


def _real_dir(root: str, rel: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(os.path.join(root, rel)).st_mode)
    except OSError:
        return False


def _parent_state(root: str, parts: list[str], cache: dict[str, str]) -> str:
    """``ok`` (every ancestor is a real directory without ``.git``), ``gone`` (one is not a
    directory: the path is not in the work tree), or ``repo`` (one is a nested repository)."""
    for i in range(1, len(parts)):
        rel = "/".join(parts[:i])
        state = cache.get(rel)
        if state is None:
            full = os.path.join(root, rel)
            if not _real_dir(root, rel):
                state = "gone"
            elif os.path.lexists(os.path.join(full, ".git")):
                state = "repo"
            else:
                state = "ok"
            cache[rel] = state
        if state != "ok":
            return state
    return "ok"


__all__ = ["FED_MAX_PATHS", "NeedScan", "fed_tree"]
