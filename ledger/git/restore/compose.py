"""A restore target composed of two trees: a point's files, with some paths kept as they are now
(the agent's ``rewind`` tool, docs/pi.md#the-agents-rewind-tool).

Why it exists: the tool's restore takes back only the files that hold this conversation's
agent's work and leaves every other file as it is. Rather than teach the restore layer a second,
partial mode, the tool restores an ordinary target: the point's tree, edited so that each
left-alone path holds its current entry (or stays absent). The restore then writes, verifies and
journals exactly as every other restore does, and its ``rewind-op`` names a real snapshot whose
files equal the work tree after it (the reference's undo works unchanged).

The composed target is planned from the first plan's own capture (:func:`plan_from_scan`), not
from a second scan of the work tree: a capture at 100k files is most of a restore's time, and a
second one adds nothing the restore's re-check does not already cover. The plan is built and
checked exactly as any plan (:func:`~ledger.git.restore.plan.build_plan`); for the re-check
under the restore's lock (:mod:`ledger.git.restore.recheck`) it carries the first plan's stamps
of the paths it touches, taken right after that capture, so any change to one of them since the
capture makes the restore capture and plan again, as when a plan is not current.

Invariants: writes only git objects (trees); the blobs named are already in the repository (the
current side comes from the capture the plan was made from). A file that replaces a directory, or
the reverse, is handled as ``git write-tree`` would (:func:`ledger.git.capture.treeedit.edit_tree`).
Anything the tree editor cannot express is a :class:`~ledger.errors.GitError`, never a partial
tree. A composed plan reuses a stamp only for a path the first plan stamped; any other path it
touches (it should touch none) leaves it without a scan, so the restore captures again.
"""

from __future__ import annotations

from collections.abc import Sequence

import pygit2

from ledger.errors import GitError
from ledger.git.capture.treeedit import LazyUnsupported, edit_tree
from ledger.git.repo import GitRepo
from ledger.git.restore.plan import RestorePlan, build_plan, resolve_commit
from ledger.git.restore.recheck import PlanScan
from ledger.git.trees import Entry


def keep_as_now(repo: GitRepo, target_tree: str, kept: Sequence[tuple[str, Entry | None]]) -> str:
    """``target_tree`` with each ``(path, entry)`` of ``kept`` set to ``entry`` (``None``: the
    path is absent now, so it stays absent); returns the new tree's id."""
    changes: dict[str, tuple[int, pygit2.Oid] | None] = {}
    for path, entry in kept:
        changes[path] = None if entry is None else (entry.mode, pygit2.Oid(hex=entry.oid))
    try:
        return edit_tree(repo.pygit2, target_tree, changes)
    except LazyUnsupported as exc:
        raise GitError("compose", f"could not compose the restore's target tree: {exc}") from exc


def plan_from_scan(repo: GitRepo, first: RestorePlan, target_commit: str) -> RestorePlan | None:
    """The plan to ``target_commit`` (the composed snapshot) from ``first``'s capture, with
    ``first``'s stamps for the re-check (see the module); ``None`` when ``first`` kept no scan
    (the caller plans with a capture of its own)."""
    scan = first.scan
    if scan is None:
        return None
    plan = build_plan(repo, resolve_commit(repo, target_commit), scan.captured)
    touched = dict.fromkeys([*plan.added, *plan.modified, *plan.deleted, *plan.replace_dirs])
    if plan.submodules or any(path not in scan.stamps for path in touched):
        return plan.with_scan(None)  # never a guess: the restore captures again
    stamps = {path: scan.stamps[path] for path in touched}
    return plan.with_scan(PlanScan(scan.captured, scan.settings, stamps))


__all__ = ["keep_as_now", "plan_from_scan"]
