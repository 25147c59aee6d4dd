"""``rewind snapshot``: capture the work tree now and keep it in the store.

Why it exists: a manual checkpoint, and the quickest way to see what a capture costs and what it
leaves out. Thin: the work is :func:`ledger.git.store.snapshot.take_snapshot`, done by the running
``rewind serve`` of the repository when there is one (:mod:`ledger.bridge.snapshot_socket`), else
here.
"""

from __future__ import annotations

import argparse

from ledger.cli.context import CliContext

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py); the library
# itself is imported when a command runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.bridge.snapshot_socket import Fields
    from ledger.git.repo import GitRepo


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
    served = _served(ctx)
    if served is not None:
        fields, warnings = served
    else:
        from ledger.git.store.snapshot import take_snapshot
        from ledger.settings import load_settings

        repo = ctx.repo(create=True)
        settings, warnings = load_settings(ctx.agent_dir(), repo.root)
        fields = take_snapshot(repo, settings.snapshot).fields()
        if settings.snapshot.auto_watch_seconds > 0 and ctx.own_process:
            # Only from a real `rewind` process: a program calling main() starts no process.
            start_watching(ctx, repo, settings.snapshot.auto_watch_seconds)
    for warning in warnings:
        ctx.warn(warning)
    if fields["identityFallback"]:
        ctx.warn(
            "git has no user identity; the snapshot was committed as pi-rewind "
            "<pi-rewind@localhost>"
        )
    ctx.emit(fields["json"], lambda: _text(fields), small=True)
    return 0


def _served(ctx: CliContext) -> tuple[Fields, list[str]] | None:
    """The snapshot taken by the running ``rewind serve`` of this repository (its change feed
    makes it O(changed), docs/capture.md#served-snapshots), or ``None``: capture here.
    ``REWIND_SERVED=0`` always captures here."""
    import os

    if os.environ.get("REWIND_SERVED", "1") == "0":
        return None
    from ledger.bridge.snapshot_socket import request_snapshot

    start = ctx.path(ctx.repo_option) if ctx.repo_option else ctx.cwd
    return request_snapshot(start, ctx.agent_dir())


def start_watching(ctx: CliContext, repo: GitRepo, seconds: int) -> None:
    """``rewind.snapshot.autoWatchSeconds``: nobody served this snapshot (or command), so start
    a watcher that serves the next ones (docs/capture.md#served-snapshots,
    docs/capture.md#served-commands). Not when local captures were asked for
    (``REWIND_SERVED=0``) or in a shadow repository (it has no feed)."""
    import os

    from ledger.bridge.snapshot_socket import start_watcher
    from ledger.git.shadow.layout import ShadowRepo

    if os.environ.get("REWIND_SERVED", "1") == "0" or isinstance(repo, ShadowRepo):
        return
    root = repo.root
    if start_watcher(root, seconds) is not None:
        ctx.stderr.write(
            f"rewind: watching {root} in the background (ends after {seconds} s without a "
            "snapshot; rewind.snapshot.autoWatchSeconds): the next snapshots are served by it\n"
        )


def _text(fields: Fields) -> str:
    lines = [
        f"snapshot {fields['commit']}{' (reused)' if fields['reused'] else ''}",
        f"tree     {fields['tree']}",
    ]
    skipped = fields["skipped"]
    assert isinstance(skipped, list)
    for item in skipped:
        size = item.get("size")
        reason = item["reason"]
        detail = reason if size is None else f"{reason}, {_size(int(size))}"
        lines.append(f"skipped  {item['path']} ({detail})")
    note = ", private index rebuilt" if fields["rebuilt"] else ""
    ms = fields["ms"]
    assert isinstance(ms, (int, float))
    lines.append(f"took     {ms:.0f} ms{note}")
    return "\n".join(lines)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
