"""``rewind history``: the session's file operations, newest first (jj's ``op log``).

Why it exists: formatting only. The operations come from :mod:`ledger.history` (pure, from the
records) and what each changed from :func:`ledger.engine.history.operation_changes` (a tree
diff of its before → after snapshots). ``rewind undo SESSION --to OP`` (in
:mod:`ledger.cli.restore`) takes the ids printed here.

Invariants: reads only (no engine, no capture, nothing appended); with ``--json`` one object per
operation; the paths are listed only for the operations shown (``-n``), and not at all with
``--no-paths``.
"""

from __future__ import annotations

import argparse

from ledger.cli.context import CliContext
from ledger.cli.sessions import session_repo

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.engine.history import OperationChanges
    from ledger.git.repo import GitRepo
    from ledger.history import Operation

TEXT_PATHS = 10
"""Paths listed per operation in the text output (the JSON lists them all)."""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "history",
        parents=[common],
        help="the session's file operations, newest first",
        description="List the session's file operations (restores, undos, /tree and /fork "
        "restores), newest first: its id, kind, the snapshots before and after it and the paths "
        "it changed. 'rewind undo SESSION --to OP' brings back the files as they were before one.",
    )
    p.add_argument(
        "session",
        metavar="SESSION",
        help="a .jsonl path, a unique session id prefix, or @ (newest)",
    )
    p.add_argument(
        "--lineage",
        action="store_true",
        help="also list the operations of the ancestor sessions (a fork's parents)",
    )
    p.add_argument(
        "-n",
        "--max-count",
        type=int,
        metavar="N",
        default=None,
        help="list only the N newest operations",
    )
    p.add_argument(
        "--no-paths", action="store_true", help="do not diff the snapshots (faster on big trees)"
    )
    p.set_defaults(run=run_history)


def run_history(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.history import lineage_operations, session_operations
    from ledger.lineage import LineageReader

    path, repo = session_repo(ctx, args.session)
    lineage = LineageReader().lineage(path)
    if args.lineage:
        for warning in lineage.warnings:
            ctx.warn(warning)
        ops = lineage_operations((link.view, link.session) for link in lineage.links)
    else:
        ops = session_operations(lineage.current.view, lineage.current.session)
    if args.max_count is not None:
        ops = ops[: max(0, args.max_count)]
    if not ops and not ctx.json:
        ctx.emit(None, f"no file operations in session {lineage.current.session_id}")
        return 0
    for op in ops:
        changes = None if args.no_paths else _changes(repo, op)
        ctx.emit_line(_json(op, changes, repo), _text(op, changes, lineage=args.lineage))
    return 0


def _changes(repo: GitRepo, op: Operation) -> OperationChanges:
    from ledger.engine.history import operation_changes

    return operation_changes(repo, op)


def _json(op: Operation, changes: OperationChanges | None, repo: GitRepo) -> dict[str, object]:
    payload: dict[str, object] = {
        "id": op.record,
        "session": op.session,
        "kind": op.kind,
        "timestamp": op.timestamp,
        "entry": op.parent,
        "before": op.before,
        "after": op.after,
        "beforeExists": repo.commit_exists(op.before) if op.before else None,
        "recordType": op.record_type,
    }
    if changes is not None:
        payload.update(
            added=list(changes.added),
            modified=list(changes.modified),
            deleted=list(changes.deleted),
            changesKnown=changes.known,
        )
    return payload


def _text(op: Operation, changes: OperationChanges | None, *, lineage: bool) -> str:
    from ledger.outside_rules import plan_counts
    from ledger.quoting import display_name as shown

    before = op.before[:12] if op.before else "-" * 12
    prefix = f"{op.session[:8]}  " if lineage else ""
    head = (
        f"{prefix}{op.record}  {op.timestamp or '-'}  {op.kind:<13}  "
        f"before {before}  after {op.after[:12]}  entry {op.parent or '-'}"
    )
    if changes is None:
        return head
    if not changes.known:
        return f"{head}\n  ({changes.reason})"
    if op.before is None:
        return f"{head}\n  (no file changes)"
    lines = [f"{head}  {plan_counts(changes.added, changes.modified, changes.deleted)}"]
    paths = (
        [f"  A {shown(p)}" for p in changes.added]
        + [f"  M {shown(p)}" for p in changes.modified]
        + [f"  D {shown(p)}" for p in changes.deleted]
    )
    lines.extend(paths[:TEXT_PATHS])
    if len(paths) > TEXT_PATHS:
        lines.append(f"  … and {len(paths) - TEXT_PATHS} more (--json lists them all)")
    return "\n".join(lines)
