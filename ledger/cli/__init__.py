"""The ``rewind`` command line: ask the repository's watcher to run the command, else run it here.

Why it exists: the ``rewind`` script imports this package before anything else, and most of a
served command's time is the client process's own start (issue 34: ``rewind restore`` with a
watcher running costs ≤ 0.05 of the reference's restore). So this package imports nothing at
all until :func:`main` has asked the watcher (:mod:`ledger.cli.served`, standard library only);
the parser, ``argparse`` and the command modules (:mod:`ledger.cli.app`) load only when the
command runs in this process, or when a program calling ``main`` asks for them.

Invariants:
- Every name of :mod:`ledger.cli.app` is reachable here as before (``from ledger.cli import
  COMMANDS, build_parser, run_served_command …``): loaded on first use (PEP 562).
- ``rewind serve --stdio`` (Pi's spawned bridge) never asks a watcher: it serves no ``serve``.
- A cold ``restore``/``undo`` with ``--yes`` starts its capture's ``git status`` next, before the
  command's code loads (:mod:`ledger.git.capture.prefetch`), and stops it however the command
  ends.
"""

from __future__ import annotations

import sys

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import NoReturn

    from ledger.cli.app import (
        COMMAND_MODULES,
        COMMANDS,
        EXIT_FAILED,
        EXIT_OK,
        EXIT_USAGE,
        SERVE_STDIO,
        UsageError,
        build_parser,
        package_version,
        run_served_command,
    )

_SERVE_STDIO_WORDS = ("serve", "--stdio")
""":data:`ledger.cli.app.SERVE_STDIO`, spelled out so that this check imports nothing (a unit
test holds them equal)."""


def main(argv: Sequence[str] | None = None, *, cwd: Path | None = None) -> int:
    """Run one command; ``cwd`` (default: the process's) is where relative paths start."""
    if argv is None and cwd is None and tuple(sys.argv[1:]) != _SERVE_STDIO_WORDS:
        # A real ``rewind`` process: the repository's watcher may run the command instead
        # (restore, undo, diff, status; docs/capture.md#served-commands). Standard library only
        # until it declines.
        from ledger.cli.served import run_by_watcher

        served = run_by_watcher(sys.argv[1:])
        if served is not None:
            _exit_now(served)
    prefetching = False
    if argv is None and cwd is None:
        try:
            prefetching = _start_status_prefetch(sys.argv[1:])
        except Exception:  # an optimization only (e.g. a git directory it may not stat)
            prefetching = False
    try:
        from ledger.cli.app import main_here

        code = main_here(argv, cwd=cwd)
    except KeyboardInterrupt:
        if not prefetching:
            raise
        # SIGTERM/SIGHUP while the prefetch ran, before the command could catch it itself.
        sys.stderr.write("error: interrupted\n")
        code = 130
    finally:
        if prefetching:
            from ledger.git.capture import prefetch

            prefetch.stop()
    if argv is None:
        _flush_or_drop_stdout()
    return code


PREFETCH_ENV = "REWIND_STATUS_PREFETCH"
"""``0`` turns the status prefetch off (benchmarks compare both)."""

_PREFETCHING = ("restore", "undo")
"""Commands whose first step, with ``--yes``, is a capture of the work tree."""


def _start_status_prefetch(argv: list[str]) -> bool:
    """A cold ``rewind restore … --yes`` or ``rewind undo … --yes``, run here: start its
    capture's ``git status`` now, so that it overlaps the imports below
    (:mod:`ledger.git.capture.prefetch`). Only where the repository is clear from the command
    line alone (the one containing the working directory or ``--repo``; a session of another
    repository just leaves the prefetch unused). Anything unusual: no prefetch, which only
    costs the overlap."""
    import os

    words = set(argv)
    if (
        os.environ.get(PREFETCH_ENV) == "0"
        or not words & set(_PREFETCHING)  # nothing more is loaded for any other command
        or not {"--yes", "-y"} & words
        or {"--dry-run", "-h", "--help", "conversation", "--mode=conversation"} & words
    ):
        return False
    from ledger.cli.served import command_of, find_repository

    command, repo = command_of(argv)
    if command not in _PREFETCHING:
        return False
    try:
        start = os.getcwd() if repo is None else os.path.join(os.getcwd(), repo)
    except OSError:
        return False
    found = find_repository(start)
    if found is None:
        return False
    from ledger.git.capture import prefetch

    return prefetch.start(*found)


def _flush_or_drop_stdout() -> None:
    """``rewind diff … | head``: a reader gone before the buffered output was flushed is no
    error. Without this, the interpreter's last flush printed "Exception ignored …
    BrokenPipeError" and the process ended with status 120 (unless ``PYTHONUNBUFFERED`` was
    set, as in CI): the rest of the output now goes to ``/dev/null``."""
    import os

    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass


def _exit_now(code: int) -> NoReturn:
    """End this process now: a served command's output is printed and flushed, and the client
    has nothing else to finish (no file, no thread, no child). The interpreter's teardown would
    cost ~4 ms of the command's ~80 (as :func:`ledger.cli.app._exit_now` skips it after a
    command of its own)."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def __getattr__(name: str) -> object:
    """The names of :mod:`ledger.cli.app`, loaded on first use."""
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module("ledger.cli.app"), name)


__all__ = [
    "COMMANDS",
    "COMMAND_MODULES",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "SERVE_STDIO",
    "UsageError",
    "build_parser",
    "main",
    "package_version",
    "run_served_command",
]
