"""What most commands start from: a session named on the command line, its repository, its
engine, and the words a restore plan adds about whose files it overwrites.

Why it exists: ``status``, ``restore``/``undo``/``fork``, the review commands, ``export`` and
``doctor`` all turn a SESSION argument into a file, a repository and (for the ones that may
restore) an engine. Kept here, below every command module, so that no command module imports
another (no import circles in ``ledger/cli``).

Invariants: reads only (a session file's header, the repository discovery); the engine it opens
runs ``session_start`` like a Pi session would, which writes nothing; restores opened here wait
for other sessions' turns on the command line (docs/design.md#never-mid-turn).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ledger.cli.context import CliContext
from ledger.errors import LedgerError
from ledger.outside_rules import OutsideChange, done_warning, others_warning, plan_warning

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.engine.engine import Engine
    from ledger.git.repo import GitRepo
    from ledger.turngate import TurnPolicy


def resolve_session_path(ctx: CliContext, name: str) -> Path:
    """SESSION → a file path. Paths need no repository; ids and ``@`` search the repo's sessions."""
    from ledger.session.discovery import looks_like_path, repo_sessions, resolve_session

    if looks_like_path(name):
        return ctx.path(name)
    repo = ctx.repo()
    agent_dir = ctx.agent_dir()
    candidates = repo_sessions(agent_dir, repo.root)
    return resolve_session(
        name,
        candidates,
        scope=f"the sessions of {repo.root} (agent dir {agent_dir})",
        cwd=ctx.cwd,
    )


def session_repo(ctx: CliContext, session_name: str) -> tuple[Path, GitRepo]:
    """SESSION → its file and the repository of its cwd (for read-only commands)."""
    from ledger.session.store import read_header

    path = resolve_session_path(ctx, session_name)
    cwd = read_header(path).get("cwd")
    near = Path(cwd) if isinstance(cwd, str) and Path(cwd).is_dir() else None
    return path, ctx.repo(near=near)


def open_engine(ctx: CliContext, session_name: str) -> Engine:
    """The engine on a session file, in the repository of the session's cwd."""
    from ledger.engine.engine import Engine
    from ledger.engine.host import FileHost
    from ledger.settings import load_settings

    path = resolve_session_path(ctx, session_name)
    agent_dir = ctx.agent_dir()
    host = FileHost(path, agent_dir / "sessions")
    session = host.session()
    cwd = Path(session.cwd) if session.cwd else None
    repo = ctx.repo(near=cwd if cwd is not None and cwd.is_dir() else None, create=True)
    if session.cwd is not None and not repo.contains(session.cwd):
        raise LedgerError(
            f"session {session.id} belongs to {session.cwd}, not to the repository {repo.root}",
            hint="run the command inside that repository or pass --repo",
        )
    settings, warnings = load_settings(agent_dir, repo.root)
    for warning in warnings:
        ctx.warn(warning)
    served = _served_captures(repo)
    if not served and ctx.own_process and settings.snapshot.auto_watch_seconds:
        # Nobody serves this repository: start a watcher in the background (never waited for)
        # so that the next commands are run by it (rewind.snapshot.autoWatchSeconds). Only from
        # a real `rewind` process: a program calling main() (the demo) starts no process.
        from ledger.cli.snapshot import start_watching

        start_watching(ctx, repo, settings.snapshot.auto_watch_seconds)
    engine = Engine(host, repo, settings=settings)
    if ctx.served:  # run by the watcher: its loaded authorship index, tailed, not read again
        engine.authorship.share_loaded()
    engine.turns = _turn_policy(ctx, engine)
    for notice in engine.session_start("startup").notices:
        ctx.warn(notice.text)
    return engine


def _served_captures(repo: GitRepo) -> bool:
    """A running watcher of ``repo`` (``rewind serve --watch``, or the one a Pi session started)
    captures for this command in O(changed) (docs/capture.md#served-commands): whether one
    does. A shadow repository has no watcher (``True``: none is to be started either)."""
    from ledger.git.shadow.layout import ShadowRepo

    if isinstance(repo, ShadowRepo):
        return True
    from ledger.bridge.delegate import for_command

    return for_command(repo.root, repo.git_dir) is not None


def _turn_policy(ctx: CliContext, engine: Engine) -> TurnPolicy:
    """On the command line a restore waits for other sessions' turns, visibly and cancellably
    (Ctrl-C: nothing changed), up to ``$REWIND_TURN_WAIT`` seconds (default
    :data:`~ledger.turngate.TURN_WAIT_S`; docs/design.md#never-mid-turn)."""
    from ledger.turngate import TURN_WAIT_S, TurnPolicy

    try:
        wait_s = float(os.environ.get("REWIND_TURN_WAIT", TURN_WAIT_S))
    except ValueError:
        wait_s = TURN_WAIT_S

    def notify(timeout_s: float, who: str) -> None:
        # ``who``: a turn of session … (nested directories included), or another restore.
        if ctx.served:  # before any change: the client waits in its own process, cancellably
            from ledger.cli.context import RunLocally

            raise RunLocally("would wait")
        ctx.warn(
            f"{who} is running in this work tree; waiting for it to end before writing files "
            f"(up to {timeout_s:.0f} s; Ctrl-C cancels, nothing is changed then)"
        )

    return TurnPolicy(wait_s=max(0.0, wait_s), notify=notify)


def plan_outside_lines(report: Any, session_name: str, *, done: bool = False) -> list[str]:
    """The plan's (or, ``done``, the result's) lines about files another session's agent wrote
    (one per session) and files changed outside any agent that the restore overwrites; empty
    when there are none."""
    changes: Sequence[OutsideChange] = getattr(report, "outside", ())
    undo = f"'rewind undo {session_name}'"
    lines = [
        others_warning(group.neighbour.label, group.paths, undo=undo, done=done)
        for group in getattr(report, "others", ())
    ]
    line = (done_warning if done else plan_warning)(changes, undo=undo)
    return [*lines, line] if line else lines


__all__ = ["open_engine", "plan_outside_lines", "resolve_session_path", "session_repo"]
