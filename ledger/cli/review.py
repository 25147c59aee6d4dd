"""``rewind show`` and ``rewind report``, the diff options, pager and colour rules that
``rewind log`` shares, and the text of ``rewind diff`` (run by :mod:`ledger.cli.restore`).

Why it exists: formatting only. The steps, diffs and the HTML page come from
:mod:`ledger.review`; this module resolves names, decides colour as git does (``--color=WHEN``,
else git's ``color.diff``, else ``color.ui``, else ``auto``: only on a terminal, and never with
``NO_COLOR`` or ``TERM=dumb``) and pipes long text through a pager on a terminal as git does
(:func:`pager_command`: ``GIT_PAGER``, else ``pager.<command>``, else ``core.pager``, else
``PAGER``, else ``less`` with ``LESS=FRX`` unless ``LESS`` is set; ``pager.<command>`` false, an
empty command or ``cat``: no pager). The ``--stat`` width is git's: ``COLUMNS``, else the
terminal's width, else 80.

ENTRY ``@`` means the same in every command that takes an ENTRY (:func:`resolve_entry_name`):
the branch's latest prompt (its user entry). The leaf itself is, after every prompt, one of
rewind's own records, which has no rewind point.

Invariants: read-only on the repository and the sessions; ``report`` writes only its output file
(atomically, through a temporary file next to it). ``--json`` never pages and never colours.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ledger.cli.context import CliContext
from ledger.cli.sessions import session_repo
from ledger.errors import LedgerError

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py); the library
# itself is imported when a command runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

    from ledger.git.repo import GitRepo
    from ledger.session.model import Session

SESSION_HELP = "a .jsonl path, a unique session id prefix, or @ (newest; the default)"
ENTRY_HELP = "an entry id, a unique prefix of one, or @ (the branch's latest prompt; the default)"
COLOR_CHOICES = ("always", "never", "auto")


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
    p.add_argument("session", metavar="SESSION", nargs="?", default="@", help=SESSION_HELP)
    p.add_argument("entry", metavar="ENTRY", nargs="?", default="@", help=ENTRY_HELP)
    add_diff_options(p, default="patch")
    p.set_defaults(run=run_show)

    p = sub.add_parser(
        "report",
        parents=[common],
        help="write a self-contained HTML review of a session",
        description="Write one self-contained HTML page (no network, no external assets): the "
        "session's branch as a timeline of prompts and turns with their diffs.",
    )
    p.add_argument("session", metavar="SESSION", nargs="?", default="@", help=SESSION_HELP)
    p.add_argument("-o", "--output", metavar="FILE", required=True, help="the .html file to write")
    p.add_argument("--lineage", action="store_true", default=True, help=argparse.SUPPRESS)
    p.add_argument(
        "--side-by-side",
        action="store_true",
        help="open the page in the side-by-side view (the page has a switch)",
    )
    p.add_argument(
        "--find-renames",
        "-M",
        action="store_true",
        help="detect renames (off by default, as git diff)",
    )
    p.set_defaults(run=run_report)


def add_diff_options(p: argparse.ArgumentParser, *, default: str | None, log: bool = False) -> None:
    """The detail options (``--patch``, ``--stat``, ``--numstat``, ``--name-status``), renames,
    colour and pager; ``log``: the words of ``rewind log``, where they are optional."""
    what = "every prompt and turn of the branch with " if log else ""
    group = p.add_mutually_exclusive_group()
    details = (
        ("--patch", "patch", "its diff, like git log -p" if log else "the unified diff"),
        ("--stat", "stat", "a diffstat (git diff --stat)"),
        ("--numstat", "numstat", "added and deleted lines per file (git diff --numstat)"),
        ("--name-status", "name-status", "a status letter and the names (git diff --name-status)"),
    )
    for flag, const, help_text in details:
        flags = [flag, "-p"] if const == "patch" else [flag]
        group.add_argument(
            *flags, dest="detail", action="store_const", const=const, help=what + help_text
        )
    p.set_defaults(detail=default)
    when = "with a detail option: " if log else ""
    p.add_argument(
        "--find-renames",
        "-M",
        action="store_true",
        help=when + "detect renames (off by default, as git diff --no-renames)",
    )
    p.add_argument(
        "--color",
        nargs="?",
        const="always",
        choices=COLOR_CHOICES,
        metavar="WHEN",
        help=when + "colour: always, never or auto (a terminal; the default, unless git's "
        "color.diff or color.ui says otherwise)",
    )
    p.add_argument(
        "--no-color",
        dest="color",
        action="store_const",
        const="never",
        help=when + "never colour (--color=never)",
    )
    p.add_argument(
        "--no-pager", action="store_true", help=when + "do not pipe the output through a pager"
    )


# --- colour and pager ---------------------------------------------------------------------------


def use_color(ctx: CliContext, args: argparse.Namespace, repo: GitRepo | None = None) -> bool:
    """git's rule: ``--color=WHEN``, else ``color.diff``, else ``color.ui``, else ``auto``;
    ``auto`` colours a terminal only (not ``TERM=dumb``, not with ``NO_COLOR``)."""
    if ctx.json:
        return False
    when = getattr(args, "color", None) or _configured_color(repo)
    if when == "always":
        return True
    if when == "never" or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return _isatty(ctx.stdout)


def _configured_color(repo: GitRepo | None) -> str:
    """``color.diff``, else ``color.ui``, as git reads them (``true`` means ``auto``)."""
    if repo is None:
        return "auto"
    from ledger.git.repo import ConfigValues

    config = ConfigValues(repo)
    for key in ("color.diff", "color.ui"):
        raw = config.string(key)
        if raw is None:  # unset or unreadable: the next
            continue
        value = raw.strip().lower()
        if value in ("always", "never", "auto"):
            return value
        if value in ("false", "no", "off", "0", ""):
            return "never"
        if value in ("true", "yes", "on", "1"):
            return "auto"
    return "auto"


def _isatty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def terminal_width(ctx: CliContext) -> int:
    """git's ``term_columns``: ``COLUMNS`` when a positive number, else the terminal's width
    when stdout is one, else 80."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if _isatty(ctx.stdout):
        try:
            return os.get_terminal_size(ctx.stdout.fileno()).columns or 80
        except (AttributeError, ValueError, OSError):
            import shutil

            return shutil.get_terminal_size((80, 24)).columns
    return 80


def pager_command(repo: GitRepo | None, command: str) -> str | None:
    """The pager git would run for ``git <command>`` (git's ``git_pager`` and
    ``check_pager_config``), or ``None`` for no pager: ``GIT_PAGER`` when set; else
    ``pager.<command>`` when it names a program; else ``core.pager``; else ``PAGER``; else
    ``less``. ``pager.<command>`` false turns paging off whatever the rest says (git never asks
    the pager then); an empty command or ``cat`` means no pager."""
    program: str | None = None
    if repo is not None:
        from ledger.git.repo import ConfigValues

        config = ConfigValues(repo)
        per_command = config.string(f"pager.{command}")
        if per_command is not None:
            value = per_command.strip().lower()
            if value in ("false", "no", "off", "0", ""):
                return None
            if value not in ("true", "yes", "on", "1"):
                program = per_command
        if program is None:
            program = config.string("core.pager")
    # git: GIT_PAGER set (even empty) wins over the configuration; PAGER only when neither.
    chosen = os.environ.get("GIT_PAGER")
    if chosen is None:
        chosen = program if program is not None else os.environ.get("PAGER", "less")
    if chosen.strip() in ("", "cat"):
        return None
    return chosen


@contextlib.contextmanager
def paged(
    ctx: CliContext,
    args: argparse.Namespace,
    repo: GitRepo | None = None,
    command: str = "show",
) -> Iterator[None]:
    """Send ``ctx.stdout`` through a pager while the block runs, when git would run
    ``git <command>`` through one (:func:`pager_command`; ``repo``: whose configuration)."""
    _tolerate_raw_bytes(ctx.stdout)
    if ctx.json or getattr(args, "no_pager", False) or not _isatty(ctx.stdout):
        yield
        return
    pager = pager_command(repo, command)
    if pager is None:
        yield
        return
    import subprocess

    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    env["GIT_PAGER_IN_USE"] = "true"  # as git sets it: a program run under it knows
    try:
        proc = subprocess.Popen(
            pager,
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


def run_show(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.review.show import render_step, show_entry
    from ledger.session.store import read_session

    path, repo = session_repo(ctx, args.session)
    session = read_session(path)
    entry = resolve_entry_name(session, args.entry)
    color = use_color(ctx, args, repo)
    width = terminal_width(ctx)
    review, warnings = show_entry(
        repo,
        path,
        entry,
        find_renames=args.find_renames,
        detail=args.detail,
        values=ctx.json,
        color=color,
        width=width,
        # diff.relative for the text git would print here; --json values are the whole tree's.
        relative=None if ctx.json else relative_to(ctx, repo),
    )
    for warning in warnings:
        ctx.warn(warning)
    if ctx.json:
        ctx.emit(review.to_json(args.detail), "")
        return 0
    with paged(ctx, args, repo, "show"):
        ctx.stdout.write(render_step(review, args.detail, color=color, width=width))
        ctx.stdout.flush()
    return 0


def run_log_detail(args: argparse.Namespace, ctx: CliContext, path: Path) -> int:
    """``rewind log --patch|--stat|--numstat|--name-status``: every prompt and turn of the
    branch with its diff. Points are found through the forks unless ``--no-lineage`` (as
    ``show`` and ``report`` do)."""
    from ledger.review.show import log_text, open_review
    from ledger.session.store import read_header

    cwd = read_header(path).get("cwd")
    near = Path(cwd) if isinstance(cwd, str) and Path(cwd).is_dir() else None
    repo = ctx.repo(near=near)
    color = use_color(ctx, args, repo)
    width = terminal_width(ctx)
    review = open_review(
        repo,
        path,
        lineage=args.lineage is not False,
        find_renames=args.find_renames,
        color=color,
        width=width,
        relative=None if ctx.json else relative_to(ctx, repo),
    )
    for warning in review.warnings:
        ctx.warn(warning)
    if ctx.json:
        for item in review.reviews(args.detail):
            ctx.emit_line(item.to_json(args.detail), "")
        return 0
    with paged(ctx, args, repo, "log"):
        for chunk in log_text(review, args.detail, color=color, width=width):
            ctx.stdout.write(chunk)
        ctx.stdout.flush()
    return 0


def run_report(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.review.html import write_report

    path, repo = session_repo(ctx, args.session)
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
        f"wrote {result.path}: {counted(result.prompts, 'prompt')}, "
        f"{counted(result.turns, 'turn')}, {counted(result.files, 'file change')}, "
        f"{counted(result.bytes, 'byte')}",
    )
    return 0


def counted(n: int, noun: str) -> str:
    """``1 prompt``, ``2 prompts``, ``0 prompts``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


# --- ENTRY @ and rewind diff ----------------------------------------------------------------------


def resolve_entry_name(session: Session, name: str) -> str:
    """ENTRY as every command reads it: an entry id or a unique prefix of one; ``@``: the
    branch's latest prompt (its user entry), or the leaf when the branch has no prompt yet.

    Not the leaf itself: after every prompt the leaf is one of rewind's own records, which has
    no rewind point, so ``rewind diff @ @`` and ``rewind restore @ @`` would always refuse."""
    from ledger.session.discovery import NEWEST, resolve_entry

    if name == NEWEST:
        from ledger.engine.ownership import branch_prompts  # the /rewind list's prompts

        prompts = branch_prompts(session, session.leaf_id)
        if prompts:
            return prompts[-1].id
    return resolve_entry(session, name)


def relative_to(ctx: CliContext, repo: GitRepo) -> str | None:
    """``diff.relative``'s prefix for a diff printed from ``ctx.cwd`` (see
    :func:`ledger.review.diff.relative_prefix`)."""
    from ledger.git.repo import ConfigValues
    from ledger.review.diff import relative_prefix

    return relative_prefix(ConfigValues(repo), repo.root, str(ctx.cwd))


def diff_list_lines(
    repo: GitRepo, added: list[str], modified: list[str], deleted: list[str]
) -> list[str]:
    """``  A name`` lines of ``rewind diff``: each name quoted exactly as ``git diff
    --name-status`` quotes it under the user's ``core.quotePath`` (default on: bytes from 0x80
    up as octal escapes; off: as they are); a control character, ``"`` or ``\\`` always
    quoted, so a name can never break or forge a line."""
    from ledger.git.repo import ConfigValues
    from ledger.quoting import quote_c_style

    quote_path = ConfigValues(repo).boolean("core.quotePath") is not False

    def quoted(name: str) -> str:
        return quote_c_style(name, quote_path=quote_path)

    lines = (
        [f"  A {quoted(p)}" for p in added]
        + [f"  M {quoted(p)}" for p in modified]
        + [f"  D {quoted(p)}" for p in deleted]
    )
    return lines or ["  (no file changes)"]
