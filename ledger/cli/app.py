"""The ``rewind`` command line run in this process: parse, call the library, format.

Why it exists: a thin shell over the library. :mod:`ledger.cli` (the package the ``rewind``
script imports) first asks the repository's watcher to run the command and loads this module
only when the command runs here (or for a program calling ``main``). Each command group lives in its own module that
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
import contextlib
import errno
import gc
import importlib
import os
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from ledger.cli.context import CliContext
from ledger.errors import LedgerError
from ledger.loaded_modules import finished

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

# Every command, in the order ``rewind --help`` lists them: (name, module, one-line help).
# Only the module of the command being run is imported, so ``rewind --help`` and each command
# start without importing the others (issue: a CLI that starts fast). A unit test checks that
# each module registers exactly the commands and help lines listed here.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("sessions", "ledger.cli.inspect", "list the repository's sessions, newest first"),
    ("log", "ledger.cli.inspect", "the ledger: one line per snapshot reference"),
    ("tree", "ledger.cli.inspect", "draw the session tree with its rewind points"),
    (
        "snapshot",
        "ledger.cli.snapshot",
        "capture the work tree as a snapshot commit kept by refs/pi-rewind/store",
    ),
    ("restore", "ledger.cli.restore", "restore files and/or conversation to an entry"),
    ("undo", "ledger.cli.restore", "undo the last file rewind of the session"),
    ("history", "ledger.cli.history", "the session's file operations, newest first"),
    ("fork", "ledger.cli.restore", "fork the session at an entry (Pi's /fork)"),
    ("checkpoint", "ledger.cli.restore", "snapshot now and bind it to an entry"),
    ("diff", "ledger.cli.restore", "what a restore to an entry would change"),
    ("status", "ledger.cli.status", "what changed in the work tree since the latest rewind point"),
    ("demo", "ledger.cli.demo", "a narrated tour on a throwaway repository"),
    ("sweep", "ledger.cli.maintain", "drop old snapshots from refs/pi-rewind/store"),
    ("config", "ledger.cli.maintain", "print the effective settings and where each came from"),
    (
        "doctor",
        "ledger.cli.maintain",
        "check the store, the ledger references and the capture index",
    ),
    (
        "serve",
        "ledger.cli.serve",
        "serve the engine to a running agent over stdin/stdout (Pi's extension)",
    ),
    ("show", "ledger.cli.review", "what one prompt or turn changed, like git show"),
    ("report", "ledger.cli.review", "write a self-contained HTML review of a session"),
    ("export", "ledger.cli.portable", "write a session with its rewind points to one file"),
    ("import", "ledger.cli.portable", "import a session archive (or a remote's session)"),
)
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(module for _, module, _ in COMMANDS))
_MODULE_OF = {name: module for name, module, _ in COMMANDS}
_OPTIONS_WITH_VALUE = ("--repo", "--agent-dir")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Wrong usage of the command line (exit status 2)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, sized as ``shutil.get_terminal_size`` would (``$COLUMNS``, else the
    terminal, else 80) without importing ``shutil``: argparse builds a formatter for every
    ``add_argument``, and ``shutil`` (with bz2 and lzma) costs ~4 ms of every command."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            width = _terminal_columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def _terminal_columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

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
    """The installed distribution's version (``0+unknown`` when run from a bare checkout).

    Read from the ``*.dist-info/METADATA`` on ``sys.path`` first: importing
    ``importlib.metadata`` costs ~70 ms, more than the rest of the command."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("rewind_ledger-") and name.endswith(".dist-info"):
                try:
                    with open(os.path.join(entry or ".", name, "METADATA"), encoding="utf-8") as f:
                        for line in f:
                            if line.startswith("Version:"):
                                return line.split(":", 1)[1].strip()
                            if not line.strip():
                                break
                except OSError:
                    pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rewind-ledger")
    except PackageNotFoundError:
        return "0+unknown"


def build_parser(
    commands: Iterable[str] | None = None, *, placeholders: bool = True
) -> argparse.ArgumentParser:
    """The parser; ``commands`` names the commands whose modules are loaded (default: all).

    The other commands get a placeholder that lists them in ``--help`` and captures their
    arguments unparsed; :func:`_parse` loads the real one when a placeholder is chosen.
    ``placeholders=False``: the named commands only (a parser for one command line whose
    command is known; ~1.5 ms less than 22 placeholders).
    """
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
    wanted = COMMAND_MODULES if commands is None else {_MODULE_OF[c] for c in commands}
    loaded: set[str] = set()
    for name, module, help_line in COMMANDS:
        if module in wanted:
            if module not in loaded:
                loaded.add(module)
                importlib.import_module(module).register(sub, common)
            continue
        if placeholders:
            placeholder = sub.add_parser(name, help=help_line, add_help=False)
            placeholder.add_argument("unparsed", nargs=argparse.REMAINDER)
    return parser


def _guess_command(args: Sequence[str]) -> str | None:
    """The command word in ``args``: the first known command name not taken as an option value."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _OPTIONS_WITH_VALUE:
            skip = True
        elif arg == "--":
            return None
        elif arg in _MODULE_OF:
            return arg
    return None


def _parse(args: Sequence[str], *, reuse: bool = False) -> argparse.Namespace:
    """``args`` parsed; ``reuse``: keep the parsers built for later calls (a watcher running
    commands, :func:`run_served_command`: building all 23 subparsers costs milliseconds each
    time; parsing never changes a parser, and one lock keeps parses apart all the same)."""
    build = _cached_parser if reuse else build_parser
    guess = _guess_command(args)
    if guess is not None and not reuse and not {"-h", "--help"} & set(args):
        # A process parses one command line: the guessed command's parser alone. Anything it
        # refuses (a wrong guess, a usage error) is parsed again below by the whole parser,
        # which gives the same answer or message as ever. Not for help, which lists every command.
        with contextlib.suppress(UsageError):
            return build_parser([guess], placeholders=False).parse_args(args)
    namespace = _parse_with(build([guess] if guess else []), args, reuse)
    if getattr(namespace, "run", None) is None:
        # A placeholder was chosen (the guess was wrong, e.g. an abbreviated option took the
        # value): parse again with the chosen command's module loaded.
        namespace = _parse_with(build([namespace.command]), args, reuse)
    return namespace


_PARSERS: dict[tuple[str, ...], argparse.ArgumentParser] = {}
_PARSERS_LOCK = threading.Lock()


def _cached_parser(commands: Iterable[str]) -> argparse.ArgumentParser:
    key = tuple(commands)
    with _PARSERS_LOCK:
        parser = _PARSERS.get(key)
        if parser is None:
            parser = _PARSERS[key] = build_parser(key)
        return parser


def _parse_with(
    parser: argparse.ArgumentParser, args: Sequence[str], locked: bool
) -> argparse.Namespace:
    if not locked:
        return parser.parse_args(args)
    with _PARSERS_LOCK:
        return parser.parse_args(args)


def main_here(argv: Sequence[str] | None = None, *, cwd: Path | None = None) -> int:
    """Run one command in this process (:func:`ledger.cli.main` has asked the watcher, when it
    could run it, already); ``cwd`` (default: the process's) is where relative paths start."""
    # A short-lived process that builds large object graphs (100k-entry sessions): full cyclic
    # collections would cost more than the work; refcounting still frees everything.
    if argv is None and cwd is None and sys.argv[1:] == list(SERVE_STDIO):
        # Pi's extension spawns exactly this, and Pi awaits its first answer (issue 34: the
        # spawned bridge answers session_start in ~100 ms): no parser of 23 commands (nor a
        # question to a watcher, which serves no `serve`). The same namespace the parser gives.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return _main(None, None, parsed=_serve_stdio_args())
        finally:
            if was_enabled:
                gc.enable()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _main(argv, cwd)
    finally:
        if was_enabled:
            gc.enable()


SERVE_STDIO = ("serve", "--stdio")
"""The bridge's command line as Pi's extension spawns it (tools/pi-extension/rewind-ledger.ts)."""


def _serve_stdio_args() -> argparse.Namespace:
    """What :func:`_parse` gives for :data:`SERVE_STDIO` (a unit test holds them equal)."""
    # By name, as the parser registers every command (a static import here would close an
    # import circle through the watcher's served commands: tests/unit/test_import_graph.py).
    serve = importlib.import_module("ledger.cli.serve")
    return argparse.Namespace(
        repo=None,
        agent_dir=None,
        json=False,
        command="serve",
        stdio=True,
        watch=False,
        status=False,
        stop=False,
        idle_exit=0.0,
        sweep_session=None,
        sweep_agent_dir=None,
        run=serve.run,
    )


def run_served_command(argv: Sequence[str], cwd: Path, stdout: IO[str], stderr: IO[str]) -> int:
    """Run one command for a client of the repository's watcher (on a thread of the watcher,
    :mod:`ledger.bridge.served_commands`): its output to ``stdout``/``stderr``; raises
    :class:`~ledger.cli.context.RunLocally` where it would wait."""
    return _main(list(argv), cwd, stdout=stdout, stderr=stderr, served=True)


def _exit_now(code: int) -> None:
    """End the process now, after a command returned: its work is complete and written (every
    file the package writes is closed before its function returns, git objects and refs are
    written by libgit2 as they are made, every thread is a daemon with nothing left to do,
    and no ``atexit`` handler, logging handler or temporary file of ours outlives a command).
    The interpreter's teardown of pygit2 (OpenSSL's and libgit2's shutdown) and ~300 modules
    costs ~20 ms of a ~190 ms ``rewind restore`` at 2,000 files, and ~35 ms that Pi waits for
    when its session ends (docs/capture.md#shared-watcher). A command that fails returns
    through the normal teardown."""
    # A prefetched git status must not outlive this process's capture lock (it ends with the
    # process): stop it first (ledger/git/capture/prefetch.py).
    running = finished("ledger.git.capture.prefetch")
    if running is not None:
        running.stop()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _main(
    argv: Sequence[str] | None,
    cwd: Path | None,
    *,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    served: bool = False,
    parsed: argparse.Namespace | None = None,
) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    ctx = CliContext(
        repo_option=None,
        agent_dir_option=None,
        json="--json" in args_list,
        cwd=cwd,
        stdout=stdout,
        stderr=stderr,
        served=served,
    )
    ctx.own_process = argv is None
    try:
        args = parsed if parsed is not None else _parse(args_list, reuse=served)
        if served:
            _require_served(args)
        ctx.repo_option = args.repo
        ctx.agent_dir_option = args.agent_dir
        ctx.json = bool(args.json)
        code = int(args.run(args, ctx) or EXIT_OK)
        if argv is None:  # a real process, not a caller's main()
            _exit_now(code)
        return code
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


def _require_served(args: argparse.Namespace) -> None:
    """The watcher runs only the commands it serves, whatever its client guessed."""
    from ledger.cli.context import RunLocally
    from ledger.cli.served import COMMANDS

    if getattr(args, "command", None) not in COMMANDS:
        raise RunLocally("not served")


def _report(ctx: CliContext, message: str, hint: str | None) -> None:
    ctx.stderr.write(f"error: {message}\n")
    if hint:
        ctx.stderr.write(f"hint: {hint}\n")
    ctx.stderr.flush()
