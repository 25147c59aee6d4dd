"""``rewind sessions``, ``rewind log`` and ``rewind tree``: the read-only commands.

Why it exists: formatting only. The answers come from :mod:`ledger.session_views`; this module turns
them into grep-able text lines or JSON (one object per line where a command lists things).
``rewind log --patch|--stat|--numstat|--name-status`` (every prompt and turn with its diff) is
formatted by :mod:`ledger.cli.review`, which owns the diff options, pager and colour rules.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ledger.cli.context import CliContext
from ledger.cli.sessions import resolve_session_path


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "sessions",
        parents=[common],
        help="list the repository's sessions, newest first",
        description="List the sessions whose cwd lies inside the repository, newest first.",
    )
    p.set_defaults(run=run_sessions)

    p = sub.add_parser(
        "log",
        parents=[common],
        help="the ledger: one line per snapshot reference",
        description="Print the session's rewind ledger, one grep-able line per reference: "
        "entry, kind, snapshot, record, entry type or role, text.",
    )
    p.add_argument(
        "session",
        metavar="SESSION",
        nargs="?",
        default="@",
        help="a .jsonl path, a unique session id prefix, or @ (newest; the default)",
    )
    p.add_argument(
        "--lineage",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also list the references of the ancestor sessions; with a detail option, find "
        "points through the forks (the default there: --no-lineage uses the session's own)",
    )
    _add_log_detail_options(p)
    p.set_defaults(run=run_log)

    p = sub.add_parser(
        "tree",
        parents=[common],
        help="draw the session tree with its rewind points",
        description="Draw the session tree: one line per entry, with the leaf, labels and "
        "the entries that have an exact rewind point (through lineage).",
    )
    p.add_argument(
        "session",
        metavar="SESSION",
        nargs="?",
        default="@",
        help="a .jsonl path, a unique session id prefix, or @ (newest; the default)",
    )
    p.set_defaults(run=run_tree)


def _add_log_detail_options(p: argparse.ArgumentParser) -> None:
    from ledger.cli.review import add_diff_options

    add_diff_options(p, default=None, log=True)


def run_sessions(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.lineage import LineageReader
    from ledger.session.discovery import repo_sessions
    from ledger.session_views import summarize_sessions

    repo = ctx.repo()
    skipped: list[tuple[Path, str]] = []
    infos = repo_sessions(ctx.agent_dir(), repo.root, skipped=skipped)
    for path, reason in skipped:  # a hostile or broken file in Pi's sessions folder
        ctx.warn(f"skipped {path}: {reason}")
    rows, warnings = summarize_sessions(infos, LineageReader())
    for warning in warnings:
        ctx.warn(warning)
    if not rows and not ctx.json:
        ctx.emit(None, f"no sessions for {repo.root} in {ctx.agent_dir() / 'sessions'}")
        return 0
    for row in rows:
        payload = {
            "id": row.id,
            "file": str(row.file),
            "entries": row.entries,
            "points": row.bound_entries,
            "parentSession": row.parent_session,
        }
        parent = f"  parent={row.parent_session}" if row.parent_session else ""
        ctx.emit_line(
            payload,
            f"{row.id}  entries={row.entries}  points={row.bound_entries}  {row.file}{parent}",
        )
    return 0


def run_log(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.lineage import LineageReader
    from ledger.session_names import id_tail
    from ledger.session_views import ledger_log

    path = resolve_session_path(ctx, args.session)
    if args.detail is not None:
        from ledger.cli.review import run_log_detail

        return run_log_detail(args, ctx, path)
    report = ledger_log(path, LineageReader(), lineage=bool(args.lineage))
    for warning in report.warnings:
        ctx.warn(warning)
    for row in report.rows:
        # The id's random tail: forks made seconds apart share a UUIDv7's time-ordered prefix.
        prefix = f"{id_tail(row.session)}  " if args.lineage else ""
        text = f"{prefix}{row.entry_id or '-'}  {row.kind:<12}  {row.snapshot}  {row.record}  {row.role or '-':<10}  {row.text or ''}"
        ctx.emit_line(row.to_json(), text.rstrip())
    return 0


def run_tree(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.lineage import LineageReader
    from ledger.session.store import read_header
    from ledger.session_views import session_tree

    path = resolve_session_path(ctx, args.session)
    header = read_header(path)
    cwd = header.get("cwd")
    near = Path(cwd) if isinstance(cwd, str) and Path(cwd).is_dir() else None
    repo = ctx.try_repo(near=near)
    if repo is None:
        ctx.warn(
            "not in a git repository: rewind points are shown without checking that their commits exist"
        )
    report = session_tree(path, LineageReader(), repo.commit_exists if repo is not None else None)
    for warning in report.warnings:
        ctx.warn(warning)
    if ctx.json:
        for row in report.rows:
            ctx.emit_line(row.to_json(), "")
    else:
        ctx.emit(None, "\n".join(report.lines) if report.lines else "(empty session)")
    return 0
