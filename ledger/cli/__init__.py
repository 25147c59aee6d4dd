"""The ``rewind`` command line: parse, call the library, format.

Why it exists: a thin shell over the library. Each command group lives in its own module that
exposes ``register(subparsers, common)``; the module's ``run(args, ctx)`` returns an exit status.

Invariants:
- Errors never show a traceback: a :class:`~ledger.errors.LedgerError` becomes ``error: …`` and
  ``hint: …`` on stderr with exit status 1; wrong usage exits 2; anything unexpected is reported
  as an internal error with exit status 1 (``REWIND_DEBUG=1`` shows the traceback).
- Global options (``--repo``, ``--agent-dir``, ``--json``) are accepted before or after the
  subcommand.
"""

from __future__ import annotations

import argparse
import errno
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from ledger.cli.context import CliContext
from ledger.errors import LedgerError

COMMAND_MODULES = (
    "ledger.cli.inspect",
    "ledger.cli.snapshot",
    "ledger.cli.restore",
    "ledger.cli.status",
    "ledger.cli.demo",
    "ledger.cli.maintain",
    "ledger.cli.serve",
    "ledger.cli.review",
    "ledger.cli.portable",
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Wrong usage of the command line (exit status 2)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message, hint=f"see '{self.prog} --help'")


def _common_options(suppress: bool) -> argparse.ArgumentParser:
    default = argparse.SUPPRESS if suppress else None
    common = _Parser(add_help=False)
    group = common.add_argument_group("global options")
    group.add_argument(
        "--repo",
        metavar="DIR",
        default=default,
        help="the git repository (default: the one containing the cwd)",
    )
    group.add_argument(
        "--agent-dir",
        metavar="DIR",
        default=default,
        help="Pi's agent dir (default: $PI_CODING_AGENT_DIR, else ~/.pi/agent)",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="print JSON only",
    )
    return common


class _VersionAction(argparse.Action):
    """``--version``: looks the version up only when asked (importlib.metadata is slow to import)."""

    def __init__(
        self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: object
    ) -> None:
        super().__init__(
            option_strings,
            dest=dest,
            default=argparse.SUPPRESS,
            nargs=0,
            help=str(kwargs.get("help") or ""),
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(f"rewind {package_version()}\n")
        parser.exit()


def package_version() -> str:
    """The installed distribution's version (``0+unknown`` when run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rewind-ledger")
    except PackageNotFoundError:
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rewind",
        description="Exact, undoable rewind of files and conversation for AI coding agents, on git.",
        parents=[_common_options(suppress=False)],
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print the package version and exit"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    common = _common_options(suppress=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # A short-lived process that builds large object graphs (100k-entry sessions): full cyclic
    # collections would cost more than the work; refcounting still frees everything.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _main(argv)
    finally:
        if was_enabled:
            gc.enable()


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    ctx = CliContext(repo_option=None, agent_dir_option=None, json="--json" in args_list)
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
        ctx.repo_option = args.repo
        ctx.agent_dir_option = args.agent_dir
        ctx.json = bool(args.json)
        return int(args.run(args, ctx) or EXIT_OK)
    except UsageError as exc:
        _report(ctx, str(exc), exc.hint)
        return EXIT_USAGE
    except LedgerError as exc:
        _report(ctx, exc.message, exc.hint)
        return EXIT_FAILED
    except KeyboardInterrupt:
        _report(ctx, "interrupted", None)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `rewind log | head`): not an error of ours.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return EXIT_OK
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
            if os.environ.get("REWIND_DEBUG"):
                raise
            _report(
                ctx,
                f"internal error: {type(exc).__name__}: {exc}",
                "this is a bug in rewind-ledger; run again with REWIND_DEBUG=1 for details",
            )
            return EXIT_FAILED
        where = f" ({exc.filename})" if exc.filename else ""
        _report(
            ctx,
            f"{exc.strerror or exc}{where}",
            "free some disk space (or fix the permissions) and try again; 'rewind doctor' tells whether a "
            "restore was interrupted and 'rewind undo SESSION' brings its files back",
        )
        return EXIT_FAILED
    except Exception as exc:
        if os.environ.get("REWIND_DEBUG"):
            raise
        _report(
            ctx,
            f"internal error: {type(exc).__name__}: {exc}",
            "this is a bug in rewind-ledger; run again with REWIND_DEBUG=1 for details",
        )
        return EXIT_FAILED


def _report(ctx: CliContext, message: str, hint: str | None) -> None:
    ctx.stderr.write(f"error: {message}\n")
    if hint:
        ctx.stderr.write(f"hint: {hint}\n")
    ctx.stderr.flush()
