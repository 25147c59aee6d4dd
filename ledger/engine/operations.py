"""The writing commands as library calls: restore, undo, fork, checkpoint, diff.

Why it exists: ``rewind restore/undo/fork/checkpoint/diff`` and a Python agent's own commands
need the same operations, with a plan first and a report after. Each function takes an
:class:`~ledger.engine.engine.Engine` and returns a report value; the CLI only formats it.

Invariants:
- A refused operation (no rewind point, unsafe plan, nothing to undo) raises before anything is
  changed or appended.
- A restore that changes nothing records no undo; a dry run changes and appends nothing.
- Every record is appended the way the reference would write it for the equivalent menu choice:
  ``files`` = "Code only" (an op at the leaf), ``conversation`` = a durable leaf move (an op whose
  parent is the new position), ``both`` = "Restore all" (both in one op).
- :func:`undo` decides what to bring back exactly as the menus do
  (:mod:`ledger.engine.undo_target`): an interrupted restore of the session first, recovered
  and recorded (docs/design.md#crash-safe-restore).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ledger.engine.changes_since import plan_authors
from ledger.engine.context import EngineContext as Engine
from ledger.engine.conversation import fork_path, rewind_parent
from ledger.engine.filestate import FileState
from ledger.engine.neighbours import WrittenByOther
from ledger.engine.undo_target import require_undo, undo_files
from ledger.errors import LedgerError, NoRewindPointError
from ledger.git.restore.journal import recording
from ledger.outside_rules import OutsideChange
from ledger.plain import Plain
from ledger.session.model import is_restorable
from ledger.session.parse import Entry

if TYPE_CHECKING:
    from ledger.git.restore.journal import Journal
    from ledger.git.restore.run import RestorePlan

RestoreMode = Literal["both", "files", "conversation"]
ForkMode = Literal["conversation", "all", "code"]


class RestoreReport(Plain):
    __slots__ = (
        "added",
        "changed",
        "deleted",
        "dry_run",
        "entry",
        "interrupted",
        "leaf",
        "mode",
        "modified",
        "others",
        "outside",
        "plan",
        "position",
        "record",
        "target",
        "undo",
        "warnings",
    )
    mode: str
    entry: str | None
    target: str | None
    added: list[str]
    modified: list[str]
    deleted: list[str]
    changed: bool
    dry_run: bool
    undo: str | None
    record: str | None
    leaf: str | None
    position: str | None
    """For a conversation move: the entry the conversation continues from (None = a new root)."""
    warnings: list[str]
    outside: list[OutsideChange]
    """Paths changed since the latest rewind point (outside the agent) that this restore
    overwrites or deletes (docs/design.md#outside-changes)."""
    others: list[WrittenByOther]
    """Files whose state now another session's agent wrote, that this restore overwrites or
    deletes, per session (docs/design.md#attribution)."""
    interrupted: Journal | None
    """For an undo that finishes an interrupted restore (``mode="recover"``): its journal."""
    plan: RestorePlan | None
    """The restore plan behind a dry run (not in the JSON): handed back as ``planned``, the
    operation reuses it and its scan instead of planning and scanning again."""

    def __init__(
        self,
        mode: str,
        entry: str | None,
        target: str | None,
        added: list[str] | None = None,
        modified: list[str] | None = None,
        deleted: list[str] | None = None,
        changed: bool = False,
        dry_run: bool = False,
        undo: str | None = None,
        record: str | None = None,
        leaf: str | None = None,
        position: str | None = None,
        warnings: list[str] | None = None,
        outside: list[OutsideChange] | None = None,
        others: list[WrittenByOther] | None = None,
        interrupted: Journal | None = None,
        plan: RestorePlan | None = None,
    ) -> None:
        self.mode = mode
        self.entry = entry
        self.target = target
        self.added = [] if added is None else added
        self.modified = [] if modified is None else modified
        self.deleted = [] if deleted is None else deleted
        self.changed = changed
        self.dry_run = dry_run
        self.undo = undo
        self.record = record
        self.leaf = leaf
        self.position = position
        self.warnings = [] if warnings is None else warnings
        self.outside = [] if outside is None else outside
        self.others = [] if others is None else others
        self.interrupted = interrupted
        self.plan = plan

    def _names(self) -> tuple[str, ...]:
        # As the dataclass's ``field(repr=False, compare=False)``: the plan is neither shown nor
        # compared.
        return tuple(name for name in self.__slots__ if name != "plan")

    def to_json(self) -> dict[str, Any]:
        recovered = (
            {"recovered": self.interrupted.id, "interruptedTarget": self.interrupted.target}
            if self.interrupted is not None
            else {}
        )
        return {
            "added": self.added,
            "modified": self.modified,
            "deleted": self.deleted,
            "mode": self.mode,
            "entry": self.entry,
            "target": self.target,
            "changed": self.changed,
            "dryRun": self.dry_run,
            "undo": self.undo,
            "record": self.record,
            "leaf": self.leaf,
            "position": self.position,
            "warnings": self.warnings,
            "changedOutsideAgent": [c.to_json() for c in self.outside],
            "writtenByOtherSessions": [group.to_json() for group in self.others],
            **recovered,
        }


def _entry(engine: Engine, entry_id: str) -> Entry:
    entry = engine.session().get(entry_id)
    if entry is None:
        raise NoRewindPointError(entry_id, reason="no such entry")
    return entry


def _point(engine: Engine, entry_id: str) -> str:
    target = engine.resolve_point(entry_id)
    if target is None:
        raise NoRewindPointError(entry_id)
    return target


def _fill_plan(report: RestoreReport, plan: RestorePlan, engine: Engine | None = None) -> None:
    report.added, report.modified, report.deleted = (
        list(plan.added),
        list(plan.modified),
        list(plan.deleted),
    )
    report.warnings.extend(plan.warnings)
    if engine is not None:  # from the plan's own capture: no capture added
        authors = plan_authors(engine, plan)
        report.outside, report.others = list(authors.own), list(authors.others)


def _fill_from(report: RestoreReport, planned: RestoreReport, plan: RestorePlan) -> None:
    """A report's plan, warnings and attribution from its dry run (computed once)."""
    report.added, report.modified, report.deleted = (
        list(plan.added),
        list(plan.modified),
        list(plan.deleted),
    )
    report.warnings.extend(planned.warnings)
    report.outside, report.others = list(planned.outside), list(planned.others)


def plan_for(engine: Engine, target: str) -> RestorePlan:
    from ledger.git.restore.run import plan_restore

    return plan_restore(engine.repo, target, engine.settings.snapshot)


def restore(
    engine: Engine,
    entry_id: str,
    mode: RestoreMode = "both",
    *,
    dry_run: bool = False,
    planned: RestoreReport | None = None,
) -> RestoreReport:
    """Restore ``entry_id``'s files, conversation or both. ``planned``: this restore's dry run,
    already shown to the user: its plan (and the scan behind it) is reused when it is for the
    same point, so the command scans the work tree once (the restore re-checks, under its lock,
    the paths the plan touches: :mod:`ledger.git.restore.recheck`)."""
    entry = _entry(engine, entry_id)
    report = RestoreReport(mode=mode, entry=entry_id, target=None, dry_run=dry_run)
    position = rewind_parent(entry)
    if mode != "files":
        report.position = position
    if mode == "conversation":
        report.leaf = position
        if dry_run:
            return report
        kept = engine.snapshot()
        report.target = kept
        report.record = engine.append_op(current=kept, parent_id=position)
        return report
    target = _point(engine, entry_id)
    report.target = target
    reuse = planned is not None and planned.plan is not None and planned.target == target
    if reuse and planned is not None and planned.plan is not None:
        plan = planned.plan
        _fill_from(report, planned, plan)
    else:
        plan = plan_for(engine, target)
        _fill_plan(report, plan, engine)
    report.plan = plan
    if dry_run:
        report.leaf = position if mode == "both" else engine.host.leaf_id()
        return report
    with recording():
        outcome = engine.restore_files(target, planned=plan)
        report.changed = outcome.changed
        report.undo = outcome.undo_commit
        if mode == "both":
            report.record = engine.append_op(
                current=target, undo=outcome.undo_commit, parent_id=position
            )
            report.leaf = report.record
        elif outcome.changed or engine.branch_state().current != target:
            report.record = engine.append_op(current=target, undo=outcome.undo_commit)
            report.leaf = report.record
    return report


def undo(
    engine: Engine, *, dry_run: bool = False, planned: RestoreReport | None = None
) -> RestoreReport:
    """ "Undo last file rewind": an interrupted restore of this session first (``mode`` =
    ``recover``), else the branch's recorded undo (:mod:`ledger.engine.undo_target`, the same
    decision as the menus'). ``planned``: this undo's dry run, already shown to the user: when
    it is still the undo to do, its plan and attribution are not computed again, and its scan
    stands for the restore's own (re-checked under the lock, :mod:`ledger.git.restore.recheck`)."""
    found = require_undo(engine)
    report = RestoreReport(
        mode="undo" if found.interrupted is None else "recover",
        entry=found.entry,
        target=found.snapshot,
        dry_run=dry_run,
        interrupted=found.interrupted,
    )
    if (
        planned is not None
        and not dry_run
        and planned.target == found.snapshot
        and planned.mode == report.mode
    ):
        report.warnings.extend(planned.warnings)
        report.outside, report.others = list(planned.outside), list(planned.others)
        report.plan = planned.plan
    else:
        report.plan = plan_for(engine, found.snapshot)
        _fill_plan(report, report.plan, engine)
    if dry_run:
        return report
    done = undo_files(engine, found, planned=report.plan)
    report.added, report.modified, report.deleted = (
        list(done.added),
        list(done.modified),
        list(done.deleted),
    )
    report.changed, report.undo, report.record = done.changed, done.undo, done.record
    report.leaf = report.record
    return report


class ForkReport(Plain):
    __slots__ = ("child", "entry", "mode", "restore", "warnings")
    mode: str
    entry: str
    child: Path
    restore: RestoreReport | None
    warnings: list[str]

    def __init__(
        self,
        mode: str,
        entry: str,
        child: Path,
        restore: RestoreReport | None,
        warnings: list[str] | None = None,
    ) -> None:
        self.mode = mode
        self.entry = entry
        self.child = child
        self.restore = restore
        self.warnings = [] if warnings is None else warnings

    def to_json(self) -> dict[str, Any]:
        files = (
            self.restore.to_json()
            if self.restore
            else {"added": [], "modified": [], "deleted": [], "changedOutsideAgent": []}
        )
        return {
            **files,
            "mode": self.mode,
            "entry": self.entry,
            "child": str(self.child),
            "warnings": self.warnings,
        }


def fork(engine: Engine, entry_id: str, mode: ForkMode = "conversation") -> ForkReport:
    """Pi's ``/fork`` from ``entry_id`` into a new session file, with the reference's options."""
    session = engine.session()
    entry = _entry(engine, entry_id)
    cwd = session.cwd
    if cwd is None:
        raise LedgerError(
            f"session {session.id} has no cwd in its header",
            hint="a Pi session header records its cwd",
        )
    restored: RestoreReport | None = None
    if mode == "conversation":
        state = FileState(engine.snapshot())
    else:
        target = _point(engine, entry.id)
        restored = RestoreReport(mode=mode, entry=entry.id, target=target)
        _fill_plan(restored, plan_for(engine, target), engine)
    with recording():
        if restored is not None:
            outcome = engine.restore_files(target)
            restored.changed, restored.undo = outcome.changed, outcome.undo_commit
            state = FileState(target, outcome.undo_commit)
        engine.prepare_fork(state)
    try:
        entries = fork_path(session, entry.id, "before")
        child_host = engine.host.create_fork(entries, cwd=cwd)
    except LedgerError:
        engine.settle_fork(happened=False)  # D13: keep the restore undoable
        raise
    engine.settle_fork(happened=True)
    parent_file = engine.host.session_file
    child = engine.for_host(child_host)
    child.session_start("fork", str(parent_file) if parent_file else None)
    report = ForkReport(mode=mode, entry=entry.id, child=child_host.path, restore=restored)
    if not any(
        e.get("type") == "message" and (e.get("message") or {}).get("role") == "assistant"
        for e in entries
    ):
        report.warnings.append(
            "the fork has no assistant message yet: Pi rewrites such a file's lines at its first reply "
            "(a duplicate flush), which rewind reads correctly"
        )
    return report


class CheckpointReport(Plain):
    __slots__ = ("commit", "entry", "record")
    entry: str
    commit: str
    record: str

    def __init__(self, entry: str, commit: str, record: str) -> None:
        self.entry = entry
        self.commit = commit
        self.record = record

    def to_json(self) -> dict[str, Any]:
        return {"entry": self.entry, "commit": self.commit, "record": self.record}


def checkpoint(engine: Engine, entry_id: str | None = None) -> CheckpointReport:
    """Snapshot now and bind it to ``entry_id`` (default: the latest restorable entry)."""
    session = engine.session()
    if entry_id is None:
        candidates = [e for e in session.branch(engine.host.leaf_id()) if is_restorable(e)]
        if not candidates:
            raise NoRewindPointError(
                "@",
                reason="the branch has no user, assistant, summary or compaction entry",
                hint="name an entry: rewind checkpoint SESSION ENTRY",
            )
        entry = candidates[-1]
    else:
        entry = _entry(engine, entry_id)
        if not is_restorable(entry):
            raise NoRewindPointError(
                entry.id,
                reason=f"a {entry.type} entry cannot be a rewind point",
                hint="choose a user, assistant, custom message, compaction or summary entry",
            )
    commit = engine.snapshot()
    record = engine.append_op(bindings=[(entry.id, commit)])
    return CheckpointReport(entry.id, commit, record)


class DiffReport(Plain):
    __slots__ = ("added", "deleted", "entry", "modified", "patch", "target")
    entry: str
    target: str
    added: list[str]
    modified: list[str]
    deleted: list[str]
    patch: str | None

    def __init__(
        self,
        entry: str,
        target: str,
        added: list[str],
        modified: list[str],
        deleted: list[str],
        patch: str | None = None,
    ) -> None:
        self.entry = entry
        self.target = target
        self.added = added
        self.modified = modified
        self.deleted = deleted
        self.patch = patch

    def to_json(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "added": self.added,
            "modified": self.modified,
            "deleted": self.deleted,
            "entry": self.entry,
            "target": self.target,
        }
        if self.patch is not None:
            payload["patch"] = self.patch
        return payload


def diff(
    engine: Engine, entry_id: str, *, patch: bool = False, relative: str | None = None
) -> DiffReport:
    """What a restore to ``entry_id`` would change in the work tree; ``patch``: the text
    ``git diff <now> <target>`` prints under the user's settings (``relative``: the
    ``diff.relative`` prefix of the caller's directory)."""
    _entry(engine, entry_id)
    target = _point(engine, entry_id)
    plan = plan_for(engine, target)
    text = None
    if patch:
        from ledger.review.diff import GitDiffer

        text = GitDiffer(engine.repo, relative=relative).text(
            plan.current_tree, engine.repo.tree_of(target) or plan.target_tree, "patch"
        )
    return DiffReport(
        entry_id, target, list(plan.added), list(plan.modified), list(plan.deleted), text
    )
