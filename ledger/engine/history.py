"""``rewind history`` and ``rewind undo --to OP`` as library calls: the operation log with what
each operation changed, and going back to the files as they were just before any one of them.

Why it exists: :mod:`ledger.history` reads the operations from the records (pure); this module
adds the git side (the paths an operation changed, a tree diff of its before → after snapshots,
computed only when asked) and the restore, through the same engine path as ``rewind undo``:
the turn gate and the journaled restore of :meth:`Engine.restore_files
<ledger.engine.engine.Engine.restore_files>`, the plan and its warnings about files written
outside the agent or by other sessions (docs/design.md#operation-history).

Invariants:
- ``undo --to`` refuses before anything changes: an unknown or ambiguous OP, an operation that
  changed no file (no state before it), a pruned snapshot, an interrupted restore in the work
  tree (its journal is the way back; ``rewind undo`` finishes it first).
- It is one more operation: one ``rewind-op`` at the leaf, ``current`` = the snapshot brought
  back, ``undo`` = the files it replaced (None when none changed), so a plain ``rewind undo``
  swaps back; appended while the restore's journal is still held, as every undo is. None is
  appended when the files and the branch's recorded state already are that snapshot (as for
  ``rewind restore --mode files``).
- A dry run changes and appends nothing.
- Operations are found through the lineage (a fork's ancestors too): a fork's child shares its
  work tree, so the state before an ancestor's operation is a state of this work tree as well.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.engine.changes_since import plan_authors
from ledger.engine.context import EngineContext as Engine
from ledger.engine.operations import RestoreReport, plan_for
from ledger.errors import MissingCommitError, NoStateBeforeError
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import recording
from ledger.history import Operation, lineage_operations, resolve_operation, session_operations
from ledger.ledgerview import LedgerView
from ledger.recovery import held_session, interrupted_of, interruption_error

UNDO_TO = "undo-to"


def history(engine: Engine, *, lineage: bool = False) -> list[Operation]:
    """The session's file operations, newest first (``lineage``: its ancestors' too)."""
    session = engine.session()
    if not lineage:
        return session_operations(LedgerView.of(session), session)
    links = engine.reader.lineage(session).links
    return lineage_operations((link.view, link.session) for link in links)


@dataclass(frozen=True)
class OperationChanges:
    """The paths an operation changed (before → after), or why they are unknown."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    known: bool = True
    reason: str | None = None


def operation_changes(repo: GitRepo, op: Operation) -> OperationChanges:
    """A tree diff of ``op``'s before → after snapshots (no rename detection); nothing for an
    operation that changed no file, and ``known=False`` when a snapshot was pruned."""
    from ledger.git.trees import diff_trees

    if op.before is None:
        return OperationChanges()
    try:
        added, modified, deleted = diff_trees(repo, op.before, op.after)
    except MissingCommitError as exc:
        return OperationChanges(known=False, reason=exc.message)
    return OperationChanges(added, modified, deleted)


def find_operation(engine: Engine, name: str) -> Operation:
    """OP → an operation of the session or its ancestors (an id or a unique prefix)."""
    ops = history(engine, lineage=True)
    return resolve_operation(ops, name, scope=f"the operations of session {engine.session().id}")


def _before_state(engine: Engine, op: Operation) -> str:
    session_id = engine.session().id
    if op.before is None:
        raise NoStateBeforeError(
            op.record,
            session_id,
            reason=f"it changed no file ({op.kind}), so it recorded no state before it",
            hint=f"'rewind history {session_id}' lists the operations and their before snapshots",
        )
    if not engine.repo.commit_exists(op.before):
        raise NoStateBeforeError(
            op.record,
            session_id,
            reason=f"its before snapshot {op.before[:12]} was pruned",
            hint="retention ('rewind sweep', keepFor settings) dropped it; an older operation may still have its state",
        )
    return op.before


def undo_to(
    engine: Engine, name: str, *, dry_run: bool = False, planned: RestoreReport | None = None
) -> tuple[Operation, RestoreReport]:
    """Restore the files to what they were just before operation ``name`` and record it as one
    more undoable operation; ``dry_run``: the plan only. ``planned``: this call's dry run,
    shown to the user: its plan, attribution and scan are reused for the same target."""
    op = find_operation(engine, name)
    target = _before_state(engine, op)
    # An interrupted restore's journal is the only way back to the files it replaced: finish it
    # first (plain ``rewind undo``); restoring over it here would bury that state.
    found = interrupted_of(engine.repo, engine.host.session_file, held_session(engine))
    if found.mine is not None or found.newest is not None:
        journal = found.mine or found.newest
        assert journal is not None
        raise interruption_error(journal)
    report = RestoreReport(mode=UNDO_TO, entry=op.parent, target=target, dry_run=dry_run)
    if planned is not None and planned.plan is not None and planned.target == target:
        plan = planned.plan
        report.warnings.extend(planned.warnings)
        report.outside, report.others = list(planned.outside), list(planned.others)
    else:
        plan = plan_for(engine, target)
        report.warnings.extend(plan.warnings)
        authors = plan_authors(engine, plan)  # from the plan's own capture: no capture added
        report.outside, report.others = list(authors.own), list(authors.others)
    report.plan = plan
    report.added, report.modified, report.deleted = (
        list(plan.added),
        list(plan.modified),
        list(plan.deleted),
    )
    if dry_run:
        return op, report
    with recording():  # the restore counts as running until its op record is appended
        outcome = engine.restore_files(target, planned=plan)  # its scan, re-checked
        # As ``rewind restore --mode files``: files already there, and recorded so, add nothing.
        if outcome.changed or engine.branch_state().current != target:
            report.record = engine.append_op(current=target, undo=outcome.undo_commit)
    report.changed, report.undo, report.leaf = outcome.changed, outcome.undo_commit, report.record
    done = outcome.plan
    report.added, report.modified, report.deleted = (
        list(done.added),
        list(done.modified),
        list(done.deleted),
    )
    return op, report


__all__ = [
    "UNDO_TO",
    "OperationChanges",
    "find_operation",
    "history",
    "operation_changes",
    "undo_to",
]
