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
never waited for (its thread is a daemon that only runs git). git's output is parsed in the
caller's thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

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
    """The counts of one tree pair: kept ones, or git running in a thread of its own."""

    def __init__(self, repo: GitRepo, old_tree: str, new_tree: str) -> None:
        self._key = (str(repo.git_dir), old_tree, new_tree)
        with _lock:
            found = _kept.get(self._key)
            if found is not None:
                _kept.move_to_end(self._key)
        self._result: Counted | None = found
        if found is None:
            from ledger.review.diff import GitDiffer

            self._differ = GitDiffer(repo)
            # The tree ids are resolved here, in the caller's thread; the thread started runs
            # the git process alone. The output is parsed in the caller's thread (binary files'
            # sizes are read with libgit2, which only the caller's thread uses).
            self._pending = self._differ.fetch_in_background([(old_tree, new_tree)], "files")

    def wait(self) -> Counted:
        """Every changed path's counts (raises what git or the parse raised)."""
        if self._result is not None:
            return self._result
        self._pending.wait()
        _, old_tree, new_tree = self._key
        files = self._differ.diff(old_tree, new_tree, files=True, texts=()).files
        result = {f.path: Lines(f.additions, f.deletions, f.binary) for f in files}
        with _lock:
            _kept[self._key] = self._result = result
            while len(_kept) > PAIRS:
                _kept.popitem(last=False)
        return result


def forget() -> None:
    """Drop every kept count (tests)."""
    with _lock:
        _kept.clear()


__all__ = ["PAIRS", "Counted", "Counting", "Lines", "forget"]
