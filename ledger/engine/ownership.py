"""Values of whose work a file holds: an agent's steps and the user's own work
(docs/outside-changes.md#your-own-work), and memoised diffs of recorded trees.

Why it exists: whose work a file holds is decided by the authorship index
(:mod:`ledger.engine.attribution`, docs/authorship.md). What stays here:

- :class:`AgentWork`: what an agent's steps produced, as the sessions recording into a nested
  or enclosing shadow are still asked (:mod:`ledger.engine.neighbours`: their captures go to
  their own repository's index);
- :class:`OwnWork`: a file of the user's that a restore would overwrite, delete or bring back;
- :func:`recorded_changes`: leaf changes between two recorded trees, memoised on the engine
  and kept on disk for later processes (:mod:`ledger.engine.kept_diffs`; trees never change),
  for walks over many points (the ``/rewind`` list); :func:`neighbour_pairs`, the pairs that
  list walks.

Invariants: read-only; no capture of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from ledger.engine.kept_diffs import kept_for
from ledger.git.private import private_dir
from ledger.git.trees import Change, leaf_changes
from ledger.plain import FrozenPlain, Plain
from ledger.session.model import is_restorable

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext as Engine
    from ledger.session.model import Session
    from ledger.session.parse import Entry as SessionEntry

_CACHE_LIMIT = 4096
"""Tree pairs whose diff an engine keeps (each a few paths: the agent's changes of one turn)."""


class AgentWork(Plain):
    """What the agent's steps on the branch produced."""

    __slots__ = ("deleted", "made")
    made: set[tuple[str, int, str]]
    """``(path, mode, blob)`` written by an agent step."""
    deleted: set[str]
    """Paths an agent step deleted."""

    def __init__(
        self, made: set[tuple[str, int, str]] | None = None, deleted: set[str] | None = None
    ) -> None:
        self.made = set() if made is None else made
        self.deleted = set() if deleted is None else deleted

    def wrote(self, change: Change) -> bool:
        """Whether the current side of ``change`` (its ``old``: a diff from now to a target)
        is the agent's work: content an agent step produced, or an absence it made."""
        now = change.old
        if now is None:
            return change.path in self.deleted
        return (change.path, now.mode, now.oid) in self.made


class OwnWork(FrozenPlain):
    """A file whose current state a restore would overwrite or delete, not made by the agent."""

    __slots__ = ("change", "path", "since")
    path: str
    change: Literal["overwritten", "deleted", "recreated"]
    """What the restore does to it: writes other content, deletes it, or brings back a file the
    user deleted."""
    since: str | None
    """The entry whose point first holds this content (a prompt the user's work was kept
    before); ``None`` when it appeared after the latest point, i.e. right now."""

    def __init__(
        self,
        path: str,
        change: Literal["overwritten", "deleted", "recreated"],
        since: str | None = None,
    ) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "change", change)
        object.__setattr__(self, "since", since)

    def _fields(self) -> tuple[object, ...]:
        return (self.path, self.change, self.since)

    def to_json(self) -> dict[str, str | None]:
        return {"path": self.path, "change": self.change, "since": self.since}


def recorded_changes(engine: Engine, old_tree: str, new_tree: str) -> list[Change]:
    """Leaf changes between two recorded trees, memoised on the engine and kept on disk for
    later processes (trees never change; a failed diff, a missing or corrupt tree, is
    memoised as no changes but never kept)."""
    cache: dict[tuple[str, str], list[Change]] = engine.tree_diff_cache
    key = (old_tree, new_tree)
    found = cache.get(key)
    if found is None:
        kept = kept_for(private_dir(engine.repo.git_dir))
        found = kept.get(old_tree, new_tree)
        if found is None:
            computed = leaf_changes(engine.repo, old_tree, new_tree)
            if computed is not None:
                kept.put(old_tree, new_tree, computed)
            found = computed or []
        if len(cache) >= _CACHE_LIMIT:
            cache.pop(next(iter(cache)))
        cache[key] = found
    return found


def branch_prompts(session: Session, leaf: str | None) -> list[SessionEntry]:
    """The prompts of the branch ending at ``leaf`` that can have a rewind point, oldest first."""
    return [
        e
        for e in session.branch(leaf)
        if e.type == "message" and e.role == "user" and is_restorable(e)
    ]


def neighbour_pairs(
    engine: Engine, session: Session, leaf: str | None, *, limit: int
) -> list[tuple[str, str]]:
    """The ``(older, newer)`` tree pairs whose diffs the ``/rewind`` list of this branch takes
    from :func:`recorded_changes` (:func:`ledger.engine.preview.list_points`, the same walk),
    newest first: the bridge computes them ahead (:mod:`ledger.bridge.warm_up`)."""
    lineage = engine.reader.lineage(session)
    users = branch_prompts(session, leaf)
    pairs: list[tuple[str, str]] = []
    newer: str | None = None
    for entry in reversed(users[-limit:] if limit else users):
        found = lineage.resolve(entry.id, engine.repo.commit_exists)
        tree = engine.repo.tree_of(found[0]) if found is not None else None
        if tree is None:
            continue
        if newer is not None:
            pairs.append((tree, newer))
        newer = tree
    return pairs


__all__ = ["AgentWork", "OwnWork", "branch_prompts", "neighbour_pairs", "recorded_changes"]
