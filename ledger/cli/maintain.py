"""``rewind sweep``, ``rewind config``, ``rewind doctor``: keeping the store sound and bounded.

Why it exists: thin commands over :mod:`ledger.retention.sweep`, :mod:`ledger.settings` and
:mod:`ledger.doctor`; they parse, call the library and format.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from ledger.cli.context import CliContext
from ledger.cli.shadows import add_sweep_option, doctor_section, run_remove_orphaned

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py); the library
# itself is imported when a command runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.doctor import DoctorReport
    from ledger.git.repo import GitRepo
    from ledger.git.store.leftovers import Leftover
    from ledger.git.store.upkeep import UpkeepReport
    from ledger.retention.plan import SweepDecision
    from ledger.retention.sweep import SweepReport
    from ledger.settings import ScanMode, Settings

SESSION_HELP = "a .jsonl path, a unique session id prefix, or @ (newest)"


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "sweep",
        parents=[common],
        help="drop old snapshots from refs/pi-rewind/store",
        description="Run the retention sweep from SESSION (the reference's current session): "
        "keep pinned and recent snapshots, drop the rest from refs/pi-rewind/store "
        "(compare-and-swap; session files are never rewritten). Uses the settings' "
        "rewind.retention values unless overridden; runs whether or not retention "
        "is configured.",
    )
    p.add_argument(
        "session", metavar="SESSION", nargs="?", default="@", help=SESSION_HELP + " (default: @)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    p.add_argument(
        "--scan", choices=("ancestor-only", "repo-sessions"), help="which session files to read"
    )
    p.add_argument(
        "--max-snapshots",
        type=_non_negative_int,
        metavar="N",
        help="keep at most N unpinned snapshots",
    )
    p.add_argument(
        "--max-age-days",
        type=_non_negative_float,
        metavar="D",
        help="drop unpinned snapshots older than D days",
    )
    p.add_argument(
        "--pin-labeled", action="store_true", default=None, help="keep snapshots of labeled entries"
    )
    add_sweep_option(p)
    p.set_defaults(run=run_sweep)

    p = sub.add_parser(
        "config",
        parents=[common],
        help="print the effective settings and where each came from",
        description="Print the effective rewind settings: <agent-dir>/settings.json overridden "
        "field by field by <repo>/.pi/settings.json, with the source of each value.",
    )
    p.set_defaults(run=run_config)

    p = sub.add_parser(
        "doctor",
        parents=[common],
        help="check the store, the ledger references and the capture index",
        description="Check that refs/pi-rewind/store is a well-formed keepalive chain, list ledger "
        "references whose snapshots are missing or not kept by the store, check the "
        "private capture index, and report sizes. Exit 1 when there is a problem. Sizes that "
        "need a walk of the whole store are cached until the store changes; a walk that would "
        "take longer than about half a second is given up (the last figures are shown as "
        "'about'), unless --exact.",
    )
    p.add_argument(
        "--exact",
        action="store_true",
        help="measure the store's disk use and what a sweep would free however long the walk "
        "takes (and cache the result)",
    )
    p.set_defaults(run=run_doctor)


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be ≥ 0")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a finite number ≥ 0")
    return value


def _settings(ctx: CliContext, repo: GitRepo) -> Settings:
    from ledger.settings import load_settings

    settings, warnings = load_settings(ctx.agent_dir(), repo.root)
    for warning in warnings:
        ctx.warn(warning)
    return settings


def run_sweep(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.retention.sweep import policy_from
    from ledger.retention.sweep import run_sweep as sweep

    if args.remove_orphaned_shadows:
        return run_remove_orphaned(args, ctx)
    repo = ctx.repo(migrate=True)
    settings = _settings(ctx, repo)
    start = _start_session(ctx, repo, args.session)
    retention = settings.retention
    scan: ScanMode = "ancestor-only"
    if args.scan:
        scan = args.scan
    elif retention is not None:
        scan = retention.scan_mode
    policy = policy_from(
        settings,
        max_snapshots=args.max_snapshots,
        max_age_days=args.max_age_days,
        pin_labeled=args.pin_labeled,
    )
    progress = _progress(ctx)
    report = sweep(
        repo,
        start,
        ctx.agent_dir(),
        scan_mode=scan,
        policy=policy,
        dry_run=args.dry_run,
        progress=progress,
        count_objects=True,
    )
    if progress is not None:
        ctx.stderr.write("\r\033[K")
    for warning in report.warnings:
        ctx.warn(warning)
    upkeep, leftovers = _give_back(repo, report)
    shadow = is_shadow(repo)
    ctx.emit(
        {
            **report.to_json(),
            "upkeep": upkeep.to_json() if upkeep else None,
            "leftovers": [item.to_json() for item in leftovers],
        },
        lambda: "\n".join(
            [_sweep_text(report, shadow), *_upkeep_lines(upkeep, leftovers, report.dry_run)]
        ),
    )
    return 0


def _give_back(repo: GitRepo, report: SweepReport) -> tuple[UpkeepReport | None, list[Leftover]]:
    """After a real sweep: the upkeep (docs/design.md#disk-upkeep), which also removes what
    interrupted work left. A dry run only lists what it would remove."""
    from ledger.git.restore.journal import restore_open
    from ledger.git.store.leftovers import find_leftovers
    from ledger.git.store.upkeep import mark_pending, run_upkeep

    if report.dry_run:
        return None, [item for item in find_leftovers(repo) if item.removable]
    if report.rewritten:
        mark_pending(repo)
    upkeep = run_upkeep(repo, restore_open=lambda: restore_open(repo))
    return upkeep, []


def _upkeep_lines(
    upkeep: UpkeepReport | None, leftovers: list[Leftover], dry_run: bool
) -> list[str]:
    lines = []
    if dry_run and leftovers:
        lines.append(
            f"would remove {len(leftovers)} leftovers of interrupted work "
            f"({_size(sum(item.bytes for item in leftovers))}): "
            + ", ".join(str(item.path) for item in leftovers[:5])
        )
    if upkeep is None:
        return lines
    if upkeep.leftovers_removed:
        lines.append(
            f"removed {len(upkeep.leftovers_removed)} leftovers of interrupted work: "
            + ", ".join(upkeep.leftovers_removed[:5])
        )
    if upkeep.action == "packed-ours":
        lines.append(
            f"packed {upkeep.packed_objects} loose objects of rewind's into one pack "
            f"(git's estimate of loose objects was over gc.auto = {upkeep.threshold})"
        )
    elif upkeep.action == "repacked-shadow":
        lines.append(
            f"repacked the shadow repository: {_size(upkeep.bytes_before)} -> "
            f"{_size(upkeep.bytes_after)} of objects"
        )
    if upkeep.skipped:
        lines.append(f"disk upkeep skipped: {upkeep.skipped}; the next sweep retries")
    return lines


def _start_session(ctx: CliContext, repo: GitRepo, name: str) -> Path | None:
    """SESSION as a path; ``@`` in a repository without sessions is no session (the sweep then
    reads nothing, or only the other files with ``repo-sessions``, and changes nothing)."""
    from ledger.cli.sessions import resolve_session_path
    from ledger.session.discovery import repo_sessions

    if name == "@" and not repo_sessions(ctx.agent_dir(), repo.root):
        return None
    return resolve_session_path(ctx, name)


def _progress(ctx: CliContext) -> Callable[[int, int], None] | None:
    if ctx.json or not ctx.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        if total >= 50 and (done % 25 == 0 or done == total):
            width = 30
            filled = width * done // total
            ctx.stderr.write(
                f"\rreading sessions [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
            )
            ctx.stderr.flush()

    return show


def _sweep_text(report: SweepReport, shadow: bool = False) -> str:
    s = report.plan.summary()
    verb = "would keep" if report.dry_run else "kept"
    if not report.sessions_read:
        return "no session of this repository to sweep from: refs/pi-rewind/store left as it is"
    lines = [
        (
            f"read {report.sessions_read} session files ({report.ledgers} ledgers of this repository, "
            f"scan {report.scan_mode})"
        )
    ]
    decision = report.decision  # what the run does; a dry run prints the same value
    if decision.action == "preserve":
        lines.append("no live snapshot found: refs/pi-rewind/store left as it is")
        return "\n".join(lines)
    lines.append(
        f"{verb} {s['live'] + len(report.arrived)} snapshots ({s['pinned']} pinned, {s['recent']} recent"
        + (f", {s['unrecorded']} not yet recorded" if s["unrecorded"] else "")
        + (f", {len(report.arrived)} appended during the sweep" if report.arrived else "")
        + ")"
        + f", {'would drop' if report.dry_run else 'dropped'} {s['dropped']}"
        + (f" ({s['missing']} already gone)" if s["missing"] else "")
    )
    if report.unreachable_objects:
        n = report.unreachable_objects
        lines.append(
            f"{n} {'object' if n == 1 else 'objects'} (about {_size(report.freed_bytes)}) "
            f"{('would become' if report.dry_run else 'is now' if n == 1 else 'are now')} "
            "unreachable (old keepalives, dropped snapshots and the trees and blobs only they use); "
            + (
                "rewind's upkeep gives the space back (a shadow repository is ours alone)"
                if shadow
                else "git gc may reclaim them"
            )
        )
    if decision.action == "unchanged":
        lines.append("the store already keeps exactly these snapshots: nothing to rewrite")
    elif report.dry_run:
        lines.append(_would_rewrite(decision))
    if report.rewritten:
        lines.append(
            f"refs/pi-rewind/store {(report.old_head or '(none)')[:12]} -> {(report.new_head or '')[:12]}"
        )
    return "\n".join(lines)


def _would_rewrite(decision: SweepDecision) -> str:
    """The dry run's line for a ``rewrite`` decision: what the real sweep will change."""
    if decision.head is None:
        return (
            f"would create refs/pi-rewind/store (it does not exist) keeping {len(decision.keep)} "
            "snapshots"
        )
    changes = [f"drop {len(decision.drop)} it keeps"] if decision.drop else []
    if decision.add:
        changes.append(f"add {len(decision.add)} it does not keep")
    return f"would rewrite refs/pi-rewind/store (now {decision.head[:12]}): " + (
        ", ".join(changes) or "rebuild its chain"
    )


def run_config(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.settings import resolve_settings

    repo = ctx.try_repo()
    effective = resolve_settings(ctx.agent_dir(), repo.root if repo is not None else None)
    for warning in effective.warnings:
        ctx.warn(warning)
    rows = effective.rows()
    payload = {
        "files": [str(p) for p in effective.files],
        "settings": {key: {"value": value, "source": source} for key, value, source in rows},
    }
    width = max(len(key) for key, _, _ in rows)

    def text() -> str:
        import json

        lines = [
            f"{key:<{width}}  {json.dumps(value):<24}  {source}" for key, value, source in rows
        ]
        lines.append(
            "files read (later overrides earlier): " + ", ".join(str(p) for p in effective.files)
        )
        return "\n".join(lines)

    ctx.emit(payload, text)
    return 0


def run_doctor(args: argparse.Namespace, ctx: CliContext) -> int:
    from ledger.doctor import diagnose

    repo = ctx.repo()
    report = diagnose(
        repo,
        ctx.agent_dir(),
        settings=_settings(ctx, repo),
        start=_start_session(ctx, repo, "@"),
        exact=bool(getattr(args, "exact", False)),
    )
    for warning in report.warnings:
        ctx.warn(warning)
    shadow_fields, shadow_lines = doctor_section(ctx, repo)
    ctx.emit(
        {**report.to_json(), **shadow_fields},
        lambda: "\n".join([_doctor_text(report), *shadow_lines]),
    )
    if report.problems:
        ctx.stderr.write("error: " + "; ".join(report.problems) + "\n")
        if report.hint:
            ctx.stderr.write(f"hint: {report.hint}\n")
        return 1
    return 0


def _doctor_text(report: DoctorReport) -> str:
    from ledger.presence import status_line as presence_line
    from ledger.recovery import running_message

    chain = "ok" if not report.chain_problems else "BROKEN"
    lines = [
        f"store        {chain}: {report.keepalives} keepalives, {report.snapshots} snapshots"
        + (f", head {report.store_head[:12]}" if report.store_head else " (no ref yet)"),
        f"objects      {_usage_text(report)} (git's estimate of all loose objects: "
        f"{report.loose_estimate}, gc.auto {report.gc_auto})",
        *_retention_lines(report.retention),
        f"sessions     {report.sessions} of this repository, {report.ledgers} with rewind records",
        f"capture index {report.index}"
        + ("" if report.index == "ok" else " (rebuilt at the next capture)"),
        f"authorship   {report.authorship}"
        + (
            ""
            if report.authorship == "ok"
            else " (left alone: a newer version)"
            if report.authorship == "newer"
            else " (rebuilt from the ledgers at the next plan)"
        ),
    ]
    if report.platform_absent:
        lines.append(
            f"platform     no {', no '.join(report.platform_absent)}: exact as everywhere, but "
            "every capture scans the tree and each Pi session runs its own bridge "
            "(docs/design.md#platforms)"
        )
    if report.live_sessions:
        count = len(report.live_sessions)
        lines.append(
            f"sessions here {count} live Pi session{'s' if count != 1 else ''} in this work tree"
            + ("; a restore in one overwrites what the other's agent writes" if count > 1 else "")
        )
        lines += [presence_line(entry) for entry in report.live_sessions]
    for journal in report.running:
        lines.append(
            f"  {running_message(journal)} ({journal.id}; "
            f"{'writing files' if journal.state == 'writing' else 'files written, recording'}); "
            "not a problem: its journal closes when it ends"
        )
    for journal in report.interrupted:
        lines.append(
            f"  interrupted restore {journal.id}: to {journal.target[:12]} started {journal.started}, "
            f"{'files written, not recorded' if journal.state == 'done' else 'files may be mixed'}; "
            f"before it: snapshot {journal.undo[:12]} (pinned)"
            + (f"; failure: {journal.failure}" if journal.failure else "")
        )
    if report.feed:
        lines.append(f"change feed  {report.feed.get('mode', '?')} (last bridge)")
    server = report.server
    if server:
        who = {"watcher": "a watcher", "bridge": "a Pi session's bridge"}.get(
            str(server.get("kind")), "a process"
        )
        lines.append(
            f"served by    {who} (pid {server.get('pid')}, since {server.get('since') or '?'}); "
            "'rewind serve --status' / '--stop'"
        )
    if report.store_lock:
        lines.append(
            f"store lock   {report.store_lock} ({report.store_lock_age_s:.0f} s old"
            + (", stale)" if report.stale_lock else ")")
        )
    lines += [f"  chain: {problem}" for problem in report.chain_problems]
    for ref in report.references:
        lines.append(
            f"  {ref.state:<11} {ref.snapshot[:12]}  {ref.kind:<7} entry {ref.entry or '-'}  session {ref.session}"
        )
    for item in report.leftovers:
        lines.append(
            f"leftover     {item.path} ({item.what}, {_mib(item.bytes)}, {item.age_s:.0f} s old)"
            + (
                ": rewind sweep removes it"
                if item.removable
                else ": not removed (git's own; git gc removes it once old enough)"
                if item.what == "git temporary file"
                else ": rewind sweep removes it once its owner is gone"
            )
        )
    dropped = {r.snapshot for r in report.references if r.state == "dropped"}
    if dropped:
        lines.append(
            f"{len(dropped)} referenced snapshots were dropped by retention and await git gc"
        )
    if report.missing:
        lines.append(
            f"{len({r.snapshot for r in report.missing})} referenced snapshots are gone (pruned); "
            "those rewind points are skipped"
        )
    return "\n".join(lines)


def _usage_text(report: DoctorReport) -> str:
    """The store's disk use: exact, an earlier state's figures ("about", and when), or none."""
    from ledger.doctor import USAGE_BUDGET_S

    usage = report.usage
    if usage is None:
        return (
            f"disk use not measured (no figures cached, and the walk of the store did not end "
            f"within {USAGE_BUDGET_S:g} s: 'rewind doctor --exact' measures it and keeps it until "
            "the store changes), so how many of them loose is not known"
        )
    about = "" if usage.exact else "about "
    figures = (
        f"{about}{_mib(usage.bytes)} kept alive by the store, {about}{_mib(usage.exclusive_bytes)} "
        f"by nothing else; {about}{usage.loose_ours} of them loose"
    )
    if usage.exact:
        return figures
    age = max(0.0, time.time() - usage.measured_s)
    when = f"{age / 3600:.1f} h" if age >= 3600 else f"{age / 60:.0f} min"
    head = f" at store head {usage.head[:12]}" if usage.head else ""
    return (
        f"{figures} (measured {when} ago{head}; the store changed since and a new walk takes over "
        f"{USAGE_BUDGET_S:g} s: 'rewind doctor --exact')"
    )


def _retention_lines(retention: dict[str, object] | None) -> list[str]:
    if retention is None:
        return []
    if not retention.get("on"):
        return ["retention    off (rewind.retention: false): every snapshot is kept"]
    policy = (
        "default: 30 days, labeled entries pinned"
        if retention.get("default")
        else "rewind.retention"
    )
    if "error" in retention:
        return [f"retention    {policy}; preview failed: {retention['error']}"]
    freed = retention.get("freedBytes")
    dropping = retention.get("wouldDrop", 0)
    return [
        f"retention    {policy}; a sweep now would drop {dropping} snapshots"
        + (f", about {_mib(freed)}" if isinstance(freed, int) and freed else "")
        + (
            " (what that frees not measured in time: 'rewind doctor --exact')"
            if freed is None and dropping
            else ""
        )
    ]


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB" if n >= 1024 * 1024 else f"{n / 1024:.1f} KiB"


_size = _mib


def is_shadow(repo: GitRepo) -> bool:
    from ledger.git.store.leftovers import is_shadow as shadow

    return shadow(repo)
