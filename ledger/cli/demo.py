"""``rewind demo``: the main job on an embedded default, narrated.

Why it exists: one command that shows a new user what rewind does, on a throwaway repository and
session: three prompts, the tree, a diff, a restore to an earlier prompt, its undo, a fork with
"Code only", and the ledger. Each step runs the real command and prints its output.

Invariants: works in a temporary directory that is removed at the end unless ``--keep DIR``;
exits 0 only when every step succeeded.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
from pathlib import Path

from ledger.cli.context import CliContext


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "demo",
        parents=[common],
        help="a narrated tour on a throwaway repository",
        description="Create a throwaway repository and Pi session, run three scripted prompts "
        "through the engine, then show tree, diff, restore, undo, fork and log.",
    )
    p.add_argument(
        "--keep", metavar="DIR", help="build the demo in DIR (must not exist) and keep it"
    )
    p.set_defaults(run=run_demo)


def _run(ctx: CliContext, world: object, *args: str) -> str:
    from ledger.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = ["--repo", str(world.repo), "--agent-dir", str(world.agent_dir), *args]  # type: ignore[attr-defined]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    if code != 0:
        raise DemoStepFailed(f"rewind {' '.join(args)} exited {code}: {err.getvalue().strip()}")
    return out.getvalue()


class DemoStepFailed(Exception):
    pass


def run_demo(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.demo import build_world, remove_world, run_prompts
    from ledger.errors import LedgerError

    if args.keep:
        root = ctx.path(args.keep).resolve()
        if root.exists():
            raise LedgerError(
                f"{root} already exists", hint="--keep needs a directory that does not exist yet"
            )
        cleanup = False
    else:
        root = Path(tempfile.mkdtemp(prefix="rewind-demo-"))
        cleanup = True
    say = (lambda text: ctx.stdout.write(text + "\n")) if not ctx.json else (lambda text: None)
    steps: list[dict[str, str]] = []

    def show(title: str, *command: str) -> str:
        output = _run(ctx, world, *command)
        say(f"\n$ rewind {' '.join(command)}")
        say(output.rstrip("\n"))
        steps.append({"step": title, "command": "rewind " + " ".join(command), "output": output})
        return output

    try:
        world = build_world(root)
        say(f"A throwaway repository at {world.repo} and a Pi-format session for it.")
        say(
            "Three scripted prompts run through the engine: each takes a snapshot before the prompt and after"
        )
        say("each assistant turn, and records them in the session file as a rewind-turn entry.")
        run_prompts(world)
        session = str(world.session)
        say("\nThe conversation tree; ◆ marks entries with an exact rewind point:")
        show("tree", "tree", session)
        target = world.users[1]
        say(f"\nWhat would restoring the files to before prompt 2 (entry {target}) change?")
        show("diff", "diff", session, target)
        say(
            "\nRestore files and conversation to before prompt 2 (the untracked scratch file goes, the ignored"
        )
        say(
            "build/ directory stays, and a snapshot of the current files is taken first so this can be undone):"
        )
        show("restore", "restore", session, target, "--mode", "both", "--yes")
        say("\nUndo that restore: the files come back exactly as they were.")
        show("undo", "undo", session, "--yes")
        say(
            f'\nFork the session before prompt 3 with "Code only": files go back to before prompt 3 '
            f"(entry {world.users[2]}), and a child session is written:"
        )
        show("fork", "fork", session, world.users[2], "--mode", "code", "--yes")
        say("\nThe ledger: every snapshot reference, grep-able:")
        show("log", "log", session)
        if ctx.json:
            ctx.emit({"root": str(root), "kept": not cleanup, "steps": steps}, "")
        elif not cleanup:
            say(f"\nKept everything in {root}.")
        return 0
    except DemoStepFailed as exc:
        raise LedgerError(
            f"demo failed: {exc}", hint="run again with REWIND_DEBUG=1, or --keep DIR to inspect"
        ) from exc
    finally:
        if cleanup:
            remove_world(root)
