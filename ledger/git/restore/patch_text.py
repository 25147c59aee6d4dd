"""A unified diff of some changed files between two trees, in-process (the agent's ``rewind``
tool's ``diff``, docs/pi.md#the-agents-rewind-tool).

Why it exists: the tool shows the model the diff of the files a restore would take back. Asking
``git diff-tree -p`` for it starts a process (~15–20 ms on a loaded machine, a third of the
call's budget at 100k files), and libgit2's tree-to-tree diff reads every folder of both trees
(~30 ms at 100k files even when they are equal). The caller already knows the leaf changes (the
restore plan's, with both sides' blobs), so each file's patch is made from its two blobs, as git
prints it: ``diff --git``, ``index``, ``new file mode``/``deleted file mode``, ``Binary files …
differ``, three lines of context, no renames.

The patch is made from the blobs' bytes, not from the blob objects: given objects, libgit2 looks
up each path's diff attributes, which reads the repository's index when it changed (~100 ms at
100k files). So it is made only where no attribute can apply (no attribute file, no
``.gitattributes`` above the paths, no filter: the test the restore's direct writes use,
:func:`~ledger.git.restore.direct_write.conversion_free`); binary files are then told by their
content, as git tells them.

Invariants: read-only. The in-process text is used only for plain files (mode ``100644`` on each
side that has one, at most :data:`MAX_BYTES` in all) whose path is printable ASCII without
quotes, backslashes or spaces, where no attribute applies, with git's indent heuristic (on
unless ``diff.indentHeuristic`` turns it off, when git writes it) and no empty file added or
deleted (git prints no ``---``/``+++`` lines for those); any other change (an executable, a
link, a mode change, a name git would quote or mark with a tab, a ``.gitattributes``) leaves the
whole text to git itself (:func:`ledger.git.trees.patch`), so that the headers are git's. The
blob ids of ``index`` lines may be abbreviated to another length than git's (git picks its length
from the number of objects); nothing reads them back. Files come in the order given (a plan's
changes come in the trees' order, as git prints them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pygit2
from pygit2.enums import DiffOption, FileMode

from ledger.git.config_view import config_view
from ledger.git.repo import GitRepo
from ledger.git.restore.direct_write import conversion_free
from ledger.git.trees import Change, patch

_PLAIN = re.compile(r"[A-Za-z0-9._/+=,@~%#:!-]+")
"""A path printed as is in every header by git and by libgit2 alike."""
_TRUE = (None, "true", "yes", "on", "1")
"""git's spellings of a true boolean (a key written without ``=`` is true)."""
MAX_BYTES = 4 << 20
"""Blob bytes diffed in the bridge at most (more: git's process does it, off the bridge's
interpreter lock)."""


def _plain(change: Change) -> bool:
    sides = [e for e in (change.old, change.new) if e is not None]
    return bool(_PLAIN.fullmatch(change.path)) and all(e.mode == FileMode.BLOB for e in sides)


def patch_of(repo: GitRepo, from_tree: str, to_tree: str, changes: Sequence[Change]) -> str:
    """Unified diff text from ``from_tree`` to ``to_tree`` (tree ids) of ``changes`` only (leaf
    changes between those trees: ``old`` in ``from_tree``, ``new`` in ``to_tree``), as
    :func:`ledger.git.trees.patch` gives it for their paths (see the module)."""
    if not changes:
        return ""
    paths = [c.path for c in changes]
    if not all(_plain(c) for c in changes) or conversion_free(repo, paths) is not None:
        return patch(repo, from_tree, to_tree, paths=paths)
    heuristic = config_view(repo).values.get("diff.indentheuristic", "true")
    if (heuristic.strip().lower() if heuristic is not None else None) not in _TRUE:
        return patch(repo, from_tree, to_tree, paths=paths)  # git's own heuristic, switched off
    r = repo.pygit2
    sides: list[tuple[str, bytes | None, bytes | None]] = []
    total = 0
    for change in changes:
        old = r.get(change.old.oid) if change.old is not None else None
        new = r.get(change.new.oid) if change.new is not None else None
        if (change.old is not None and not isinstance(old, pygit2.Blob)) or (
            change.new is not None and not isinstance(new, pygit2.Blob)
        ):
            return patch(repo, from_tree, to_tree, paths=paths)
        total += (old.size if isinstance(old, pygit2.Blob) else 0) + (
            new.size if isinstance(new, pygit2.Blob) else 0
        )
        if total > MAX_BYTES:
            return patch(repo, from_tree, to_tree, paths=paths)
        if (old is None and new.size == 0) or (new is None and old.size == 0):  # type: ignore[union-attr]
            # An empty file added or deleted: git prints no ---/+++ lines for it, libgit2 does.
            return patch(repo, from_tree, to_tree, paths=paths)
        sides.append(
            (
                change.path,
                old.data if isinstance(old, pygit2.Blob) else None,
                new.data if isinstance(new, pygit2.Blob) else None,
            )
        )
    parts = [
        pygit2.Patch.create_from(
            a,
            b,
            old_as_path=path,
            new_as_path=path,
            flag=DiffOption.INDENT_HEURISTIC,  # git's default (diff.indentHeuristic), not libgit2's
            context_lines=3,
        ).data
        for path, a, b in sides
    ]
    return b"".join(parts).decode("utf-8", "surrogateescape")


__all__ = ["patch_of"]
