"""``rewind serve --stdio``: run the engine behind the bridge protocol for a running agent.

Why it exists: Pi's extension starts this process once per session and talks to it over
stdin/stdout (README, "Running inside Pi"; ``schemas/bridge.schema.json``). Thin: the work is
:class:`ledger.bridge.server.BridgeServer`.

This process lives as long as the session, so it also runs the change feed
(:mod:`ledger.git.feed`): captures then touch only the paths changed since the previous one. The
watcher of the repository holding the cwd starts in the background right away, off the first
prompt's path. ``REWIND_FEED=0`` turns the feed off (every capture scans fully);
``REWIND_FEED_VERIFY=0`` skips the idle-time verification against full scans.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ledger.cli.context import CliContext


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser(
        "serve",
        parents=[common],
        help="serve the engine to a running agent over stdin/stdout (Pi's extension)",
        description="Run the rewind engine for one agent session, speaking one JSON object per line "
        "on stdin/stdout: the host sends events, the engine answers with results and, "
        "while it works, calls the host (session facts, appendEntry, select). "
        "See schemas/bridge.schema.json.",
    )
    parser.add_argument(
        "--stdio",
        action="store_true",
        required=True,
        help="speak the protocol on stdin/stdout (the only transport)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    import gc

    from ledger.bridge.server import serve_stdio

    gc.enable()  # main() pauses the collector for short commands; this process lives long

    use_feed = os.environ.get("REWIND_FEED", "1") != "0"
    if use_feed:
        from ledger.git import feed

        feed.enable(verify=os.environ.get("REWIND_FEED_VERIFY", "1") != "0")
        feed.start_for(ctx.path(ctx.repo_option) if ctx.repo_option else ctx.cwd)
    option = ctx.agent_dir_option
    try:
        return serve_stdio(Path(option) if option else None)
    finally:
        if use_feed:
            feed.disable()
