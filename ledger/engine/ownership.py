"""A branch's recorded file states, and the values of the user's own work (docs/outside-changes.md#your-own-work).

Why it exists: whose work a file holds is decided by the authorship index
(:mod:`ledger.engine.attribution`); what stays here is the branch timeline (every recorded file
state root → leaf, which a fresh comparison walks), agent steps as the nested-shadow neighbours
still need them (:mod:`ledger.engine.neighbours`), and :class:`OwnWork`, a file of the user's a
restore would change. Before the index, this module decided ownership by walking the timeline:

The old rule (content identity, so a rewind and its undo change nothing about authorship):

- the **timeline** is the branch root → leaf: each restorable entry's exact point through
  lineage (a user entry: the files before its prompt; an assistant entry: after its turn; a
  compaction, summary or checkpoint: the files at that moment) and each op's ``current`` (a
  restore, an undo, "Keep current files");
- an **agent step** is a change into an assistant entry's point from the point before it: the
  agent's tools made those changes. Every ``(path, mode, blob)`` such a step produced, and every
  path it deleted, is the agent's work;
- a file that exists now and whose ``(mode, blob)`` no agent step on the branch produced holds
  the **user's own work** (made by hand between prompts, by another tool, or before the session).

A file the agent wrote is never listed as the user's, however often it was restored since. The
index keeps the same rule as work happens, in O(changed paths) per plan.

Invariants: read-only; no capture of its own (callers pass the tree of the capture they already
took); a missing or pruned snapshot just drops its steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from ledger.git.trees import Change, leaf_changes
from ledger.ledgerview import LedgerView
from ledger.records import OP
from ledger.session.model import Session, is_restorable

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext as Engine

StepKind = Literal["agent", "prompt", "moment", "rewind"]

_CACHE_LIMIT = 4096
"""Tree pairs whose diff an engine keeps (each a few paths: the agent's changes of one turn)."""


@dataclass(frozen=True)
class Step:
    """One recorded file state on the branch, in branch order."""

    entry: str
    commit: str
    tree: str
    kind: StepKind


class Authorship(Protocol):
    """Anything that can say whether an agent produced the current side of a change."""

    def wrote(self, change: Change) -> bool: ...


@dataclass
class AgentWork:
    """What the agent's steps on the branch produced."""

    made: set[tuple[str, int, str]] = field(default_factory=set)
    """``(path, mode, blob)`` written by an agent step."""
    deleted: set[str] = field(default_factory=set)
    """Paths an agent step deleted."""

    def wrote(self, change: Change) -> bool:
        """Whether the current side of ``change`` (its ``old``: a diff from now to a target)
        is the agent's work: content an agent step produced, or an absence it made."""
        now = change.old
        if now is None:
            return change.path in self.deleted
        return (change.path, now.mode, now.oid) in self.made


@dataclass(frozen=True)
class OwnWork:
    """A file whose current state a restore would overwrite or delete, not made by the agent."""

    path: str
    change: Literal["overwritten", "deleted", "recreated"]
    """What the restore does to it: writes other content, deletes it, or brings back a file the
    user deleted."""
    since: str | None = None
    """The entry whose point first holds this content (a prompt the user's work was kept
    before); ``None`` when it appeared after the latest point, i.e. right now."""

    def to_json(self) -> dict[str, str | None]:
        return {"path": self.path, "change": self.change, "since": self.since}


def timeline(engine: Engine) -> list[Step]:
    """The recorded file states of the branch the engine's host is on, root → leaf, with
    consecutive repeats of one tree folded into the first."""
    session = engine.session()
    return branch_timeline(engine, session, engine.host.leaf_id())


def branch_timeline(engine: Engine, session: Session, leaf: str | None) -> list[Step]:
    """:func:`timeline` of any session's branch ending at ``leaf`` (another session's too:
    :mod:`ledger.engine.neighbours`), resolved through that session's own lineage."""
    view = LedgerView.of(session)
    records = {r.record_id: r for r in view.records}
    lineage = engine.reader.lineage(session)
    repo = engine.repo
    steps: list[Step] = []

    def add(entry: str, commit: str, kind: StepKind) -> None:
        tree = repo.tree_of(commit)
        if tree is None:
            return  # pruned: its step is unknown, the next one covers the gap
        if steps and steps[-1].tree == tree:
            return
        steps.append(Step(entry, commit, tree, kind))

    for entry in session.branch(leaf):
        record = records.get(entry.id) if entry.type == "custom" else None
        if record is not None:
            if record.custom_type == OP and record.current:
                add(entry.id, record.current, "rewind")
            elif record.custom_type == OP and record.last_binding_sha:
                add(entry.id, record.last_binding_sha, "moment")  # a checkpoint
            continue  # a turn's bindings are its entries', met on their own
        if not is_restorable(entry):
            continue
        found = lineage.resolve(entry.id, repo.commit_exists)
        if found is None:
            continue
        kind: StepKind = (
            "prompt" if entry.role == "user" else "agent" if entry.role == "assistant" else "moment"
        )
        add(entry.id, found[0], kind)
    return steps


def recorded_changes(engine: Engine, old_tree: str, new_tree: str) -> list[Change]:
    """Leaf changes between two recorded trees, memoised on the engine (trees never change)."""
    return _changes(engine, old_tree, new_tree)


def _changes(engine: Engine, old_tree: str, new_tree: str) -> list[Change]:
    cache: dict[tuple[str, str], list[Change]] = engine.tree_diff_cache
    key = (old_tree, new_tree)
    found = cache.get(key)
    if found is None:
        found = leaf_changes(engine.repo, old_tree, new_tree) or []
        if len(cache) >= _CACHE_LIMIT:
            cache.pop(next(iter(cache)))
        cache[key] = found
    return found


__all__ = [
    "AgentWork",
    "Authorship",
    "OwnWork",
    "Step",
    "branch_timeline",
    "recorded_changes",
    "timeline",
]
