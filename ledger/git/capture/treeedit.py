"""Small captures without rewriting the private index: hash the changed paths, edit the tree.

Why it exists: after ``git status`` has listed what differs from the private index, recording
those paths costs two full index rewrites (``update-index``, then ``write-tree`` saving its
cache-tree), about 150 ms on a 100,000-file repository, even for one changed file. For a few
changed paths it is cheaper to hash them (``git hash-object -w --stdin-paths``, which applies the
same attributes and clean filters as ``git add``), and to derive the snapshot tree from the tree
of the private index's entries with pygit2. The index is then updated later, in one go, when the
list grows (see :mod:`ledger.git.capture.scan`).

Why this stays exact: the base is the tree of the *index's* entries, and ``git status`` lists
every path whose work-tree state differs from its index entry (content-compared when stat data
cannot be trusted), so base + those paths is the whole work tree. A path that is reverted to
its indexed content simply stops being listed. Paths are re-hashed at every capture while they
are pending, so no stat cache of ours is involved.

Invariants: writes only git objects. Anything unusual (a directory or repository where a file
was, names git would read differently on a line-based stdin, names pygit2 cannot encode) raises
:class:`LazyUnsupported`, and the caller takes the ordinary path instead.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Sequence

import pygit2
from pygit2.enums import FileMode

from ledger.git.runner import GitRunner
from ledger.plain import Plain


class LazyUnsupported(Exception):
    """This change set needs the ordinary update-index path."""


class _Node(Plain):
    __slots__ = ("children", "clear", "entry")
    clear: bool
    entry: tuple[int, pygit2.Oid] | None
    children: dict[str, _Node]

    def __init__(
        self,
        clear: bool = False,
        entry: tuple[int, pygit2.Oid] | None = None,
        children: dict[str, _Node] | None = None,
    ) -> None:
        self.clear = clear
        self.entry = entry
        self.children = {} if children is None else children


def current_entries(
    git: GitRunner,
    repo: pygit2.Repository,
    root: str,
    paths: Sequence[str],
    *,
    filemode: bool,
    config: Iterable[tuple[str, str]],
) -> dict[str, tuple[int, pygit2.Oid] | None]:
    """What ``git add`` into a fresh index would record for each path (``None`` = absent)."""
    out: dict[str, tuple[int, pygit2.Oid] | None] = {}
    regular: list[tuple[str, int]] = []
    for path in paths:
        if "\n" in path or path.startswith('"') or "\r" in path:
            raise LazyUnsupported(path)
        try:
            st = os.lstat(os.path.join(root, path))
        except FileNotFoundError:
            out[path] = None
            continue
        except NotADirectoryError:
            out[path] = None
            continue
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(os.fsencode(os.path.join(root, path)))
            out[path] = (FileMode.LINK, repo.create_blob(target))
        elif stat.S_ISREG(st.st_mode):
            mode: int = (
                FileMode.BLOB_EXECUTABLE if filemode and st.st_mode & 0o100 else FileMode.BLOB
            )
            regular.append((path, mode))
        else:
            raise LazyUnsupported(path)  # a directory (maybe a repository) or a special file
    if regular:
        data = b"".join(os.fsencode(p) + b"\n" for p, _ in regular)
        result = git.run(
            ["hash-object", "-w", "--stdin-paths"],
            input=data,
            config=config,
            operation="git hash-object",
            check=False,
        )
        oids = result.text.split()
        if result.returncode != 0 or len(oids) != len(regular):
            raise LazyUnsupported("hash-object failed")
        for (path, mode), oid in zip(regular, oids):
            out[path] = (mode, pygit2.Oid(hex=oid))
    return out


def edit_tree(
    repo: pygit2.Repository, base: str, changes: dict[str, tuple[int, pygit2.Oid] | None]
) -> str:
    """``base`` with each changed path replaced (or removed when ``None``), as ``git
    write-tree`` would write it: no empty subtrees, a file replacing a directory and back."""
    root = _Node()
    try:
        for path, entry in changes.items():
            node = root
            # pygit2 1.21 keeps a reference to every name a TreeBuilder is given: interned,
            # they pile up on one string per distinct name (docs/soak.md#watcher-memory).
            parts = [sys.intern(name) for name in path.split("/")]
            for name in parts[:-1]:
                node = node.children.setdefault(name, _Node())
            leaf = node.children.setdefault(parts[-1], _Node())
            leaf.clear = True
            if entry is not None:
                leaf.entry = entry
        tree = repo.get(base)
        if not isinstance(tree, pygit2.Tree):
            raise LazyUnsupported(f"{base} is not a tree")
        oid = _apply(repo, tree, root)
    except (UnicodeError, ValueError, pygit2.GitError) as exc:
        raise LazyUnsupported(str(exc)) from exc
    return str(oid) if oid is not None else str(repo.TreeBuilder().write())


def _apply(repo: pygit2.Repository, tree: pygit2.Tree | None, node: _Node) -> pygit2.Oid | None:
    builder = repo.TreeBuilder(tree) if tree is not None else repo.TreeBuilder()
    for name, child in node.children.items():
        existing = builder.get(name)
        if child.entry is not None:
            if child.children and any(c.entry or c.children for c in child.children.values()):
                raise LazyUnsupported(name)  # a file and paths below it: not a valid index
            builder.insert(name, child.entry[1], child.entry[0])
            continue
        sub: pygit2.Tree | None = None
        if existing is not None and existing.filemode == FileMode.TREE and not child.clear:
            found = repo.get(existing.id)
            sub = found if isinstance(found, pygit2.Tree) else None
        if child.clear and not child.children:
            if existing is not None:
                builder.remove(name)
            continue
        new = _apply(repo, sub, child)
        if new is None:
            if existing is not None:
                builder.remove(name)
        else:
            builder.insert(name, new, FileMode.TREE)
    if len(builder) == 0:
        return None
    return builder.write()
