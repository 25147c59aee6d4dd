"""Tree diffs computed in-process: the values of what changed between two trees, no text.

Why it exists: :mod:`ledger.review.diff` describes what changed between two rewind points. Its
text always comes from git itself (``git diff-tree``, :func:`ledger.git.trees.diff_tree_batch`);
but some callers only need the counts (the restore preview) and should not spawn a process, and
every caller needs a point's tree id and, for a binary file, an object's size. Those questions
need libgit2, and the git layer is the only code that imports it: this module answers them with
plain values (``str`` ids, ``int`` sizes, :class:`FileDelta`) that the review code turns into its
own :class:`~ledger.review.diff.FileDiff`.

Invariants:
- Read-only, except the empty tree object, written when a side of a diff is missing (``None``
  or the zero id): git's well-known empty tree, the same bytes every time.
- A point that names neither a tree nor a commit with a readable tree is a
  :class:`~ledger.errors.MissingCommitError`; nothing else here raises for a missing object
  (:func:`object_size` says ``0``).
- No rename or copy detection unless ``find_renames`` is asked for (git's ``--no-renames``);
  typechanges are reported as such (one delta, as in git's stat).
- Paths are ``str`` as libgit2 decodes them; ids are 40-hex ``str``; modes are ``int``.
- The values are libgit2's tree diff's, exactly (tests/property/test_treediff_equivalence.py),
  but without rename detection only the changed levels of the trees are read
  (:func:`ledger.git.trees.tree_changes`), so the cost grows with the changes.
- libgit2's patch text is never produced here: it differs from git's (index abbreviation,
  empty files, quoting, the TAB after a name holding a space, typechanges, binary detection).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

import pygit2
from pygit2.enums import FileMode

from ledger.errors import MissingCommitError
from ledger.git.repo import GitRepo, peel_tree
from ledger.git.trees import Change, tree_changes

ZERO_HEX = "0" * 40
"""The null object id (a side that does not exist)."""

RepositoryLike: TypeAlias = GitRepo | pygit2.Repository
"""What the functions here accept: our :class:`GitRepo`, or the libgit2 repository it wraps
(a quarantine's view, or a caller that opened one itself)."""

_STATUS = {
    pygit2.enums.DeltaStatus.ADDED: "added",
    pygit2.enums.DeltaStatus.DELETED: "deleted",
    pygit2.enums.DeltaStatus.MODIFIED: "modified",
    pygit2.enums.DeltaStatus.RENAMED: "renamed",
    pygit2.enums.DeltaStatus.COPIED: "copied",
    pygit2.enums.DeltaStatus.TYPECHANGE: "typechange",
}


@dataclass(frozen=True)
class FileDelta:
    """One changed path between two trees, as libgit2 counts it (no patch text).

    ``status`` is one of ``added``, ``deleted``, ``modified``, ``renamed``, ``copied``,
    ``typechange``. A binary file counts no lines (``additions == deletions == 0``)."""

    status: str
    old_path: str
    new_path: str
    old_mode: int
    new_mode: int
    old_id: str
    new_id: str
    binary: bool
    additions: int
    deletions: int
    old_size: int = 0
    new_size: int = 0


@dataclass(frozen=True)
class TreeDeltas:
    """Every changed path from ``old_tree`` to ``new_tree`` (tree ids), in git's path order."""

    old_tree: str
    new_tree: str
    files: list[FileDelta] = field(default_factory=list)


def as_git_repo(repo: RepositoryLike) -> GitRepo:
    """``repo`` itself, or a :class:`GitRepo` over the libgit2 repository (non-bare only)."""
    return repo if isinstance(repo, GitRepo) else GitRepo(repo)


def _handle(repo: RepositoryLike) -> pygit2.Repository:
    return repo.pygit2 if isinstance(repo, GitRepo) else repo


def _point_tree(repo: RepositoryLike, sha: str | None) -> pygit2.Tree | None:
    """The tree a point names: ``None`` for a missing side (``None`` or the zero id), the tree of
    a commit or a tree itself; else :class:`MissingCommitError`."""
    if sha is None or sha == ZERO_HEX:
        return None
    tree = peel_tree(_handle(repo), sha)
    if tree is None:
        raise MissingCommitError(sha)
    return tree


def empty_tree_id(repo: RepositoryLike) -> str:
    """The empty tree's id, after writing the object (it may not exist in a fresh repository)."""
    return str(_handle(repo).TreeBuilder().write())


def tree_id(repo: RepositoryLike, sha: str | None) -> str:
    """The tree id of a commit or tree ``sha`` (``None`` or the zero id: the empty tree, written
    if need be); :class:`MissingCommitError` when ``sha`` names neither."""
    tree = _point_tree(repo, sha)
    return str(tree.id) if tree is not None else empty_tree_id(repo)


def diff_values(
    repo: RepositoryLike, old: str | None, new: str | None, *, find_renames: bool = False
) -> TreeDeltas:
    """What changed from ``old`` to ``new`` (commits or trees; ``None``: the empty tree), as
    values computed in this process (no git process, no text): the values libgit2's
    tree-to-tree diff gives, at a cost that grows with the changes, not the repository.

    The changed paths come from :func:`ledger.git.trees.tree_changes` (equal subtrees skipped;
    libgit2's tree diff walks every entry: 11–37 ms for one changed file at 100k files against
    ~0.2 ms, docs/review-and-portability.md), then libgit2 counts each changed pair of blobs
    (its line counts and binary rule). With ``find_renames``, or more than
    :data:`WALK_MAX_CHANGES` changed paths, libgit2's own tree diff runs (rename detection needs
    every added and deleted path; for many changes one libgit2 pass is faster).

    A typechange is one delta, as in git's stat; a file with control bytes may count as binary
    where git counts lines. ``old`` is resolved before ``new`` (the first missing one is the
    one reported)."""
    handle = _handle(repo)
    old_tree = _point_tree(handle, old)
    new_tree = _point_tree(handle, new)
    empty = (
        handle.get(handle.TreeBuilder().write()) if old_tree is None or new_tree is None else None
    )
    a = old_tree if old_tree is not None else empty
    b = new_tree if new_tree is not None else empty
    assert isinstance(a, pygit2.Tree) and isinstance(b, pygit2.Tree)
    result = TreeDeltas(str(a.id), str(b.id))
    if a.id == b.id:
        return result
    changes = None if find_renames else tree_changes(handle, str(a.id), str(b.id))
    if changes is None or len(changes) > WALK_MAX_CHANGES:
        result.files.extend(_libgit2_values(handle, a, b, find_renames=find_renames))
        return result
    result.files.extend(_change_values(handle, change) for change in changes)
    return result


def _libgit2_values(
    handle: pygit2.Repository, a: pygit2.Tree, b: pygit2.Tree, *, find_renames: bool
) -> list[FileDelta]:
    """libgit2's own tree-to-tree diff as values (every entry of both trees is visited)."""
    flags = pygit2.enums.DiffOption.NORMAL | pygit2.enums.DiffOption.INCLUDE_TYPECHANGE
    diff = handle.diff(a, b, flags=flags)  # type: ignore[call-overload]  # stubs omit trees
    if find_renames:
        diff.find_similar(flags=pygit2.enums.DiffFind.FIND_RENAMES)
    return [_delta_values(patch) for patch in diff if patch is not None]


_TYPE_MASK = 0o170000
WALK_MAX_CHANGES = 256
"""Above this many changed paths libgit2's whole-tree diff is faster than one libgit2 patch per
changed pair (measured at 100k files: 51 ms against 1.2 ms for one file, 129 ms against 225 ms
for 1,000 files; tools/bench_treediff.py); the values are the same either way."""


def _change_values(handle: pygit2.Repository, change: Change) -> FileDelta:
    """One leaf change as libgit2's tree diff reports it: a typechange (or a side that is a
    submodule) counts nothing from the blobs, as libgit2 does; a submodule's side counts the
    one ``Subproject commit`` line; any other pair is counted by libgit2 from the blobs."""
    old, new = change.old, change.new
    old_mode = old.mode if old is not None else 0
    new_mode = new.mode if new is not None else 0
    old_id = old.oid if old is not None else ZERO_HEX
    new_id = new.oid if new is not None else ZERO_HEX
    status = "added" if old is None else "deleted" if new is None else "modified"
    if old_mode and new_mode and (old_mode ^ new_mode) & _TYPE_MASK:
        status = "typechange"
    gitlink = FileMode.COMMIT in (old_mode, new_mode)
    if status == "typechange" or gitlink:  # no line counts: git's stat counts a gitlink as one
        lines = status != "typechange"
        binary, sizes = False, (0, 0)
        counts = (int(lines and new is not None), int(lines and old is not None))
    else:
        patch = pygit2.Patch.create_from(
            _blob(handle, old_id) if old is not None else None,
            _blob(handle, new_id) if new is not None else None,
            old_as_path=change.path,
            new_as_path=change.path,
            flag=pygit2.enums.DiffOption.NORMAL,
        )
        counted = _delta_values(patch)
        binary, counts = counted.binary, (counted.additions, counted.deletions)
        sizes = (
            counted.old_size if old is not None else 0,
            counted.new_size if new is not None else 0,
        )
    return FileDelta(
        status=status,
        old_path=change.path,
        new_path=change.path,
        old_mode=old_mode,
        new_mode=new_mode,
        old_id=old_id,
        new_id=new_id,
        binary=binary,
        additions=counts[0],
        deletions=counts[1],
        old_size=sizes[0],
        new_size=sizes[1],
    )


def _blob(handle: pygit2.Repository, oid: str) -> pygit2.Blob:
    """The blob ``oid`` (a missing one raises, as libgit2's tree diff does)."""
    found = handle[oid]
    if not isinstance(found, pygit2.Blob):
        raise KeyError(f"{oid} is not a blob")
    return found


def _delta_values(patch: pygit2.Patch) -> FileDelta:
    delta = patch.delta
    binary = bool(delta.is_binary)
    _context, additions, deletions = patch.line_stats
    return FileDelta(
        status=_STATUS.get(delta.status, "modified"),
        old_path=delta.old_file.path,
        new_path=delta.new_file.path,
        old_mode=int(delta.old_file.mode),
        new_mode=int(delta.new_file.mode),
        old_id=str(delta.old_file.id),
        new_id=str(delta.new_file.id),
        binary=binary,
        additions=0 if binary else additions,
        deletions=0 if binary else deletions,
        old_size=int(delta.old_file.size),
        new_size=int(delta.new_file.size),
    )


def object_size(repo: RepositoryLike, oid: str) -> int:
    """The size in bytes of object ``oid`` read from its header (its content is not read);
    ``0`` for the null id (all zeros, any length), a malformed id or a missing object."""
    if oid == ZERO_HEX or set(oid) == {"0"}:
        return 0
    try:
        return int(_handle(repo).odb.read_header(oid)[1])
    except (KeyError, ValueError, TypeError, pygit2.GitError):
        return 0


__all__ = [
    "ZERO_HEX",
    "FileDelta",
    "RepositoryLike",
    "TreeDeltas",
    "as_git_repo",
    "diff_values",
    "empty_tree_id",
    "object_size",
    "tree_id",
]
