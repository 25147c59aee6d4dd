"""Line counts of a ``/rewind`` preview: git's numstat of the two trees, once per tree pair.

Why it exists: a preview lists each file a restore would change with its added and removed
lines (:func:`ledger.engine.preview.fill_plan`). They come from git itself (one ``git
diff-tree --raw --numstat`` process: a symlink↔file change is one entry with its lines, text
with control bytes is text, as ``rewind diff`` and ``git diff --numstat`` say). They depend
only on the two trees, so (issue 34: any preview ≤ 200 ms at 100k files) git starts as soon as
the capture is known and runs while the plan is checked; and a tree pair
already counted is not counted again while a user goes back and forth between points.

Invariants: read-only (git only reads objects); the numbers are git's, unchanged; a failed
count is raised to the caller and never kept; at most :data:`PAIRS` pairs are kept (least
recently used dropped first). A count started for a plan that is then refused is simply
never waited for (its thread is a daemon that only runs git and parses its text; libgit2 is
used by the caller's thread only, to read the diff options first).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ledger.errors import GitError
from ledger.git.repo import GitRepo

PAIRS = 16


@dataclass(frozen=True)
class Lines:
    """One file's counts: lines added and removed by the restore, or binary (no counts)."""

    additions: int
    deletions: int
    binary: bool


Counted = dict[str, Lines]

_kept: OrderedDict[tuple[str, str, str], Counted] = OrderedDict()
_lock = threading.Lock()


class Counting:
    """The counts of one tree pair: kept ones, or git running (and its output parsed) in a
    thread of its own."""

    def __init__(self, repo: GitRepo, old_tree: str, new_tree: str) -> None:
        self._key = (str(repo.git_dir), old_tree, new_tree)
        with _lock:
            found = _kept.get(self._key)
            if found is not None:
                _kept.move_to_end(self._key)
        self._result: Counted | None = found
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if found is None:
            from ledger.git.repo import ConfigValues
            from ledger.review.diff import porcelain_options

            # The options are read here, in the caller's thread (libgit2 is used by that thread
            # only); the thread runs git (a process) and parses its text, nothing else. The
            # options are the ones `rewind diff` and the review use (ledger.review.diff).
            args, settings = porcelain_options(ConfigValues(repo))
            # The order of the files changes no count, and an unreadable diff.orderFile would
            # fail git and with it the whole preview.
            args = [arg for arg in args if not arg.startswith("-O")]
            options = [*args, "--no-renames", "--no-color", "--raw", "--numstat", "-z"]
            runner = (repo, old_tree, new_tree, options, settings)
            self._thread = threading.Thread(
                target=self._run, args=runner, name="rewind-line-counts", daemon=True
            )
            self._thread.start()

    def _run(
        self,
        repo: GitRepo,
        old_tree: str,
        new_tree: str,
        options: list[str],
        settings: list[tuple[str, str]],
    ) -> None:
        from ledger.git.trees import diff_tree_batch

        try:
            (raw,) = diff_tree_batch(repo, [(old_tree, new_tree)], options, config=settings)
            self._result = parse_counts(raw)
        except BaseException as exc:  # handed to the waiting thread, never lost
            self._error = exc

    def wait(self) -> Counted:
        """Every changed path's counts (raises what git or the parse raised)."""
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        result = self._result
        assert result is not None
        with _lock:
            _kept[self._key] = result
            _kept.move_to_end(self._key)
            while len(_kept) > PAIRS:
                _kept.popitem(last=False)
        return result


def parse_counts(raw: bytes) -> Counted:
    """``git diff-tree -r --no-renames --raw --numstat -z`` output as each path's counts: the
    raw records first (``:modes ids status`` then the path), then one numstat record per raw
    record, in the same order (``added TAB deleted TAB path``; ``-`` for binary)."""
    tokens = raw.split(b"\0")
    paths: list[bytes] = []
    i = 0
    while i < len(tokens) and tokens[i].startswith(b":"):
        count = 2 if tokens[i].rsplit(b" ", 1)[-1][:1] in (b"R", b"C") else 1
        paths.append(tokens[i + count])  # the path now (the only one without renames)
        i += 1 + count
    out: Counted = {}
    for path in paths:
        if i >= len(tokens):
            break
        added, _, rest = tokens[i].partition(b"\t")
        deleted, _, named = rest.partition(b"\t")
        i += 1 if named else 3
        binary = added == b"-"
        out[os.fsdecode(path)] = Lines(
            0 if binary else int(added or 0), 0 if binary else int(deleted or 0), binary
        )
    if len(out) != len(paths):
        raise GitError("git diff-tree", "unexpected --raw --numstat output")
    return out


def blob_sizes(repo: GitRepo, now_tree: str, target_tree: str, path: str) -> tuple[int, int]:
    """A binary file's size in bytes now and after the restore (``0`` where it does not exist
    on that side): what a preview says instead of line counts (issue 35). Read from the object
    headers only."""
    from ledger.git.treediff import object_size
    from ledger.git.trees import entry_at

    sizes = []
    for tree in (now_tree, target_tree):
        entry = entry_at(repo, tree, path)
        sizes.append(object_size(repo.pygit2, entry.oid) if entry is not None else 0)
    return sizes[0], sizes[1]


def forget() -> None:
    """Drop every kept count (tests)."""
    with _lock:
        _kept.clear()


__all__ = ["PAIRS", "Counted", "Counting", "Lines", "blob_sizes", "forget", "parse_counts"]
