"""``rewind show`` and ``rewind report``, and the pager and colour rules ``rewind log`` shares.

Why it exists: formatting only. The steps, diffs and the HTML page come from
:mod:`ledger.review`; this module resolves names, decides colour (only on a terminal, never with
``--no-color`` or ``NO_COLOR``) and pipes long text through a pager on a terminal as git does
(``GIT_PAGER``, else ``PAGER``, else ``less`` with ``LESS=FRX`` unless ``LESS`` is set).

Invariants: read-only on the repository and the sessions; ``report`` writes only its output file
(atomically, through a temporary file next to it). ``--json`` never pages and never colours.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from ledger.cli.context import CliContext
from ledger.errors import LedgerError

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py); the library
# itself is imported when a command runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

    from ledger.git.repo import GitRepo

SESSION_HELP = "a .jsonl path, a unique session id prefix, or @ (newest)"
ENTRY_HELP = "an entry id, a unique prefix of one, or @ (the leaf)"


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "show",
        parents=[common],
        help="what one prompt or turn changed, like git show",
        description="Show what a prompt (a user entry: the whole prompt) or a turn (an assistant "
        "entry) changed: the diff from the rewind point before it to the one after "
        "it, under a header with the prompt text and the assistant's summary line.",
    )
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.add_argument("entry", metavar="ENTRY", help=ENTRY_HELP)
    add_diff_options(p, default="patch")
    p.set_defaults(run=run_show)

    p = sub.add_parser(
        "report",
        parents=[common],
        help="write a self-contained HTML review of a session",
        description="Write one self-contained HTML page (no network, no external assets): the "
        "session's branch as a timeline of prompts and turns with their diffs.",
    )
    p.add_argument("session", metavar="SESSION", help=SESSION_HELP)
    p.add_argument("-o", "--output", metavar="FILE", required=True, help="the .html file to write")
    p.add_argument("--lineage", action="store_true", default=True, help=argparse.SUPPRESS)
    p.add_argument(
        "--side-by-side", action="store_true", help="two-column diffs instead of unified ones"
    )
    p.add_argument(
        "--find-renames", action="store_true", help="detect renames (off by default, as git diff)"
    )
    p.set_defaults(run=run_report)


def add_diff_options(p: argparse.ArgumentParser, *, default: str) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--patch",
        "-p",
        dest="detail",
        action="store_const",
        const="patch",
        help="the unified diff (byte for byte what git diff prints)",
    )
    group.add_argument(
        "--stat",
        dest="detail",
        action="store_const",
        const="stat",
        help="a diffstat instead of the patch",
    )
    p.set_defaults(detail=default)
    p.add_argument(
        "--find-renames",
        "-M",
        action="store_true",
        help="detect renames (off by default, as git diff)",
    )
    p.add_argument("--no-color", action="store_true", help="never colour the output")
    p.add_argument("--no-pager", action="store_true", help="do not pipe the output through a pager")


# --- colour and pager ---------------------------------------------------------------------------


def use_color(ctx: CliContext, args: argparse.Namespace) -> bool:
    if ctx.json or getattr(args, "no_color", False) or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    return _isatty(ctx.stdout)


def _isatty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def terminal_width(ctx: CliContext) -> int:
    if _isatty(ctx.stdout):
        return max(40, shutil.get_terminal_size((80, 24)).columns)
    return 80


@contextlib.contextmanager
def paged(ctx: CliContext, args: argparse.Namespace) -> Iterator[None]:
    """Send ``ctx.stdout`` through a pager while the block runs, when git would."""
    _tolerate_raw_bytes(ctx.stdout)
    if ctx.json or getattr(args, "no_pager", False) or not _isatty(ctx.stdout):
        yield
        return
    command = os.environ.get("GIT_PAGER") or os.environ.get("PAGER") or "less"
    if command.strip() in ("", "cat"):
        yield
        return
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    try:
        proc = subprocess.Popen(
            command,
            shell=True,
            stdin=subprocess.PIPE,
            env=env,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
        )
    except OSError:
        yield
        return
    original = ctx.stdout
    assert proc.stdin is not None
    ctx.stdout = proc.stdin
    try:
        yield
    except BrokenPipeError:
        pass
    finally:
        ctx.stdout = original
        with contextlib.suppress(BrokenPipeError, OSError):
            proc.stdin.close()
        proc.wait()


def _tolerate_raw_bytes(stream: IO[str]) -> None:
    """Patches may hold bytes that are not UTF-8 (kept as surrogates): write them back as bytes."""
    reconfigure = getattr(stream, "reconfigure", None)  # io.TextIOWrapper's; a pipe may lack it
    if reconfigure is not None:
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="surrogateescape")


# --- commands -----------------------------------------------------------------------------------


def _session_repo(ctx: CliContext, session_name: str) -> tuple[Path, GitRepo]:
    from ledger.cli.inspect import resolve_session_path
    from ledger.session.store import read_header

    path = resolve_session_path(ctx, session_name)
    cwd = read_header(path).get("cwd")
    near = Path(cwd) if isinstance(cwd, str) and Path(cwd).is_dir() else None
    return path, ctx.repo(near=near)


def run_show(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.review.show import render_step, show_entry
    from ledger.session.discovery import resolve_entry
    from ledger.session.store import read_session

    path, repo = _session_repo(ctx, args.session)
    entry = resolve_entry(read_session(path), args.entry)
    review, warnings = show_entry(
        repo, path, entry, find_renames=args.find_renames, detail=args.detail
    )
    for warning in warnings:
        ctx.warn(warning)
    if ctx.json:
        ctx.emit(review.to_json(args.detail), "")
        return 0
    color = use_color(ctx, args)
    width = terminal_width(ctx)
    with paged(ctx, args):
        ctx.stdout.write(render_step(review, args.detail, color=color, width=width))
        ctx.stdout.flush()
    return 0


def run_log_detail(args: argparse.Namespace, ctx: CliContext, path: Path) -> int:
    """``rewind log --patch/--stat``: every prompt and turn of the branch with its diff."""
    from ledger.review.show import log_text, open_review
    from ledger.session.store import read_header

    cwd = read_header(path).get("cwd")
    near = Path(cwd) if isinstance(cwd, str) and Path(cwd).is_dir() else None
    repo = ctx.repo(near=near)
    review = open_review(repo, path, lineage=args.lineage, find_renames=args.find_renames)
    for warning in review.warnings:
        ctx.warn(warning)
    if ctx.json:
        for item in review.reviews(args.detail):
            ctx.emit_line(item.to_json(args.detail), "")
        return 0
    color = use_color(ctx, args)
    width = terminal_width(ctx)
    with paged(ctx, args):
        for chunk in log_text(review, args.detail, color=color, width=width):
            ctx.stdout.write(chunk)
        ctx.stdout.flush()
    return 0


def run_report(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.review.html import write_report

    path, repo = _session_repo(ctx, args.session)
    output = ctx.path(args.output)
    if output.is_dir():
        raise LedgerError(f"{output} is a directory", hint="pass a file name such as review.html")
    result = write_report(
        repo, path, output, side_by_side=args.side_by_side, find_renames=args.find_renames
    )
    for warning in result.warnings:
        ctx.warn(warning)
    ctx.emit(
        result.to_json(),
        f"wrote {result.path}: {result.prompts} prompts, {result.turns} turns, "
        f"{result.files} file changes, {result.bytes} bytes",
    )
    return 0
