"""``rewind snapshot``: capture the work tree now and keep it in the store.

Why it exists: a manual checkpoint, and the quickest way to see what a capture costs and what it
leaves out. Thin: the work is :func:`ledger.git.snapshot.take_snapshot`.
"""

from __future__ import annotations

import argparse

from ledger.cli.context import CliContext

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py); the library
# itself is imported when a command runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.git.snapshot import SnapshotReport


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser(
        "snapshot",
        parents=[common],
        help="capture the work tree as a snapshot commit kept by refs/pi-rewind/store",
        description="Capture the work tree (tracked and untracked, non-ignored files) into a "
        "snapshot commit kept alive by refs/pi-rewind/store, reusing the latest "
        "snapshot when nothing changed.",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.git.snapshot import take_snapshot
    from ledger.settings import load_settings

    repo = ctx.repo(create=True)
    settings, warnings = load_settings(ctx.agent_dir(), repo.root)
    for warning in warnings:
        ctx.warn(warning)
    report = take_snapshot(repo, settings.snapshot)
    if report.identity_fallback:
        ctx.warn(
            "git has no user identity; the snapshot was committed as pi-rewind "
            "<pi-rewind@localhost>"
        )
    ctx.emit(report.to_json(), lambda: _text(report))
    return 0


def _text(report: SnapshotReport) -> str:
    lines = [
        f"snapshot {report.commit}{' (reused)' if report.reused else ''}",
        f"tree     {report.tree}",
    ]
    for item in report.skipped:
        detail = item.reason if item.size is None else f"{item.reason}, {_size(item.size)}"
        lines.append(f"skipped  {item.path} ({detail})")
    note = ", private index rebuilt" if report.rebuilt else ""
    lines.append(f"took     {report.ms:.0f} ms{note}")
    return "\n".join(lines)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
