"""The session's latest rewind point on a branch, and what changed outside the agent since.

Why it exists: restore plans, ``rewind status``, the Pi menus and the status-line note at the
start of a prompt all compare the files now with the same point (docs/design.md#outside-changes):

- **The latest rewind point** on the branch root → leaf is the branch's recorded ``current``
  (:meth:`LedgerView.branch_state`, walked in branch order, D3): the post-turn snapshot of the
  agent's last turn, or what a later restore, undo, ``/tree`` "Keep current files", compaction or
  checkpoint recorded. That is the file state the ledger says the work tree is in, which is what
  the engine already dedups against (``Engine._reconstruct``). A branch without such a record
  (a fork child whose hand-off was not imported) falls back to the newest entry on the branch
  with an exact point through lineage; a pruned snapshot does not count.
- **Changed outside the agent** = the leaf changes from that point's tree to a capture of the work
  tree now (:mod:`ledger.outside_rules` classifies them).

- **Whose work** a restore would overwrite: this session's agent's, another session's agent's
  or the user's own (:func:`plan_authors`), a partition decided by the authorship index
  (:mod:`ledger.engine.attribution`).

Invariants: no capture of its own: restore plans reuse the plan's capture
(``RestorePlan.current_tree``); the prompt note reuses the pre-prompt snapshot.
Nothing here appends records or raises for a missing point: no point means no changes to report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ledger.engine.attribution import Attribution
from ledger.engine.neighbours import Neighbour, WrittenByOther
from ledger.engine.ownership import OwnWork
from ledger.errors import LedgerError
from ledger.git.trees import Change, entry_at, leaf_changes
from ledger.ledgerview import LedgerView
from ledger.outside_rules import (
    ChangeKind,
    OutsideChange,
    classify,
    outside_skipped,
    prompt_note,
)
from ledger.plain import FrozenPlain
from ledger.records import OP, TURN
from ledger.session.model import is_restorable

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext as Engine
    from ledger.git.store.snapshot import LastExact

MENU_UNDO = '"Undo last file rewind"'


class LatestPoint(FrozenPlain):
    """The file state the ledger records for the branch: a snapshot and where it comes from."""

    __slots__ = ("commit", "entry", "record", "timestamp", "tree")
    commit: str
    tree: str
    entry: str | None
    """The entry that state belongs to: the bound entry (a turn's last assistant message, a
    checkpoint's entry), or for an op's ``current`` the entry the op hangs under."""
    record: str | None
    """The record that names the snapshot (``None`` when found as a binding through lineage)."""
    timestamp: str | None
    """When that record (or the bound entry) was written, as in the session file."""

    def __init__(
        self, commit: str, tree: str, entry: str | None, record: str | None, timestamp: str | None
    ) -> None:
        self._init(commit=commit, tree=tree, entry=entry, record=record, timestamp=timestamp)

    def to_json(self) -> dict[str, str | None]:
        return {
            "entry": self.entry,
            "record": self.record,
            "snapshot": self.commit,
            "timestamp": self.timestamp,
        }


class OutsideReport(FrozenPlain):
    __slots__ = ("changes", "point")
    point: LatestPoint | None
    changes: tuple[OutsideChange, ...]

    def __init__(self, point: LatestPoint | None, changes: tuple[OutsideChange, ...] = ()) -> None:
        self._init(point=point, changes=changes)


def latest_point(engine: Engine) -> LatestPoint | None:
    """The latest rewind point on the branch the engine's host is on (see the module doc)."""
    repo = engine.repo
    session = engine.session()
    leaf = engine.host.leaf_id()
    view = LedgerView.of(session)
    state = view.branch_state(session, leaf)
    if state.current is not None and state.current_from is not None:
        tree = repo.tree_of(state.current)
        if tree is not None:
            source = session.get(state.current_from)
            stamp = source.timestamp if source is not None else None
            record = next((r for r in view.records if r.record_id == state.current_from), None)
            if record is None:  # a bound entry itself
                return LatestPoint(state.current, tree, state.current_from, None, _str(stamp))
            entry: str | None = record.parent_id
            if record.custom_type in (TURN, OP) and not record.current and record.bindings:
                entry = record.bindings[-1][0]
            return LatestPoint(state.current, tree, entry, record.record_id, _str(stamp))
    lineage = engine.reader.lineage(session)
    for candidate in reversed(session.branch(leaf)):
        if not is_restorable(candidate):
            continue
        found = lineage.resolve(candidate.id, repo.commit_exists)
        if found is not None:
            tree = repo.tree_of(found[0])
            if tree is not None:
                return LatestPoint(found[0], tree, candidate.id, None, _str(candidate.timestamp))
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def changed_since(
    engine: Engine,
    current_tree: str,
    *,
    skipped: Sequence[str] = (),
    point: LatestPoint | None = None,
) -> OutsideReport:
    """What differs between the latest point and ``current_tree`` (a capture of the work tree),
    leaving out ``skipped`` (the capture's protected paths)."""
    point = point if point is not None else latest_point(engine)
    if point is None or point.tree == current_tree:
        return OutsideReport(point)
    changes = leaf_changes(engine.repo, point.tree, current_tree)
    if changes is None:
        return OutsideReport(point)
    return OutsideReport(point, outside_skipped(classify(changes), skipped))


class Authors(FrozenPlain):
    """Who wrote what a restore would overwrite, besides this session's agent: the user's own
    work and each other session's agent's (docs/design.md#attribution)."""

    __slots__ = ("others", "own")
    own: tuple[OutsideChange, ...]
    others: tuple[WrittenByOther, ...]

    def __init__(
        self, own: tuple[OutsideChange, ...] = (), others: tuple[WrittenByOther, ...] = ()
    ) -> None:
        self._init(own=own, others=others)

    def to_json(self) -> list[dict[str, Any]]:
        """The ``writtenByOtherSessions`` list of a plan's JSON."""
        return [group.to_json() for group in self.others]


def overwritten_by(engine: Engine, plan: Any) -> tuple[OutsideChange, ...]:
    """The user's own work a restore plan (:class:`ledger.git.restore.run.RestorePlan`) would
    overwrite or delete, from the plan's own capture (no capture here)."""
    return plan_authors(engine, plan).own


def plan_authors(engine: Engine, plan: Any) -> Authors:
    """:class:`Authors` of what a restore plan would overwrite or delete (no capture here)."""
    if plan.noop:
        return Authors()
    touched = {*plan.added, *plan.modified, *plan.deleted}
    changes = plan.changes or None  # the plan's own diff: the trees are not diffed again
    return authors_of(engine, plan.current_tree, plan.target_tree, touched, changes=changes)


def authors_of(
    engine: Engine,
    current_tree: str,
    target_tree: str,
    touched: set[str] | None = None,
    *,
    skipped: Sequence[str] = (),
    point: LatestPoint | None = None,
    changes: Sequence[Change] | None = None,
    attribution: Attribution | None = None,
) -> Authors:
    """Of the files a restore from ``current_tree`` to ``target_tree`` would overwrite or
    delete: those whose state now another session's agent wrote, and the user's own work,
    sorted by path (:mod:`ledger.engine.attribution`: one index lookup per path). The user's
    work that changed since the latest point is classified exactly; older work kept in an
    earlier prompt's point names that prompt (``since``). ``touched``: only these paths (a
    plan's, which leaves skipped and ignored paths alone); ``skipped``: prefixes a restore
    never touches. ``changes``: that diff, when the caller has it already;
    ``attribution``: one shared by several plans (a menu, a list)."""
    diff = leaf_changes(engine.repo, current_tree, target_tree) if changes is None else changes
    if not diff:
        return Authors()
    bare = [p.rstrip("/") for p in skipped]
    diff = [
        c
        for c in diff
        if (touched is None or c.path in touched)
        and not any(c.path == p or c.path.startswith(p + "/") for p in bare)
    ]
    if not diff:
        return Authors()
    attribution = Attribution.of(engine, diff) if attribution is None else attribution
    theirs: dict[str, tuple[Neighbour, list[str]]] = {}
    mine: dict[str, OwnWork] = {}
    latest_tree: str | None = None
    latest_known = False
    for change in diff:
        whose = attribution.whose(change)
        if whose.attribution == "other-session" and whose.neighbour is not None:
            group = theirs.setdefault(whose.neighbour.session_id, (whose.neighbour, []))
            group[1].append(change.path)
            continue
        if whose.attribution != "user":
            continue
        if change.old is None:
            # Absent now: the user's when a capture saw them delete it, or when they deleted
            # it after the latest point (which still holds it).
            if whose.producer is None:
                if not latest_known:
                    found = point if point is not None else latest_point(engine)
                    latest_tree, latest_known = (found.tree if found else None), True
                if latest_tree is None or entry_at(engine.repo, latest_tree, change.path) is None:
                    continue
            mine[change.path] = OwnWork(change.path, "recreated")
            continue
        kind: Literal["overwritten", "deleted"] = "deleted" if change.new is None else "overwritten"
        mine[change.path] = OwnWork(change.path, kind, whose.since)
    others = tuple(
        WrittenByOther(neighbour, tuple(sorted(paths)))
        for neighbour, paths in sorted(
            theirs.values(), key=lambda group: (not group[0].running, group[0].session_id)
        )
    )
    if not mine:
        return Authors((), others)
    recent = {c.path: c for c in changed_since(engine, current_tree, point=point).changes}
    found_own: list[OutsideChange] = []
    for path in sorted(mine):
        if path in recent:
            found_own.append(recent[path])
            continue
        own = mine[path]
        change_kind: ChangeKind = (
            "deleted"
            if own.change == "recreated"
            else "added"
            if own.change == "deleted"
            else "modified"
        )
        found_own.append(OutsideChange(path, change_kind, since=own.since))
    return Authors(tuple(found_own), others)


def prompt_status_note(engine: Engine, before: LastExact | None) -> str | None:
    """The status-line note for a prompt whose pre-prompt snapshot (the engine's ``last_exact``
    now) differs from the latest point: the snapshot keeps changes made outside the agent.
    ``before`` is the engine's ``last_exact`` before that snapshot: when the capture equals it
    (the usual case, the point itself), nothing is compared."""
    now = engine.last_exact
    if now is None or (before is not None and before.tree == now.tree):
        return None
    try:
        report = changed_since(engine, now.tree)
    except (LedgerError, OSError):
        return None
    return prompt_note(report.changes)


__all__ = [
    "Authors",
    "LatestPoint",
    "OutsideReport",
    "authors_of",
    "changed_since",
    "latest_point",
    "overwritten_by",
    "plan_authors",
    "prompt_status_note",
]
