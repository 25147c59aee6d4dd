"""``rewind restore``, ``undo``, ``fork``, ``checkpoint`` and ``diff``: the writing commands.

Why it exists: formatting and confirmation only. The operations live in
:mod:`ledger.engine.operations`; this module resolves names, builds the engine on a session
file, asks before changing files (or requires ``--yes`` without a terminal), and prints reports.

Invariants: a dry run, a refused confirmation and a refused plan change and append nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from types import SimpleNamespace

from ledger.cli.context import CliContext
from ledger.cli.sessions import open_engine, plan_outside_lines
from ledger.errors import LedgerError, SessionAppendError
from ledger.outside_rules import plan_counts

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py); the engine
# itself is imported when a command runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from ledger.engine.changes_since import Authors
    from ledger.engine.engine import Engine
    from ledger.engine.operations import RestoreReport

    class Changes(Protocol):
        """What a plan or a report lists: the paths a restore adds, modifies and deletes."""

        @property
        def added(self) -> Sequence[str]: ...
        @property
        def modified(self) -> Sequence[str]: ...
        @property
        def deleted(self) -> Sequence[str]: ...


SESSION_HELP = "a .jsonl path, a unique session id prefix, or @ (newest)"
ENTRY_HELP = "an entry id, a unique prefix of one, or @ (the branch's latest prompt)"


class ConfirmationRequired(LedgerError):
    def __init__(self, action: str) -> None:
        super().__init__(
            f"{action} needs confirmation and there is no terminal to ask",
            hint="pass --yes to confirm, or --dry-run to see the plan",
        )


class Declined(LedgerError):
    def __init__(self) -> None:
        super().__init__("cancelled: nothing was changed")


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "restore",
        parents=[common],
        help="restore files and/or conversation to an entry",
        description="Restore the files of an entry's exact rewind point (files), move the "
        "conversation back to it durably (conversation), or both.",
    )
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.add_argument("entry", metavar="ENTRY", help=ENTRY_HELP)
    p.add_argument("--mode", choices=("both", "files", "conversation"), default="both")
    p.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.set_defaults(run=run_restore)

    p = sub.add_parser(
        "undo",
        parents=[common],
        help="undo the last file rewind of the session",
        description="Restore the latest undo snapshot on the session's branch (undo of undo "
        "works); with --to OP, the files as they were just before that operation (see 'rewind "
        "history'), itself one more undoable operation.",
    )
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.add_argument(
        "--to",
        metavar="OP",
        default=None,
        help="an operation id from 'rewind history' (or a unique prefix of one): restore the "
        "files to what they were just before it",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.set_defaults(run=run_undo)

    p = sub.add_parser(
        "fork",
        parents=[common],
        help="fork the session at an entry (Pi's /fork)",
        description="Write a child session file with the path up to ENTRY (for a user message: "
        "up to its parent), and restore files for --mode all or code.",
    )
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.add_argument("entry", metavar="ENTRY", help=ENTRY_HELP)
    p.add_argument("--mode", choices=("conversation", "all", "code"), default="conversation")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.set_defaults(run=run_fork)

    p = sub.add_parser(
        "checkpoint",
        parents=[common],
        help="snapshot now and bind it to an entry",
        description="Snapshot the work tree now and bind it to ENTRY (default: the latest "
        "user, assistant, summary or compaction entry on the branch).",
    )
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.add_argument("entry", metavar="ENTRY", nargs="?", help=ENTRY_HELP)
    p.set_defaults(run=run_checkpoint)

    p = sub.add_parser(
        "diff",
        parents=[common],
        help="what a restore to an entry would change",
        description="Show what restoring ENTRY's files would change: the files it would add, "
        "change or delete (named as git diff --name-status names them), or with --patch what "
        "git diff prints between the work tree now and ENTRY's point (nothing when nothing "
        "differs). Never paged or coloured.",
    )
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.add_argument("entry", metavar="ENTRY", help=ENTRY_HELP)
    p.add_argument(
        "--patch",
        action="store_true",
        help="print the unified diff git diff prints between the two trees",
    )
    p.set_defaults(run=run_diff)


# --- shared ---------------------------------------------------------------------------------


@contextlib.contextmanager
def restoring(
    ctx: CliContext, engine: Engine, operation: str, entry: str | None = None
) -> Iterator[None]:
    """Around an operation that may change files: the journal's intent (session, entry, agent
    dir), and SIGTERM/SIGHUP turned into an interruption so that the restore rolls back (and its
    git child is killed) instead of dying half-way."""
    from ledger.git.restore.journal import RestoreIntent, restore_intent

    session_file = engine.host.session_file
    intent = RestoreIntent(
        session=os.path.realpath(session_file) if session_file else None,
        entry=entry,
        operation=operation,
        agent_dir=str(ctx.agent_dir()),
    )

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread: leave signals alone
            previous[sig] = signal.signal(sig, interrupt)
    try:
        with restore_intent(intent):
            yield
    except SessionAppendError as exc:
        from ledger.recovery import settle_journals

        if settle_journals(engine.repo):  # files changed, no record: the journal keeps the way back
            exc.hint = (
                f"the files changed but the record was not written; once that is fixed, "
                f"'rewind undo {intent.session}' brings back the files as they were ('rewind doctor' shows it)"
            )
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def wait_for_running(ctx: CliContext, engine: Engine) -> None:
    """A restore of this work tree running in another process (or thread) is waited for, with a
    warning naming its pid, so that this command plans and acts on its finished state (and its
    record); bounded: :class:`~ledger.errors.RestoreRunningError` after
    :data:`~ledger.recovery.RUNNING_WAIT_S`. Never called an interruption: it is not one."""
    from ledger.recovery import wait_for_running as wait

    def notify(message: str) -> None:
        if ctx.served:  # run by the watcher: the client waits instead, visibly and cancellably
            from ledger.cli.context import RunLocally

            raise RunLocally("would wait")
        ctx.warn(message)

    wait(engine.repo, notify=notify)


def check_interrupted(ctx: CliContext, engine: Engine, *, refuse: bool, wait: bool = True) -> None:
    """A running restore is waited for (``wait``: commands that restore or plan a restore); then
    an interrupted restore of this work tree refuses a new restore (``refuse``); journals of
    recorded restores are closed on the way."""
    from ledger.recovery import interruption_error, settle_journals

    if wait:
        wait_for_running(ctx, engine)
    left = settle_journals(engine.repo)
    if left and refuse:  # otherwise the engine's session start has warned already
        raise interruption_error(left[-1])


def resolve_entry_name(engine: Engine, name: str) -> str:
    """ENTRY, ``@`` included, as every command reads it (:func:`ledger.cli.review.resolve_entry_name`)."""
    from ledger.cli.review import resolve_entry_name as resolve

    return resolve(engine.session(), name)


def confirm(ctx: CliContext, args: argparse.Namespace, action: str, plan_text: str) -> None:
    if getattr(args, "yes", False):
        return
    # Run by the watcher (ctx.served), the terminals are not the user's: its client asked only
    # because it would not ask (ledger/cli/served.py), so this is the answer it would get.
    if ctx.served or not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise ConfirmationRequired(action)
    ctx.stderr.write(plan_text.rstrip("\n") + "\n")
    ctx.stderr.write(f"{action}? [y/N] ")
    ctx.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise Declined()


def plan_lines(report: Changes) -> list[str]:
    """``  A path`` lines; a name that is not printable UTF-8 as git quotes it (issue 32)."""
    from ledger.quoting import display_name as shown

    lines = (
        [f"  A {shown(p)}" for p in report.added]
        + [f"  M {shown(p)}" for p in report.modified]
        + [f"  D {shown(p)}" for p in report.deleted]
    )
    return lines or ["  (no file changes)"]


def _summary(report: Changes) -> str:
    return plan_counts(report.added, report.modified, report.deleted)


def _short(sha: str | None) -> str:
    """A snapshot's 12-digit abbreviation (a report of file changes always names one)."""
    return sha[:12] if sha else "(none)"


def _warn_all(ctx: CliContext, warnings: list[str]) -> None:
    for warning in warnings:
        ctx.warn(warning)


# --- commands -------------------------------------------------------------------------------


def run_restore(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.engine import operations

    engine = open_engine(ctx, args.session)
    entry = resolve_entry_name(engine, args.entry)
    check_interrupted(ctx, engine, refuse=not args.dry_run and args.mode != "conversation")
    if args.yes and not args.dry_run:  # no plan to show: skip the extra capture
        with restoring(ctx, engine, "restore", entry):
            report = operations.restore(engine, entry, args.mode)
        _warn_all(ctx, report.warnings)
        ctx.emit(report.to_json(), lambda: _restore_text(report, args.session))
        return 0
    plan = operations.restore(engine, entry, args.mode, dry_run=True)
    if args.dry_run:
        _warn_all(ctx, plan.warnings)
        ctx.emit(
            plan.to_json(),
            lambda: "\n".join(
                [
                    f"restore {args.mode} to entry {entry}"
                    + (f" (snapshot {plan.target[:12]})" if plan.target else "")
                    + f": would change {_summary(plan)}"
                    + (
                        f"; the conversation would continue from {plan.position or 'a new root'}"
                        if args.mode != "files"
                        else ""
                    ),
                    *plan_lines(plan),
                    *plan_outside_lines(plan, args.session),
                ]
            ),
        )
        return 0
    confirm(
        ctx,
        args,
        f"Restore {args.mode} to entry {entry}",
        "\n".join(
            [
                f"Restore plan ({_summary(plan)}):",
                *plan_lines(plan),
                *plan_outside_lines(plan, args.session),
            ]
        ),
    )
    with restoring(ctx, engine, "restore", entry):
        # The plan shown is the plan run: one scan for the command (the restore re-checks the
        # paths it touches under its lock, docs/capture.md#one-scan-per-restore).
        report = operations.restore(engine, entry, args.mode, planned=plan)
    _warn_all(ctx, report.warnings)
    ctx.emit(report.to_json(), lambda: _restore_text(report, args.session))
    return 0


def _restore_text(report: RestoreReport, session_name: str) -> str:
    lines = []
    if report.mode in ("both", "files"):
        if report.changed:
            lines.append(
                f"restored the files of entry {report.entry} (snapshot {_short(report.target)}): {_summary(report)}"
            )
            lines.extend(plan_lines(report))
            lines.extend(plan_outside_lines(report, session_name, done=True))
        else:
            lines.append(
                f"files already equal entry {report.entry}'s snapshot {_short(report.target)}: nothing changed"
            )
    if report.mode in ("both", "conversation"):
        where = f"entry {report.position}" if report.position else "a new root"
        lines.append(f"conversation now continues from {where} (leaf: record {report.record})")
    if report.undo:
        lines.append(f"undo with: rewind undo {session_name}")
    return "\n".join(lines)


def run_undo(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.engine import operations

    engine = open_engine(ctx, args.session)
    # A restore still running is not interrupted: wait for it and its record, then undo what is
    # the last file rewind by then (that restore, when it is this session's).
    wait_for_running(ctx, engine)
    if args.to is not None:
        return _run_undo_to(args, ctx, engine)
    # The engine decides, as for the menus: an interrupted restore of this session first.
    plan = operations.undo(engine, dry_run=True)
    journal = plan.interrupted
    if journal is not None:
        ctx.warn(
            f"the restore to {journal.target[:12]} started {journal.started} was interrupted; "
            f"undo brings every file back as it was before it (snapshot {journal.undo[:12]})"
        )
    if args.dry_run:
        ctx.emit(
            plan.to_json(),
            lambda: "\n".join(
                [
                    f"undo would change {_summary(plan)}",
                    *plan_lines(plan),
                    *plan_outside_lines(plan, args.session),
                ]
            ),
        )
        return 0
    confirm(
        ctx,
        args,
        "Undo the interrupted restore" if journal is not None else "Undo the last file rewind",
        "\n".join(
            [
                f"Undo plan ({_summary(plan)}):",
                *plan_lines(plan),
                *plan_outside_lines(plan, args.session),
            ]
        ),
    )
    with restoring(ctx, engine, "undo" if journal is None else "recover"):
        report = operations.undo(engine, planned=plan)  # the plan is computed once
    ctx.emit(report.to_json(), lambda: _undo_text(report, args.session))
    return 0


def _undo_text(report: RestoreReport, session_name: str) -> str:
    journal = report.interrupted
    if journal is not None:
        head = f"undid the interrupted restore (files now at {_short(report.target)})"
        again = f"undo again to return to {journal.target[:12]}"
    else:
        head = f"undid the last file rewind (files now at {_short(report.target)})"
        again = "undo again to swap back"
    return "\n".join(
        [
            f"{head}: {_summary(report)}",
            *plan_lines(report),
            *plan_outside_lines(report, session_name, done=True),
            again,
        ]
    )


def _run_undo_to(args: argparse.Namespace, ctx: CliContext, engine: Engine) -> int:
    """``rewind undo SESSION --to OP``: the files as they were just before operation OP
    (:func:`ledger.engine.history.undo_to`), with the plan, confirmation and dry run of undo."""
    from ledger.engine.history import undo_to

    op, plan = undo_to(engine, args.to, dry_run=True)
    where = f"before operation {op.record} ({op.kind}, snapshot {_short(plan.target)})"
    if args.dry_run:
        _warn_all(ctx, plan.warnings)
        ctx.emit(
            {**plan.to_json(), "operation": op.record},
            lambda: "\n".join(
                [
                    f"undo to {where} would change {_summary(plan)}",
                    *plan_lines(plan),
                    *plan_outside_lines(plan, args.session),
                ]
            ),
        )
        return 0
    confirm(
        ctx,
        args,
        f"Restore the files as they were before operation {op.record}",
        "\n".join(
            [
                f"Undo plan ({_summary(plan)}):",
                *plan_lines(plan),
                *plan_outside_lines(plan, args.session),
            ]
        ),
    )
    with restoring(ctx, engine, "undo", op.parent):
        op, report = undo_to(engine, op.record, planned=plan)  # one scan, re-checked
    _warn_all(ctx, report.warnings)
    ctx.emit(
        {**report.to_json(), "operation": op.record},
        lambda: "\n".join(
            [
                f"files now as they were {where}: {_summary(report)}",
                *plan_lines(report),
                *plan_outside_lines(report, args.session, done=True),
                f"undo with: rewind undo {args.session}" if report.undo else "nothing changed",
            ]
        ),
    )
    return 0


def _authors_namespace(authors: Authors) -> SimpleNamespace:
    """A plan's :class:`~ledger.engine.changes_since.Authors` shaped as a report for
    :func:`plan_outside_lines`."""
    return SimpleNamespace(outside=authors.own, others=authors.others)


def run_fork(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.engine import operations
    from ledger.engine.changes_since import plan_authors

    engine = open_engine(ctx, args.session)
    entry = resolve_entry_name(engine, args.entry)
    check_interrupted(ctx, engine, refuse=args.mode != "conversation")
    if args.mode != "conversation":
        target = engine.resolve_point(entry)
        if target is not None:
            plan = operations.plan_for(engine, target)
            if not plan.noop:
                confirm(
                    ctx,
                    args,
                    f"Fork at {entry} and restore its files",
                    "\n".join(
                        [
                            f"Restore plan ({_summary(plan)}):",
                            *plan_lines(plan),
                            *plan_outside_lines(
                                _authors_namespace(plan_authors(engine, plan)), args.session
                            ),
                        ]
                    ),
                )
    with restoring(ctx, engine, "fork", entry):
        report = operations.fork(engine, entry, args.mode)
    _warn_all(ctx, report.warnings)
    ctx.emit(
        report.to_json(),
        lambda: "\n".join(
            (
                [
                    f"restored the files of entry {entry}: {_summary(report.restore)}",
                    *plan_lines(report.restore),
                    *plan_outside_lines(report.restore, args.session, done=True),
                ]
                if report.restore
                else []
            )
            + [f"forked session: {report.child}"]
        ),
    )
    return 0


def run_checkpoint(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.engine import operations

    engine = open_engine(ctx, args.session)
    # `@` is the default here (binding the snapshot of now to the latest prompt's user entry
    # would replace the point before that prompt).
    entry = resolve_entry_name(engine, args.entry) if args.entry not in (None, "@") else None
    check_interrupted(ctx, engine, refuse=False, wait=False)  # its capture takes the lock anyway
    report = operations.checkpoint(engine, entry)
    ctx.emit(
        report.to_json(),
        f"bound snapshot {report.commit} to entry {report.entry} (record {report.record})",
    )
    return 0


def run_diff(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.engine import operations

    engine = open_engine(ctx, args.session)
    from ledger.cli.review import diff_list_lines, relative_to

    entry = resolve_entry_name(engine, args.entry)
    relative = relative_to(ctx, engine.repo) if args.patch and not ctx.json else None
    report = operations.diff(engine, entry, patch=args.patch, relative=relative)
    if report.patch is not None and not ctx.json:
        if report.patch:  # git diff prints nothing when nothing differs
            ctx.emit(None, report.patch)
        return 0
    ctx.emit(
        report.to_json(),
        lambda: "\n".join(
            [
                f"restoring entry {entry} (snapshot {_short(report.target)}) would change {_summary(report)}",
                *diff_list_lines(engine.repo, report.added, report.modified, report.deleted),
            ]
        ),
    )
    return 0
