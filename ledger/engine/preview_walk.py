"""A prompt's preview from the ``/rewind`` list's own diffs: the work tree now against the
point, without walking the two trees again.

Why it exists: a preview is the restore plan shown before the user chooses (issue 34: any
preview ≤ 200 ms at 100k files and 200 points). Its tree walk from the work tree's capture to
an old point reads every changed level of both trees (~2,900 at the oldest point of the
benchmark, 1,483 files) and was most of a preview's time. The list has just composed the
same answer from the neighbouring diffs between the branch's points
(:func:`ledger.engine.ownership.recorded_changes`: memoised, kept on disk); so does this
module, for one point, then checks the target's side the way the plan's checked walk would
(:func:`ledger.git.restore.checked_walks.verified`).

Invariants:
- Exact or nothing: the result equals ``tree_changes(now, target)`` — a path differs between
  now and the point exactly when it differs in one of the neighbouring diffs on the way and
  its entries at the two ends differ — or is ``None`` and the caller walks the trees (the
  prompt is not on the branch, its chain does not end at the target's tree, a neighbouring
  diff came back empty between two different trees, which is also how a failed diff looks).
- Used only for a preview (``build_plan(..., for_preview=True, known=...)``): a restore's
  plan always walks the trees itself.
- Read-only, like the list (a missing neighbouring diff is computed and kept, as there).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ledger.engine.ownership import branch_prompts, recorded_changes
from ledger.git.trees import Change, Entry, leaf_changes

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext


def chain_to(engine: EngineContext, entry_id: str) -> list[str] | None:
    """The trees of the branch's points from the newest back to ``entry_id``'s (points that
    have none skipped, as the list skips them), or ``None`` when the prompt is not on the
    branch the user is on or has no point."""
    session = engine.session()
    users = branch_prompts(session, engine.host.leaf_id())
    at = next((i for i, e in enumerate(users) if e.id == entry_id), None)
    if at is None:
        return None
    lineage = engine.reader.lineage(session)
    trees: list[str] = []
    for entry in reversed(users[at:]):
        found = lineage.resolve(entry.id, engine.repo.commit_exists)
        tree = engine.repo.tree_of(found[0]) if found is not None else None
        if tree is not None:
            trees.append(tree)
        elif entry.id == entry_id:
            return None
    return trees or None


def composed_changes(
    engine: EngineContext, now: str, target_tree: str, entry_id: str
) -> list[Change] | None:
    """Leaf changes from the tree ``now`` to ``target_tree`` (the point of ``entry_id``),
    sorted by path bytes like :func:`ledger.git.trees.tree_changes`, from the neighbouring
    diffs; ``None`` when they cannot be trusted to be complete (see the module)."""
    trees = chain_to(engine, entry_id)
    if trees is None or trees[-1] != target_tree:
        return None
    first = leaf_changes(engine.repo, trees[0], now)
    if first is None:
        return None
    steps: list[list[Change]] = []
    newer = trees[0]
    for older in trees[1:]:
        if older != newer:
            step = recorded_changes(engine, older, newer)
            if not step:
                return None  # a failed diff looks like this: walk the trees instead
            steps.append(step)
        newer = older
    return compose(first, steps)


def compose(first: Sequence[Change], steps: Iterable[Sequence[Change]]) -> list[Change]:
    """The leaf changes from the newest tree to the oldest of a chain, given ``first``, the
    changes from the chain's first tree (old side) to the newest (new side), and ``steps``,
    each from the next older tree to the previous one: a path's entry at the newest end is
    its newer side where it first appears, at the oldest end its older side where it last
    appears; it is a change when the two differ. Sorted by path bytes."""
    ends: dict[str, list[Entry | None]] = {c.path: [c.new, c.old] for c in first}
    for step in steps:
        for change in step:
            found = ends.get(change.path)
            if found is None:
                ends[change.path] = [change.new, change.old]  # unchanged from here to the newest
            else:
                found[1] = change.old
    paths = sorted((p for p, (a, b) in ends.items() if a != b), key=os.fsencode)
    return [Change(p, ends[p][0], ends[p][1]) for p in paths]


__all__ = ["chain_to", "compose", "composed_changes"]
