"""Shadow repositories in ``rewind doctor`` and ``rewind sweep --remove-orphaned-shadows``.

Why it exists: the shadow repositories of plain directories (docs/shadow.md) live under the agent
dir, not in any repository, so the doctor lists them whatever repository it was run in, and a
sweep removes the orphaned ones only on request. Thin: the work is
:mod:`ledger.git.shadow.upkeep`. Commands never print directly (``ctx.emit``).
"""

from __future__ import annotations

import argparse

from ledger.cli.context import CliContext

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: start-up cost (ledger/cli/context.py)
if TYPE_CHECKING:
    from typing import Any

    from ledger.git.repo import GitRepo


def add_sweep_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--remove-orphaned-shadows",
        action="store_true",
        help="instead of a retention sweep, delete the shadow repositories whose directory is "
        "gone or became a git repository (with --dry-run: list them)",
    )


def run_remove_orphaned(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.git.shadow.upkeep import list_shadows, remove_orphaned

    agent_dir = ctx.agent_dir()
    if args.dry_run:
        chosen = [s for s in list_shadows(agent_dir) if s.orphaned]
    else:
        chosen = remove_orphaned(agent_dir)
    verb = "would remove" if args.dry_run else "removed"
    total = sum(s.bytes for s in chosen)
    payload = {
        "dryRun": bool(args.dry_run),
        "removed": [s.to_json() for s in chosen],
        "bytes": total,
    }

    def text() -> str:
        if not chosen:
            return "no orphaned shadow repositories"
        lines = [f"{verb} {s.home} ({s.state}: {s.directory}, {_mib(s.bytes)})" for s in chosen]
        lines.append(f"{verb} {len(chosen)} shadow repositories, {_mib(total)}")
        return "\n".join(lines)

    ctx.emit(payload, text)
    return 0


def doctor_section(ctx: CliContext, repo: GitRepo | None) -> tuple[dict[str, Any], list[str]]:
    """The doctor's JSON fields and text lines about shadow repositories."""
    from ledger.git.shadow.layout import ShadowRepo
    from ledger.git.shadow.upkeep import list_shadows

    statuses = list_shadows(ctx.agent_dir())
    orphaned = [s for s in statuses if s.orphaned]
    payload: dict[str, Any] = {
        "shadow": str(repo.shadow.home) if isinstance(repo, ShadowRepo) else None,
        "orphanedShadows": [s.to_json() for s in orphaned],
    }
    lines = []
    if isinstance(repo, ShadowRepo):
        lines.append(
            f"shadow       {repo.root} is not a git repository; snapshots in {repo.git_dir}"
        )
    if orphaned:
        total = sum(s.bytes for s in orphaned)
        lines.append(
            f"shadows      {len(orphaned)} orphaned shadow repositories hold {_mib(total)} "
            "(rewind sweep --remove-orphaned-shadows removes them)"
        )
        lines += [
            f"  {s.state:<13} {_mib(s.bytes):>10}  {s.directory}  ({s.home})" for s in orphaned
        ]
    return payload, lines


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB" if n >= 1024 * 1024 else f"{n / 1024:.1f} KiB"
