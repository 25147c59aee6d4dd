"""``rewind status SESSION``: what changed in the work tree since the latest rewind point.

Why it exists: like ``git status`` against the session's last recorded file state, so that a user
sees what a restore would overwrite that the agent did not write (docs/design.md#outside-changes).
It also words the outside-changes lines of the restore plans (``rewind restore/undo/fork``).

Invariants: read-only. It captures the work tree with the same private capture a snapshot uses
(:func:`ledger.git.capture.scan.capture_tree`: the private index under ``.git/pi-rewind/`` and git
objects), but makes no commit, appends nothing to ``refs/pi-rewind/store``, leaves the
latest-snapshot record alone and writes no record to the session; the user's index, HEAD and
branches are never touched. Exit status 0 whether or not something changed. A path that is not
UTF-8 or holds a control character is printed as git quotes it; ``--json`` carries it quoted
with its exact bytes beside it (``pathBytes``, see :mod:`ledger.cli.context`).

It also lists who else is here (docs/design.md#sessions-here): the live Pi sessions of the work
tree from the presence registry (:mod:`ledger.presence`; listing it removes entries of dead
sessions, our own bookkeeping files only) and the restores running now (open restore journals
whose owner is alive; read without settling them).
"""

from __future__ import annotations

import argparse
from typing import Any

from ledger.cli.context import CliContext, display_path
from ledger.outside_rules import OutsideChange, count_text, files

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.git.restore.journal import Journal
    from ledger.presence import Presence

SESSION_HELP = "a .jsonl path, a unique session id prefix, or @ (newest)"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "status",
        parents=[common],
        help="what changed in the work tree since the latest rewind point",
        description="List the paths that differ between the work tree and the session's latest "
        "rewind point on its branch (the files as the agent's last turn, or the last restore, "
        "left them): A added, M modified, D deleted, X executable bit, L symlink. Read-only.",
    )
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.set_defaults(run=run_status)


def run_status(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.cli.sessions import open_engine
    from ledger.engine.changes_since import changed_since, latest_point
    from ledger.git.capture.scan import capture_tree

    engine = open_engine(ctx, args.session)
    session = engine.session()
    point = latest_point(engine)
    changes: tuple[OutsideChange, ...] = ()
    if point is not None:
        captured = capture_tree(engine.repo, engine.settings.snapshot)
        report = changed_since(
            engine, captured.tree, skipped=[s.path for s in captured.skipped], point=point
        )
        changes = report.changes
    live, restores = _here(engine.repo)
    payload: dict[str, Any] = {
        "session": session.id,
        "liveSessions": [entry.to_json() for entry in live],
        "runningRestores": [journal.to_json() for journal in restores],
        "point": point.to_json() if point is not None else None,
        "clean": not changes,
        "changes": [c.to_json() for c in changes],
    }

    def text() -> str:
        return "\n".join([changes_text(), *here_lines(live, restores, session.id)])

    def changes_text() -> str:
        if point is None:
            return "no rewind point on this branch yet: nothing to compare with"
        when = f" ({point.timestamp})" if point.timestamp else ""
        lines = [
            f"latest rewind point: entry {point.entry or '?'}{when}, snapshot {point.commit[:12]}"
        ]
        if not changes:
            lines.append("nothing changed since then")
            return "\n".join(lines)
        lines.append(f"changed since then: {files(len(changes))} ({count_text(changes)})")
        lines.extend(status_line(c) for c in changes)
        return "\n".join(lines)

    ctx.emit(payload, text)
    return 0


def _here(repo: Any) -> tuple[list[Presence], list[Journal]]:
    # Nested plain directories share files: their sessions and restores are here too
    # (docs/shadow.md#nested-directories).
    from ledger.work_tree_scope import live_sessions_here, running_restores_here

    return live_sessions_here(repo.git_dir), running_restores_here(repo)


def here_lines(live: list[Presence], restores: list[Journal], session_id: str) -> list[str]:
    """``sessions here``: the live Pi sessions of this work tree and the running restores."""
    from ledger.presence import status_line as presence_line
    from ledger.recovery import running_message

    if not live and not restores:
        return []
    lines = [f"sessions here: {len(live)} live Pi session{'s' if len(live) != 1 else ''}"]
    lines += [presence_line(e, own=e.session_id == session_id) for e in live]
    lines += [f"  {running_message(j)}" for j in restores]
    if len(live) > 1:
        lines.append("  a restore in one overwrites what the other's agent writes")
    return lines


def status_line(change: OutsideChange) -> str:
    detail = f" ({change.detail})" if change.detail else ""
    return f"  {change.letter} {display_path(change.path)}{detail}"
