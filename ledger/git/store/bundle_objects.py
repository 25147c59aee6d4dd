"""Objects of session archives and remote exports: read a quarantine, write an export commit.

Why it exists: ``rewind export`` and ``rewind import`` (:mod:`ledger.portable`) move snapshot
commits between repositories. Import must look at a bundle's or a remote's objects while they
are still quarantined (a private object directory borrowing the repository's objects, see
:class:`ledger.portable.objects.Quarantine`): classify every commit, read an export commit's
manifest and session files, walk its keepalive chain. A remote export writes the reverse: blobs
for the session files, a tree, an export commit over a keepalive chain. These need libgit2, and
the git layer is the only code that imports it; this module gives the portable code plain values
instead (``str`` ids, ``bytes``, :class:`CommitInfo`).

Invariants:
- :class:`ObjectView` only reads. Opened with :meth:`ObjectView.with_objects` it sees the
  repository's objects and those of one extra object directory (the quarantine), and writes
  nothing to either: the quarantine is judged before anything moves into the repository.
- A missing or malformed id, or an object of another type than asked for, is ``None`` from
  :meth:`ObjectView.commit` and ``KeyError`` from :meth:`ObjectView.tree_entry` and
  :meth:`ObjectView.blob_data`; never a libgit2 exception.
- The writers (:func:`write_blob`, :func:`write_tree`, :func:`write_commit`) write loose objects
  only: no ref, no index, no work-tree file. Their ids are 40-hex ``str``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pygit2

from ledger.git.repo import GitRepo, lookup_commit, lookup_object
from ledger.git.store.chain import Identity

EntryKind = Literal["blob", "tree"]
"""The kind of a tree entry :func:`write_tree` writes (a regular file, or a subtree)."""

_MODES: dict[str, pygit2.enums.FileMode] = {
    "blob": pygit2.enums.FileMode.BLOB,
    "tree": pygit2.enums.FileMode.TREE,
}


@dataclass(frozen=True)
class CommitInfo:
    """What the portable code reads of a commit: its message, tree and parents (ids)."""

    sha: str
    message: str
    """The message as libgit2 decodes it (its encoding header honoured)."""
    tree: str
    parents: tuple[str, ...]

    @property
    def subject(self) -> str:
        """The first line of the message, stripped."""
        return self.message.split("\n", 1)[0].strip()


class ObjectView:
    """Read-only access to the objects one repository (and maybe one extra directory) holds."""

    def __init__(self, handle: pygit2.Repository) -> None:
        self._repo = handle

    @classmethod
    def of(cls, repo: GitRepo) -> ObjectView:
        """The repository's own objects (nothing quarantined)."""
        return cls(repo.pygit2)

    @classmethod
    def with_objects(cls, repo: GitRepo, objects_dir: Path | str) -> ObjectView:
        """A fresh view of ``repo`` that also sees the objects in ``objects_dir`` (an object
        directory with its own ``pack/``), as an alternate: the repository is not changed and
        its own handle (``repo``) does not see them."""
        view = pygit2.Repository(str(repo.pygit2.path))
        view.odb.add_disk_alternate(str(objects_dir))
        return cls(view)

    def commit(self, sha: str) -> CommitInfo | None:
        """The commit ``sha``, or ``None`` when it is malformed, missing or not a commit."""
        commit = lookup_commit(self._repo, sha)
        if commit is None:
            return None
        return CommitInfo(
            sha=str(commit.id),
            message=commit.message,
            tree=str(commit.tree_id),
            parents=tuple(str(p) for p in commit.parent_ids),
        )

    def tree_entry(self, tree: str, name: str) -> str:
        """The id of entry ``name`` of tree ``tree`` (a path with ``/`` reaches into subtrees);
        ``KeyError`` when ``tree`` is not a tree or has no such entry."""
        obj = lookup_object(self._repo, tree)
        if not isinstance(obj, pygit2.Tree):
            raise KeyError(tree)
        try:
            return str(obj[name].id)
        except (KeyError, ValueError, TypeError, pygit2.GitError) as exc:
            raise KeyError(name) from exc

    def blob_data(self, oid: str) -> bytes:
        """The bytes of blob ``oid``; ``KeyError`` when it is missing or not a blob."""
        obj = lookup_object(self._repo, oid)
        if not isinstance(obj, pygit2.Blob):
            raise KeyError(oid)
        return bytes(obj.data)


def head_commit(repo: GitRepo) -> str | None:
    """The commit ``HEAD`` points at, or ``None`` on an unborn branch (no commit yet)."""
    handle = repo.pygit2
    if handle.head_is_unborn:
        return None
    return str(handle.head.target)


def has_commits(repo: GitRepo) -> bool:
    """Whether ``HEAD`` points at a commit (``False`` on an unborn branch)."""
    return not repo.pygit2.head_is_unborn


def ref_target(repo: GitRepo, ref: str) -> str | None:
    """The id a direct ref points at, or ``None`` when the ref does not exist."""
    found = repo.pygit2.references.get(ref)
    return str(found.target) if found is not None else None


def write_blob(repo: GitRepo, data: bytes) -> str:
    """Write ``data`` as a blob object of ``repo``; its id."""
    return str(repo.pygit2.create_blob(data))


def write_tree(repo: GitRepo, entries: Iterable[tuple[str, str, EntryKind]]) -> str:
    """Write a tree of ``(name, id, kind)`` entries (kind ``blob``: a regular file, ``tree``: a
    subtree; libgit2 sorts them); its id."""
    builder = repo.pygit2.TreeBuilder()
    for name, oid, kind in entries:
        builder.insert(name, pygit2.Oid(hex=oid), _MODES[kind])
    return str(builder.write())


def write_commit(
    repo: GitRepo,
    *,
    message: str,
    tree: str,
    parents: Iterable[str],
    identity: Identity,
    when_s: int,
    offset_min: int,
) -> str:
    """Write a commit object (author and committer ``identity`` at ``when_s``, ``offset_min``
    minutes from UTC) with no ref pointing at it; its id."""
    sig = identity.signature(when_s, offset_min)
    handle = repo.pygit2
    return str(
        handle.create_commit(
            None,
            sig,
            sig,
            message,
            pygit2.Oid(hex=tree),
            [pygit2.Oid(hex=p) for p in parents],
        )
    )


__all__ = [
    "CommitInfo",
    "EntryKind",
    "ObjectView",
    "has_commits",
    "head_commit",
    "ref_target",
    "write_blob",
    "write_commit",
    "write_tree",
]
