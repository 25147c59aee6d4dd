"""``rewind export`` and ``rewind import``: a session and its rewind points, as one file or via a remote.

Why it exists: formatting only. The archive format, the checks and the writes live in
:mod:`ledger.portable`; this module resolves names and prints what was done.

Invariants: an import that is refused has written nothing and exits 1 with ``error:``/``hint:``;
usage errors (neither ``-o`` nor ``--remote``, or both) exit 2.
"""

from __future__ import annotations

import argparse

from ledger.cli.context import CliContext

SESSION_HELP = "a .jsonl path, a unique session id prefix, or @ (newest)"


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "export",
        parents=[common],
        help="write a session with its rewind points to one file",
        description="Write one archive holding the session file, its ancestors through "
        "parentSession, a git bundle of every snapshot their ledgers reference and a "
        "manifest; or, with --remote, push the same to refs/pi-rewind/sessions/<id>.",
    )
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("-o", "--output", metavar="FILE", help="the archive to write")
    target.add_argument("--remote", metavar="NAME", help="push to this git remote instead")
    p.set_defaults(run=run_export)

    p = sub.add_parser(
        "import",
        parents=[common],
        help="import a session archive (or a remote's session)",
        description="Check an archive made by 'rewind export', fetch its snapshots into this "
        "repository's refs/pi-rewind/store and write its session files into the agent "
        "dir under this repository's directory. With --remote NAME, ARCHIVE is a "
        "session id (prefix) shared on that remote.",
    )
    p.add_argument(
        "archive", metavar="ARCHIVE", help="the archive file, or with --remote the session id"
    )
    p.add_argument(
        "--remote",
        metavar="NAME",
        help="import refs/pi-rewind/sessions/<ARCHIVE…> from this remote",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="import even when the archive's repository shares no history with this one",
    )
    p.set_defaults(run=run_import)


def run_export(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.cli.sessions import session_repo
    from ledger.portable import export_archive, export_remote

    path, repo = session_repo(ctx, args.session)
    if args.remote:
        report = export_remote(repo, path, args.remote)
    else:
        output = ctx.path(args.output)
        if output.is_dir():
            from ledger.errors import LedgerError

            raise LedgerError(
                f"{output} is a directory", hint="pass a file name such as session.rewind.tgz"
            )
        report = export_archive(repo, path, output)
    for warning in report.warnings:
        ctx.warn(warning)
    ctx.emit(
        report.to_json(),
        f"exported session {report.session_id}: {report.sessions} session file(s), "
        f"{report.snapshots} snapshot(s) to {report.output}"
        + (f" ({report.bytes} bytes)" if report.bytes else ""),
    )
    return 0


def run_import(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.portable import import_archive, import_remote

    repo = ctx.repo(create=True)
    agent_dir = ctx.agent_dir()
    if args.remote:
        report = import_remote(repo, agent_dir, args.remote, args.archive, force=args.force)
    else:
        report = import_archive(repo, agent_dir, ctx.path(args.archive), force=args.force)
    for warning in report.warnings:
        ctx.warn(warning)

    def text() -> str:
        if report.noop:
            return f"session {report.session_id} is already imported: nothing to do ({report.session_file})"
        lines = [
            f"imported session {report.session_id} into {repo.root}",
            f"  snapshots: {report.snapshots} ({report.appended} appended to refs/pi-rewind/store)",
        ]
        lines += [f"  wrote {path}" for path in report.written]
        lines += [f"  unchanged {path}" for path in report.unchanged]
        lines.append(f"resume it with: rewind tree {report.session_file}")
        return "\n".join(lines)

    ctx.emit(report.to_json(), text)
    return 0
