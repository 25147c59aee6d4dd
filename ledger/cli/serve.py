"""``rewind serve --stdio``: run the engine behind the bridge protocol for a running agent.

Why it exists: Pi's extension starts this process once per session and talks to it over
stdin/stdout (README, "Running inside Pi"; ``schemas/bridge.schema.json``). Thin: the work is
:class:`ledger.bridge.server.BridgeServer`.

This process lives as long as the session, so its captures touch only the paths changed since
the previous one: they go to the repository's shared watcher when one runs (or is started with
``rewind.snapshot.autoWatchSeconds``; :mod:`ledger.bridge.delegate`), else to this process's own
change feed (:mod:`ledger.git.feed.service`), whose watcher starts in the background once the
first event is answered, off the first prompt's path (and off that answer's), when Pi has a UI;
a ``pi -p`` bridge walks from its start and takes its first status right after the walk
(:mod:`ledger.bridge.print_mode`). Where the captures go is decided once that first
event is answered too, before the next one is read: the decision loads the git layer and
pygit2, which the first ``session_start`` answer does without (ledger/bridge/quick_start.py).
``REWIND_FEED=0`` turns both off (every capture scans fully); ``REWIND_SERVED=0`` keeps the
captures in this process; ``REWIND_FEED_VERIFY=0`` skips the idle-time verification against
full scans (docs/capture.md#shared-watcher).

``rewind serve --watch`` is that watcher. It also hosts whole Pi sessions on
``<git-dir>/pi-rewind/bridge.sock`` (:mod:`ledger.bridge.hosted`), so that a Pi whose
environment is its own starts no bridge process at all (``REWIND_HOSTED=0``: it does not).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from ledger.cli.context import CliContext
from ledger.loaded_modules import finished

SWITCH_INTERVAL_S = 0.0002
"""The GIL switch interval of a ``rewind serve`` process (CPython's default: 5 ms)."""

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from threading import Thread

    from ledger.bridge.hosted import HostedSessions
    from ledger.bridge.print_mode import EarlyWalk
    from ledger.bridge.protocol import EventMessage
    from ledger.bridge.snapshot_socket import SnapshotService
    from ledger.git.repo import GitRepo
    from ledger.retention.after_session import OwedSweep


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
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--stdio",
        action="store_true",
        help="speak the protocol on stdin/stdout (how Pi's extension runs it)",
    )
    mode.add_argument(
        "--watch",
        action="store_true",
        help="no agent: only watch the repository and answer 'rewind snapshot' and the "
        "captures of Pi's bridges from other processes in O(changed), and host the Pi "
        "sessions that connect in this environment, until interrupted",
    )
    mode.add_argument(
        "--status",
        action="store_true",
        help="say which process serves this repository (a watcher, or a Pi session's bridge), "
        "since when, whether it hosts Pi sessions, and its change feed's state",
    )
    mode.add_argument(
        "--stop",
        action="store_true",
        help="stop this repository's watcher (never a Pi session's bridge)",
    )
    parser.add_argument(
        "--idle-exit",
        metavar="SECONDS",
        type=float,
        default=0.0,
        help="with --watch: exit after this long without a snapshot or capture request "
        "(default: never)",
    )
    # With --watch, from a pi -p bridge that starts the watcher as it ends: that run's owed
    # shutdown sweep, from its session file (ledger/retention/after_session.py). Not for users.
    parser.add_argument("--sweep-session", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--sweep-agent-dir", type=Path, default=None, help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    import gc

    gc.enable()  # main() pauses the collector for short commands; this process lives long
    # Latency over throughput: this process runs background threads (the watcher's event
    # reader, the idle-time verifier's full scan) beside the thread that answers a prompt's
    # capture. With CPython's default 5 ms switch interval, each time the capture thread comes
    # back from I/O (socket, pipes to git) it may wait up to 5 ms for a busy background thread
    # to hand over the GIL. Measured, a fed capture of one file during a verification (before
    # the verifier's git ran at idle priority): median 5.4 ms with this interval, 6.7 ms with
    # the default, 3.9 ms with no verification (docs/capture.md#verification).
    if args.status or args.stop:
        return _status(args, ctx)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if args.watch:
        return _watch(args, ctx)
    from ledger.bridge.server import serve_stdio

    # Taken out of the environment: never inherited by what this bridge starts.
    no_ui = os.environ.pop("REWIND_BRIDGE_NO_UI", "") == "1"
    use_feed = os.environ.get("REWIND_FEED", "1") != "0"
    service: list[SnapshotService] = []
    setup: _OwnFeed | None = None
    if use_feed:
        start = ctx.path(ctx.repo_option) if ctx.repo_option else ctx.cwd
        setup = _OwnFeed(start, service, ctx)
        if no_ui:
            # Print mode, as the extension says at spawn: the walk starts before the first
            # event is read (ledger/bridge/print_mode.py; Pi no longer waits for the answer).
            from ledger.bridge.print_mode import start_walk

            setup.early = start_walk(start)
    option = ctx.agent_dir_option
    owed: list[OwedSweep] = []
    try:
        code = serve_stdio(
            Path(option) if option else None,
            on_first_event=setup.first_event if setup is not None else None,
            owed=owed,
            hand_off=(lambda: setup.watcher_later is not None) if setup is not None else None,
        )
    finally:
        # A pi -p run's shutdown sweep owed to the watcher below (ledger/retention/after_session.py)
        sweep_args = owed[0].hand_off_args() if owed else None
        handed = False
        if setup is not None and setup.watcher_later is not None:
            # A pi -p run's watcher, for the runs after it, starts once this run is over (also
            # when serving failed): started with the run, its imports, walk and first scan took
            # the 2 cores the run's captures and Pi needed (issue 34). Detached, not waited.
            started = _start_watcher_for_later_runs(*setup.watcher_later, sweep_args or [])
            handed = started and sweep_args is not None
        if owed and not handed:
            owed[0].run()  # the watcher could not be started after all: here, now
        # Only what was set up: the first event (its answer, then the captures' set-up) may
        # never have come, and importing the feed just to say so would load pygit2 at exit.
        delegate = finished("ledger.bridge.delegate")
        if delegate is not None:
            delegate.install(None)
        for running in service:
            running.close()
        if finished("ledger.git.feed.inotify") is not None:
            # Pi waits for this exit: the watches' teardown (~25 ms at 10k directories) is left
            # to a reaper that outlives this process (ledger/git/feed/teardown.py).
            from ledger.git.feed.teardown import hand_off

            hand_off()
        if setup is not None and setup.early is not None:
            setup.early.drop()  # a walk started at spawn that the set-up never took
        feed = finished("ledger.git.feed.service")
        # finished(): a print-mode bridge loads this module in a thread (print_mode_feed),
        # which a very short session may end in the middle of; nothing is adopted then.
        disable = getattr(feed, "disable", None)
        if disable is not None:
            disable()  # joins the watcher and verifier, writes feed-status.json
    # Everything is finished and written (a sweep in flight was awaited by serve_stdio): Pi
    # waits for this process to end, which main() ends without the interpreter's teardown.
    return code


class _OwnFeed:
    """This bridge's own change feed, started once it is wanted *and* Pi has a UI.

    Print mode (``pi -p``, ``hasUI`` false in the first event) gets no snapshot service: its
    run has no idle time for one. It gets a feed of its own whose walk starts at once and whose
    first full scan waits for that walk, so that the turns' captures are fed
    (:mod:`ledger.bridge.print_mode`). Interactive and RPC sessions (``hasUI`` true) start it
    at their first event, right after the bridge starts, still well before the first prompt.
    """

    def __init__(self, start: Path, service: list[SnapshotService], ctx: CliContext) -> None:
        import threading

        self.start = start
        self.service = service
        self.ctx = ctx
        self._guard = threading.Lock()
        self._wanted = False
        self._has_ui: bool | None = None  # unknown until the first event
        self._started = False
        self.watcher_later: tuple[Path, int] | None = None
        """Print mode: the repository's watcher to start when this bridge ends (``(root,
        autoWatchSeconds)``, :func:`_start_watcher_for_later_runs`)."""
        self.early: EarlyWalk | None = None
        """A walk started at spawn (``REWIND_BRIDGE_NO_UI``), for the first event's set-up."""

    def want(self, _why: str = "") -> None:
        """The bridge captures by itself (no watcher to send captures to, or it was lost)."""
        with self._guard:
            self._wanted = True
        self._maybe_start()

    def first_event(self, first: EventMessage) -> None:
        """Once the first event is answered: where the captures go, then the feed if wanted.
        Not before: deciding loads the feed, the git layer and pygit2 (~0.15 s), which Pi's
        first ``session_start`` answer must not wait for (ledger/bridge/quick_start.py); the
        first capture comes with a later event, so it still finds the decision made."""
        # A speed-up only, and after the answer: a failure here leaves the captures to the
        # ordinary full scan instead of ending a bridge that Pi already counts on.
        with contextlib.suppress(Exception):
            _set_up_captures(self.start, self.ctx, self, print_mode=not first.ctx.has_ui)
            self.learn_ui(first)
        if self.early is not None:
            self.early.drop()  # not taken: a UI after all, or a watcher serves the repository

    def learn_ui(self, first: EventMessage) -> None:
        with self._guard:
            self._has_ui = first.ctx.has_ui
        self._maybe_start()

    def _maybe_start(self) -> None:
        with self._guard:
            if self._started or not self._wanted or not self._has_ui:
                return
            self._started = True
        from ledger.git.feed import service as feed

        feed.enable(verify=os.environ.get("REWIND_FEED_VERIFY", "1") != "0")
        feed.start_for(self.start)
        _serve_snapshots_in_background(self.start, self.service)


def _set_up_captures(
    start: Path, ctx: CliContext, setup: _OwnFeed, *, print_mode: bool = False
) -> None:
    """In the background, off the first prompt's path: send the captures to the watcher of the
    repository when one runs (or, with ``rewind.snapshot.autoWatchSeconds``, start one and send
    them there; docs/capture.md#shared-watcher); else run this bridge's own change feed and
    answer other processes' ``rewind snapshot`` from it (:class:`_OwnFeed`: not in print mode).
    No error if there is no repository."""
    import contextlib
    import threading

    from ledger.bridge import delegate
    from ledger.bridge.snapshot_socket import find_repository, serving, supported

    own_feed = setup.want

    allowed = os.environ.get("REWIND_SERVED", "1") != "0" and supported()
    located = find_repository(start)  # a few stats; None where the environment redirects git
    found = located if allowed else None
    # A watcher already serves this repository (the user's `rewind serve --watch`, or one an
    # earlier bridge started): decided here, right after the first event's answer and before
    # the next event is read, so that the very first capture goes there. One connect, well
    # under a millisecond.
    if found is not None and serving(*found):
        delegate.install(delegate.Delegation(*found, on_lost=own_feed))
        return

    seconds = 0
    if found is not None:
        with contextlib.suppress(Exception):
            seconds = _auto_watch_seconds(found[0], ctx)
    if print_mode and located is not None:
        from ledger.bridge.print_mode import print_mode_feed

        print_mode_feed(start, *located, setup.early)
        if found is not None and seconds > 0:
            setup.watcher_later = (found[0], seconds)  # started at the end: see run()
        return
    if found is None or seconds <= 0:
        # No watcher to start: this bridge's own feed is wanted now, in this thread, so that it
        # starts (with a UI) right after the first answer and before the next event is read,
        # as when this ran before the first event; never in the middle of a prompt's capture.
        own_feed()
        return

    def run() -> None:
        with contextlib.suppress(Exception):
            if _start_shared_watcher(found, seconds, own_feed):
                return
        own_feed()

    threading.Thread(target=run, name="rewind-capture-setup", daemon=True).start()


def _start_watcher_for_later_runs(root: Path, seconds: int, options: list[str]) -> bool:
    """Start the repository's watcher (``autoWatchSeconds``) for the runs after this one, with
    ``options`` (the run's owed sweep); this run's captures stay with its own feed (a new
    watcher's first capture scans fully). True when a watcher process was started."""
    from ledger.bridge.snapshot_socket import start_watcher

    with contextlib.suppress(Exception):
        return start_watcher(root, seconds, options) is not None
    return False


def _auto_watch_seconds(root: Path, ctx: CliContext) -> int:
    """``rewind.snapshot.autoWatchSeconds`` for ``root`` (0: start no watcher)."""
    from ledger.settings import load_settings

    return load_settings(ctx.agent_dir(), root)[0].snapshot.auto_watch_seconds


def _start_shared_watcher(
    found: tuple[Path, Path], seconds: int, own_feed: Callable[[str], None]
) -> bool:
    """With ``rewind.snapshot.autoWatchSeconds``: start the repository's watcher and send this
    bridge's captures there (:mod:`ledger.bridge.delegate`); ``False`` when not set up."""
    from ledger.bridge import delegate
    from ledger.bridge.snapshot_socket import start_watcher

    root, git_dir = found
    watcher = start_watcher(root, seconds)
    if watcher is None:
        return False
    delegate.install(
        delegate.Delegation(
            root,
            git_dir,
            on_lost=own_feed,
            watcher=watcher,
            restart=lambda: start_watcher(root, seconds),
        )
    )
    return True


def _serve_snapshots_in_background(start: Path, out: list[SnapshotService]) -> None:
    """Answer other processes' ``rewind snapshot`` from this bridge's feed (no error if there
    is no repository, or another bridge of the same repository already answers)."""
    import contextlib
    import threading

    def run() -> None:
        from ledger.bridge.snapshot_socket import SnapshotService
        from ledger.git.repo import GitRepo

        with contextlib.suppress(Exception):
            repo = GitRepo.discover(start)
            service = SnapshotService(repo.root, repo.git_dir)
            if service.start():
                out.append(service)

    threading.Thread(target=run, name="rewind-snapshot-socket-start", daemon=True).start()


def _status(args: argparse.Namespace, ctx: CliContext) -> int:
    """``--status`` and ``--stop`` (docs/capture.md#shared-watcher)."""
    import signal
    import time

    from ledger.errors import LedgerError
    from ledger.git.private import serving_pid

    repo = ctx.repo()
    from ledger.bridge.status import owned, server_info

    info = server_info(repo.root, repo.git_dir)
    pid = info["pid"]
    if args.stop and isinstance(pid, int) and pid:
        if info.get("kind") != "watcher":
            raise LedgerError(
                f"{repo.root} is served by the bridge of a running Pi session (pid {pid}), not "
                "by a watcher",
                hint="it ends with that session; nothing was stopped",
            )
        if not owned(pid):
            raise LedgerError(f"process {pid} is not yours", hint="nothing was stopped")
        os.kill(pid, signal.SIGTERM)  # the watcher ends its hosted sessions between events
        deadline = time.monotonic() + 30
        while serving_pid(repo.git_dir) == pid and time.monotonic() < deadline:
            time.sleep(0.05)
        stopped = serving_pid(repo.git_dir) != pid
        info["stopped"] = stopped
        ctx.emit(
            info,
            f"stopped the watcher of {repo.root} (pid {pid})"
            if stopped
            else f"the watcher of {repo.root} (pid {pid}) did not stop within 30 s",
        )
        return 0 if stopped else 1

    def text() -> str:
        if not pid and pid != 0:
            return (
                f"no watcher serves {repo.root}"
                + ("" if args.status else ": nothing to stop")
                + " (a Pi session's bridge starts one, with rewind.snapshot.autoWatchSeconds)"
            )
        kind = info.get("kind")
        who = (
            "a watcher"
            if kind == "watcher"
            else "the bridge of a Pi session"
            if kind == "bridge"
            else "a process"
        )
        lines = [f"{repo.root} is served by {who} (pid {pid}), since {info.get('since') or '?'}"]
        if kind == "watcher":
            lines.append("  hosts Pi sessions" if info.get("hosting") else "  hosts no Pi sessions")
        feed = info.get("feed")
        if isinstance(feed, dict) and feed.get("mode"):
            lines.append(f"  change feed: {feed['mode']}")
        return "\n".join(lines)

    ctx.emit(info, text)
    return 0


def _watch(args: argparse.Namespace, ctx: CliContext) -> int:
    _few_malloc_arenas()
    repo = ctx.repo()
    owed = _owed_sweep(args, repo.root, repo.git_dir)
    try:
        return _watch_repo(args, ctx, repo)
    finally:
        if owed is not None:
            owed.join()  # also when this watcher was refused: the sweep was the run's


def _owed_sweep(args: argparse.Namespace, root: Path, git_dir: Path) -> Thread | None:
    """The shutdown sweep of the pi -p run that started this watcher, in the background."""
    if args.sweep_session is None or args.sweep_agent_dir is None:
        return None
    from ledger.retention.after_session import sweep_in_background

    return sweep_in_background(root, git_dir, args.sweep_agent_dir, args.sweep_session)


def _watch_repo(args: argparse.Namespace, ctx: CliContext, repo: GitRepo) -> int:
    import signal
    import time

    from ledger.bridge.snapshot_socket import SnapshotService, supported
    from ledger.errors import WatchRefusedError
    from ledger.git.feed import service as feed
    from ledger.git.feed.inotify import trim_heap
    from ledger.git.shadow.layout import ShadowRepo

    if isinstance(repo, ShadowRepo) or not supported():
        # Without peer credentials no socket's client can be checked (ledger/facilities.py).
        why = (
            "a shadow repository is not watched"
            if isinstance(repo, ShadowRepo)
            else "this platform cannot check who connects to a socket (no SO_PEERCRED)"
        )
        raise WatchRefusedError(
            repo.root,
            why,
            hint="'rewind serve --watch' serves git repositories on Linux; "
            "'rewind snapshot' and Pi sessions work everywhere without it (each capture scans)",
        )
    feed.enable(verify=os.environ.get("REWIND_FEED_VERIFY", "1") != "0")
    # Takes the repository's serve lock (<git-dir>/pi-rewind/serve.lock): one server per
    # repository, and only this user can hold it (docs/capture.md#served-snapshots).
    service = SnapshotService(repo.root, repo.git_dir)
    if not service.start():
        feed.disable()
        reason, hint = service.refusal or ("cannot serve this repository's snapshots", "")
        raise WatchRefusedError(repo.root, reason, hint=hint)
    feed.feed_for(repo)  # the watcher's walk starts now
    hosted: HostedSessions | None = None
    not_hosting = ""
    if os.environ.get("REWIND_HOSTED", "1") != "0":
        from ledger.bridge.hosted import HostedSessions

        # We hold the serve lock; a real repository (a shadow is refused above).
        hosted = HostedSessions(repo.root, repo.git_dir, common_dir=repo.common_dir)
        if not hosted.start():
            not_hosting = f"; not hosting Pi sessions: {hosted.refusal}"
            hosted = None

    if hosted is not None:
        _warm_up_commands(repo.root)

    def idle_s() -> float:
        return min(service.idle_s(), hosted.idle_s()) if hosted is not None else service.idle_s()

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C and SIGTERM end it cleanly (also when started in the background, where a shell
    # leaves SIGINT ignored).
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        # Inside the try: a stop right after this line (a test, a script) is a clean stop.
        ctx.stderr.write(
            f"rewind: watching {repo.root}; 'rewind snapshot' is served from here{not_hosting}\n"
        )
        ctx.stderr.flush()
        answered, trimmed = 0, time.monotonic()
        while args.idle_exit <= 0 or idle_s() < args.idle_exit:
            time.sleep(min(1.0, args.idle_exit) if args.idle_exit > 0 else 1.0)
            # Once a minute at most, and only after requests were served: give the heap they
            # freed back to the system (trim_heap; the verifier and hosted sessions do it after
            # their own bursts).
            if service.served + service.captured != answered and time.monotonic() > trimmed + 60:
                answered, trimmed = service.served + service.captured, time.monotonic()
                trim_heap()
    except KeyboardInterrupt:
        pass
    finally:
        if hosted is not None:
            hosted.close()  # each session ends after its event in flight
        service.close()
        feed.disable()
    declined = ", ".join(f"{why}: {n}" for why, n in sorted(service.declined.items()))
    ctx.stderr.write(
        f"rewind: served {service.served} snapshots and {service.captured} captures"
        + (f"; declined {declined} (those captured by themselves)" if declined else "")
        + "\n"
    )
    if not_hosting:
        ctx.stderr.write(f"rewind{not_hosting}\n")
    if hosted is not None:
        refused = ", ".join(f"{why}: {n}" for why, n in sorted(hosted.declined.items()))
        failed = ", ".join(f"{why}: {n}" for why, n in sorted(hosted.failed.items()))
        ctx.stderr.write(
            f"rewind: hosted {hosted.hosted} Pi sessions"
            + (f"; declined {refused} (those started their own bridge)" if refused else "")
            + (f"; ended by an error {failed}" if failed else "")
            + "\n"
        )
        if hosted.commands:  # one-shot commands run here (ledger.bridge.served_commands)
            ran = ", ".join(f"{why}: {n}" for why, n in sorted(hosted.commands.items()))
            ctx.stderr.write(f"rewind: commands asked of this watcher: {ran}\n")
    return 0


MALLOC_ARENAS = 2
"""glibc malloc arenas of a watcher (glibc's default: 8 per core)."""


def _warm_up_commands(root: Path) -> None:
    """Import what the commands this watcher runs for the command line need
    (:mod:`ledger.bridge.served_commands`), and load the authorship index they share, in the
    background, so that the first one asked does not pay ~0.2 s of imports and a whole read of
    the index that the later ones never see. Imports and that one shared reader only."""
    import threading

    def imports() -> None:
        import importlib

        from ledger.engine.authorship_log import AuthorshipLog
        from ledger.git.repo import GitRepo

        for module in (
            "ledger.cli.restore",
            "ledger.cli.status",
            "ledger.cli.sessions",
            "ledger.engine.engine",
            "ledger.engine.operations",
            "ledger.engine.history",
            "ledger.git.restore.run",
            "ledger.record_fast",
        ):
            try:
                importlib.import_module(module)
            except Exception:  # a command's own run reports any real problem
                return
        try:
            shared = AuthorshipLog(GitRepo.discover(root))  # this thread's own repository
            shared.share_loaded()
            shared.preload()
        except Exception:  # the first command loads it then, and reports any real problem
            return

    threading.Thread(target=imports, name="rewind-warm-up", daemon=True).start()


def _few_malloc_arenas() -> None:
    """Cap glibc's malloc arenas in the watcher, before its threads start.

    Each thread that allocates while another holds an arena gets an arena of its own, and the
    watcher runs many threads over its life (the change feed's reader and verifier, the
    snapshot service, one per hosted session). Memory freed in an arena stays in the process
    while anything above it in that arena is live, so the watcher's RSS crept up with the
    number of sessions it hosted, not with what it held (docs/soak.md#watcher-memory). Its
    threads take the GIL for nearly everything anyway, so two arenas cost no waiting. The same
    as ``MALLOC_ARENA_MAX=2``; a no-op without glibc."""
    import contextlib
    import ctypes

    m_arena_max = -8  # <malloc.h>
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(m_arena_max, MALLOC_ARENAS)
