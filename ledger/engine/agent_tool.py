"""The model's own ``rewind`` tool: checkpoint, list, diff and restore, taking back only what this
conversation's agent wrote (docs/pi.md#the-agents-rewind-tool).

Why it exists: a model that wants to abandon a failed attempt reaches for ``git checkout``,
``git stash``, ``git clean`` or ``rm``, which is how users lose uncommitted work. This gives it a
way back that only ever takes back its own work: the authorship index knows, per file, whose work
the current content is (:mod:`ledger.engine.agent_points` holds the rule).

- :func:`checkpoint`: a snapshot of now, bound to the entry the tool was called from (the
  assistant message that called it) by an ordinary ``rewind-op`` record, so ``/tree`` and the
  reference see it too; the extension then labels that entry, which retention pins
  (docs/design.md#default-retention). The turn that called it does not rebind the entry to its
  post-turn snapshot (``Collector.kept``).
- :func:`list_points` and :func:`diff`: what a restore to each point would change, per file,
  with each file's author. Nothing appended.
- :func:`restore`: files only, never the conversation. It restores a **composed** snapshot: the
  point's files, with every file that holds someone else's work kept as it is now. So the
  restore is an ordinary files-only restore (journal, undo snapshot, verification, one
  ``rewind-op`` with ``current`` and ``undo``, the reference's "Code only" record): undoable from
  ``/rewind``, ``/tree``, ``/fork`` and ``rewind undo``.

Invariants:
- A restore writes nothing while another session's turn runs in this work tree: it is refused
  before any capture (the registry's word), and the turn gate refuses it again under its lock
  (docs/design.md#never-mid-turn).
- A restore changes only the files :func:`~ledger.engine.agent_points.sort_files` takes back; the
  composed target is planned again and checked to touch nothing else before it is written, and
  the restore's own re-check under its lock covers changes made after that plan.
- A refused or empty restore appends nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ledger.engine.agent_points import (
    ToolFile,
    ToolPoint,
    branch_points,
    find_point,
    sort_files,
    tool_restores,
)
from ledger.errors import LedgerError, NoRewindPointError
from ledger.session.model import is_restorable

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext as Engine
    from ledger.git.restore.plan import RestorePlan
    from ledger.git.trees import Change

LIST_LIMIT = 20
"""Points a ``list`` shows (newest first)."""
MAX_PATCH_BYTES = 24_000
"""The diff text a ``diff`` returns at most (a model's context is not a pager)."""


class OtherTurnRunning(LedgerError):
    """Another session's agent is in a turn in this work tree: the tool writes nothing now."""

    def __init__(self, who: str) -> None:
        self.who = who
        super().__init__(
            f"nothing restored: {who} is in a turn in this work tree, and a restore never writes "
            "files while another session's agent runs",
            hint="try again once that turn has ended, or leave the files as they are",
        )


@dataclass(frozen=True)
class CheckpointReport:
    point: ToolPoint
    record: str
    fresh: bool
    """False when the entry already had this checkpoint (called twice in one message)."""


@dataclass(frozen=True)
class PointSummary:
    point: ToolPoint
    files: tuple[ToolFile, ...]


@dataclass(frozen=True)
class DiffReport:
    point: ToolPoint
    files: tuple[ToolFile, ...]
    patch: str
    cut: bool


@dataclass
class RestoreReport:
    point: ToolPoint
    restored: list[ToolFile] = field(default_factory=list)
    left_alone: list[ToolFile] = field(default_factory=list)
    record: str | None = None
    current: str | None = None
    """The snapshot the files now equal (the point's, or the composed one)."""
    undo: str | None = None
    warnings: list[str] = field(default_factory=list)


def _busy_other(engine: Engine) -> str | None:
    from ledger.turngate import busy_here, named

    busy = busy_here(engine.repo.git_dir, engine.session().id)
    return named(busy) if busy else None


def checkpoint(engine: Engine, label: str) -> CheckpointReport:
    """Snapshot now and bind it to the entry the tool was called from (the latest restorable
    entry of the branch: the assistant message that called the tool)."""
    session = engine.session()
    candidates = [e for e in session.branch(engine.host.leaf_id()) if is_restorable(e)]
    if not candidates:
        raise NoRewindPointError("@", reason="this conversation has no message yet")
    entry = candidates[-1]
    commit = engine.snapshot()
    record = engine.append_op(bindings=[(entry.id, commit)])
    prompt = engine.this_prompt()
    if prompt is not None:
        prompt.kept.add(entry.id)  # the turn that called the tool does not rebind the entry
    point = ToolPoint(
        entry.id,
        "checkpoint",
        label,
        "",
        entry.timestamp if isinstance(entry.timestamp, str) else None,
        commit,
    )
    return CheckpointReport(point, record, True)


def _changes(engine: Engine, plan: RestorePlan) -> list[Change]:
    from ledger.git.trees import leaf_changes

    touched = {*plan.added, *plan.modified, *plan.deleted}
    changes = list(plan.changes) or (
        leaf_changes(engine.repo, plan.current_tree, plan.target_tree) or []
    )
    return [c for c in changes if c.path in touched]


def _sorted(engine: Engine, changes: list[Change]) -> list[ToolFile]:
    from ledger.engine.attribution import Attribution

    if not changes:
        return []
    attribution = Attribution.of(engine, changes)
    return sort_files(attribution, changes, tool_restores(engine.session()))


def list_points(engine: Engine, *, limit: int = LIST_LIMIT) -> list[PointSummary]:
    """This conversation's newest points, each with what a restore to it would change (one
    capture, then one tree diff per point, skipping equal subtrees)."""
    from ledger.engine.attribution import Attribution
    from ledger.git.capture.scan import capture_tree
    from ledger.git.trees import leaf_changes

    points = branch_points(engine, limit=limit)
    if not points:
        return []
    captured = capture_tree(engine.repo, engine.settings.snapshot)
    bare = [s.path.rstrip("/") for s in captured.skipped]
    per_point: list[tuple[ToolPoint, list[Change]]] = []
    every: list[Change] = []
    for point in points:
        tree = engine.repo.tree_of(point.snapshot)
        found = leaf_changes(engine.repo, captured.tree, tree) if tree else None
        changes = [
            c
            for c in found or []
            if not any(c.path == p or c.path.startswith(p + "/") for p in bare)
        ]
        per_point.append((point, changes))
        every.extend(changes)
    attribution = Attribution.of(engine, every) if every else None
    own = tool_restores(engine.session())
    return [
        PointSummary(
            point,
            tuple(sort_files(attribution, changes, own)) if attribution and changes else (),
        )
        for point, changes in per_point
    ]


def diff(engine: Engine, ref: str) -> DiffReport:
    """What restoring ``ref``'s files would change, per file with its author, and the diff of
    the files the restore would take back (from now to the point), cut at
    :data:`MAX_PATCH_BYTES`."""
    from ledger.git.capture.scan import capture_tree
    from ledger.git.restore.patch_text import patch_of
    from ledger.git.restore.plan import build_plan, resolve_commit

    point = find_point(engine, ref)
    # The plan a restore would make now, with every check, but not stamped for a restore's
    # re-check (only a restore reuses it; :func:`restore` plans again).
    commit = resolve_commit(engine.repo, point.snapshot)
    plan = build_plan(engine.repo, commit, capture_tree(engine.repo, engine.settings.snapshot))
    changes = _changes(engine, plan)
    files = _sorted(engine, changes)
    back = {f.path for f in files if f.taken_back}
    mine = [c for c in changes if c.path in back]  # the plan's (the trees') order, as git's
    text = patch_of(engine.repo, plan.current_tree, plan.target_tree, mine)
    encoded = text.encode("utf-8", "surrogateescape")
    cut = len(encoded) > MAX_PATCH_BYTES
    if cut:
        text = encoded[:MAX_PATCH_BYTES].decode("utf-8", "replace")
    return DiffReport(point, tuple(files), text, cut)


def restore(engine: Engine, ref: str) -> RestoreReport:
    """Restore ``ref``'s files, only those holding this conversation's agent's work (see the
    module); the conversation stays where it is."""
    from ledger.engine.operations import plan_for
    from ledger.git.restore.journal import held_journals, recording

    point = find_point(engine, ref)
    who = _busy_other(engine)
    if who is not None:
        raise OtherTurnRunning(who)
    plan = plan_for(engine, point.snapshot)
    report = RestoreReport(point)
    report.warnings.extend(plan.warnings)
    changes = _changes(engine, plan)
    files = _sorted(engine, changes)
    report.left_alone = [f for f in files if not f.taken_back]
    taken = {f.path for f in files if f.taken_back}
    if not taken:
        return report
    # Always a snapshot of its own, even when nothing is left alone: the content this restore
    # writes is told apart from a user's rewind to the same point (which names the point's
    # own snapshot) by its snapshot (agent_points.tool_restores).
    kept = [c for c in changes if c.path not in taken]
    target = _composed(engine, plan.target_tree, kept)
    plan = replanned(engine, plan, target)
    stray = {*plan.added, *plan.modified, *plan.deleted} - taken
    if stray:
        # The composed target would touch a file nobody sorted (a capture taken again found
        # it changed, or the composition did not hold). Refuse, nothing written.
        raise LedgerError(
            "nothing restored: files changed while the restore was planned "
            f"({', '.join(sorted(stray)[:5])})",
            hint="call restore again",
        )
    # Bounded: a capture under the restore's lock that finds more to change, or a taken-back
    # file changed since it was sorted, refuses with nothing written (PlanOutgrownError).
    plan = plan.as_bounded()
    with recording(), held_journals() as journals:
        try:
            outcome = engine.restore_files(target, planned=plan)
            if outcome.changed:
                report.record = engine.append_op(current=target, undo=outcome.undo_commit)
                # Recorded: its journal is settled now, as the next look would settle it
                # (ledger.git.restore.journal.settle: a done journal whose record is found).
                # Left for later, the journals of a model's many restores piled up, and every
                # restore reads them all under its lock.
                for journal in journals:
                    if journal.state == "done":
                        journal.close(durable=False)
        finally:
            for journal in journals:
                journal.release()  # until the record was there, the restore counted as running
    report.current, report.undo = target, outcome.undo_commit
    done = {*outcome.plan.added, *outcome.plan.modified, *outcome.plan.deleted}
    report.restored = [f for f in files if f.taken_back and f.path in done]
    # A file of the agent's that a left-alone file stands in the way of (a kept file where the
    # point has a directory, or inside a directory where the point has a file): the kept file
    # wins (ledger/git/restore/compose.py), and the model is told.
    kept_files = {c.path for c in kept if c.old is not None}
    report.left_alone += [
        replace(
            f, author=f"{f.author}, not restored: a file left alone is in its way", taken_back=False
        )
        for f in files
        if f.taken_back
        and f.path not in done
        and any(f.path.startswith(k + "/") or k.startswith(f.path + "/") for k in kept_files)
    ]
    return report


def replanned(engine: Engine, first: RestorePlan, target: str) -> RestorePlan:
    """The plan to the composed ``target``, from ``first``'s capture when it kept one
    (:func:`~ledger.git.restore.compose.plan_from_scan`), else from a capture of its own."""
    from ledger.engine.operations import plan_for
    from ledger.git.restore.compose import plan_from_scan

    found = plan_from_scan(engine.repo, first, target)
    return found if found is not None else plan_for(engine, target)


def _composed(engine: Engine, target_tree: str, kept: list[Change]) -> str:
    """A snapshot of ``target_tree`` with each of ``kept`` as it is now (its ``old`` side),
    committed to the store like any snapshot (the op record names it as ``current``)."""
    from ledger.git.restore.compose import keep_as_now
    from ledger.git.store.snapshot import commit_snapshot

    tree = keep_as_now(engine.repo, target_tree, [(c.path, c.old) for c in kept])
    # A commit of its own (see restore): never the dedup candidate's, and a body line that no
    # other snapshot of the same tree made in the same second has.
    note = f"Rewind-Tool: {uuid.uuid4().hex[:16]}"
    return commit_snapshot(engine.repo, tree, last_exact=None, clock=engine.clock, note=note).commit


__all__ = [
    "CheckpointReport",
    "DiffReport",
    "OtherTurnRunning",
    "PointSummary",
    "RestoreReport",
    "checkpoint",
    "diff",
    "list_points",
    "restore",
]
