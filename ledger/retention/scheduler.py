"""When the engine sweeps: at session start, after 50 new snapshots, and at shutdown.

Why it exists: the reference runs retention at these three moments (docs/design.md#when-sweeps-run)
and a running agent must never wait for a sweep except at shutdown. This class is the engine's
:class:`~ledger.engine.engine.RetentionHooks`.

Contract:
- Every method is a no-op when ``settings.retention`` is absent (retention off), and none ever
  raises: failures become warnings in :meth:`drain_notices` (the reference's texts).
- ``on_session_start()`` starts a sweep in a background thread with the ``startupBudgetMs``
  budget and no gc. The session is read in the **calling** thread (a bridge host must not be
  called from another thread); the worker opens its own repository handle.
- ``on_snapshot_added(n)`` counts new snapshots; at 50 since the last sweep, a background sweep
  starts, unless one is running.
- Unlike the reference, no sweep runs ``git gc --auto``: gc rewrites ``packed-refs``, reflogs
  and packs of the user's repository, and we write nothing in ``.git`` but objects, our own
  files and our one ref. Instead, after a startup or 50-snapshot sweep, the same background
  thread runs :func:`ledger.git.store.upkeep.run_upkeep` when it is due: our loose objects packed once
  git's ``gc.auto`` estimate is exceeded; in a shadow repository, a repack and prune after a
  sweep dropped snapshots (docs/design.md#disk-upkeep). Every ``UPKEEP_CHECK_EVERY`` new
  snapshots the hook checks (a few ``listdir``) whether upkeep is due and no other upkeep runs
  and, if no sweep is running, starts it alone in the background. A shutdown sweep only marks a
  shadow's repack as due (the next session does it): Pi's exit never waits for a repack, and
  ``on_shutdown`` asks an upkeep in flight to stop at its next step.
- Packing does not depend on this class: the store starts the upkeep itself after any append
  that finds it due (:mod:`ledger.git.store.autoupkeep`), with retention off too and outside
  Pi; the checks here only add the post-sweep passes. Upkeeps are serialised by their own
  ``flock`` (:func:`ledger.git.store.upkeep.upkeep_lock`).
- ``on_shutdown()`` waits for a sweep in flight, then sweeps (in the calling thread, no budget)
  unless one already completed in this session with fewer than 50 new snapshots since (the
  reference's rule). A sweep that found an empty live set, failed or ran out of budget did not
  complete, and leaves the counter as it was.
- ``after_session=True`` (a print-mode session, ``pi -p``; docs/design.md#when-sweeps-run):
  no startup sweep (it would share the bridge's interpreter and the machine's cores with the
  run's captures; 50-snapshot sweeps run as usual), and ``on_shutdown()`` sweeps nothing when
  ``defer(session)`` agrees (always without ``defer``): it only marks the shutdown sweep as owed
  (``owed``, with the session read then, in the engine's thread), for whoever outlives the
  session to run once Pi no longer waits (:meth:`finish_owed` here, or the watcher the bridge
  starts for the later runs: :mod:`ledger.retention.after_session`). Where ``defer`` says no
  (nobody would run it in time), it sweeps then, as without ``after_session``.
- ``reports`` lists ``(reason, SweepReport)`` of every sweep that ran to the end; ``wait()``
  joins a sweep in flight; ``drain_notices()`` returns and clears ``(level, text)`` warnings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from ledger.clock import Clock
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import restore_open
from ledger.git.shadow.layout import reopen
from ledger.git.store.upkeep import (
    UpkeepReport,
    mark_pending,
    run_upkeep,
    upkeep_due,
    upkeep_running,
)
from ledger.retention.sweep import BudgetExceeded, SweepReport, policy_from, run_sweep
from ledger.session.model import Session
from ledger.settings import Settings

SWEEP_EVERY = 50
UPKEEP_CHECK_EVERY = 10
SweepStart = Session | Path | None
Source = Callable[[], SweepStart]
"""Returns the session to sweep from: an in-memory Session, a path, or None."""


class SweepScheduler:
    def __init__(
        self,
        repo: GitRepo,
        agent_dir: Path,
        settings: Settings,
        source: Source,
        *,
        background: bool = True,
        clock: Clock | None = None,
        after_session: bool = False,
        defer: Callable[[SweepStart], bool] | None = None,
    ) -> None:
        """``repo``: the repository (the worker opens its own handle on ``repo.root``);
        ``agent_dir``: where ``sessions/`` lives (``repo-sessions`` scans); ``settings``: a
        :class:`~ledger.settings.Settings` (retention off when ``settings.retention`` is None);
        ``source``: returns the current session (a Session, a path, or None), called in the
        engine's thread; ``background``: run startup and 50-snapshot sweeps in a thread;
        ``clock``: the time the plan ages references against; ``after_session``: no startup
        sweep, and the shutdown sweep left owed when ``defer`` (given the session) agrees (see
        the module's docstring)."""
        self.root = repo.root
        self.git_dir = repo.git_dir
        self.clock = clock
        self.agent_dir = agent_dir
        self.settings = settings
        self.source = source
        self.background = background
        self.after_session = after_session
        self.defer = defer
        self.owed: SweepStart | Literal[False] = False
        """The session to run the owed shutdown sweep from (``after_session``); False: none
        owed."""
        self.new_snapshots = 0
        self.completed = False
        self.reports: list[tuple[str, SweepReport]] = []
        self.upkeeps: list[tuple[str, UpkeepReport]] = []
        self._since_check = 0
        self._stopping = threading.Event()
        self._notices: list[tuple[str, str]] = []
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.settings.retention is not None

    def drain_notices(self) -> list[tuple[str, str]]:
        with self._lock:
            notices, self._notices = self._notices, []
        return notices

    # --- the engine's hooks -------------------------------------------------------------------

    def on_session_start(self) -> None:
        if self.enabled and not self.after_session:
            self._start("startup")

    def on_snapshot_added(self, count: int) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.new_snapshots += count
            self._since_check += count
            check = self._since_check >= UPKEEP_CHECK_EVERY
            if check:
                self._since_check = 0
        if self.new_snapshots >= SWEEP_EVERY and not self.running:
            self._start("new-snapshots")
        elif check and not self.running and self._upkeep_due():
            self._start("upkeep")

    def on_shutdown(self) -> None:
        if not self.enabled:
            return
        self._stopping.set()  # an upkeep in flight stops at its next step
        self.wait()
        if self.completed and self.new_snapshots < SWEEP_EVERY:
            return
        session = self._session()  # here, in the engine's thread (a bridge host's calls)
        if self.after_session and self._deferred(session):
            self.owed = session
            return
        self._sweep("shutdown", session)

    def _deferred(self, session: SweepStart) -> bool:
        """Whether the shutdown sweep of ``session`` is left owed (``after_session``); a
        ``defer`` that fails says no: the sweep then runs now, as it always did."""
        if self.defer is None:
            return True
        try:
            return self.defer(session)
        except Exception:
            return False

    def finish_owed(self) -> None:
        """Run the shutdown sweep :meth:`on_shutdown` left owed (``after_session``), here and
        now; nothing if none is owed (or it was run already)."""
        owed, self.owed = self.owed, False
        if owed is not False:
            self._sweep("shutdown", owed)

    # --- running ------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _session(self) -> SweepStart:
        try:
            return self.source()
        except Exception as exc:
            self._note("warning", f"Rewind retention could not read the session: {exc}")
            return None

    def _start(self, reason: str) -> None:
        if self.running:
            return
        session = self._session() if reason != "upkeep" else None
        if not self.background:
            self._sweep(reason, session)
            return
        thread = threading.Thread(
            target=self._sweep, args=(reason, session), name=f"rewind-sweep-{reason}", daemon=True
        )
        try:
            thread.start()
        except RuntimeError as exc:  # no thread to be had: skip this sweep, never break the agent
            self._note("warning", f"Rewind retention sweep not started: {exc}")
            return
        self._thread = thread

    def _upkeep_due(self) -> bool:
        try:
            repo = reopen(self.root, self.git_dir)
            # One the store started after an append is at work: nothing for a thread to wait on.
            return upkeep_due(repo) and not upkeep_running(repo)
        except Exception:
            return False  # a repository that cannot be opened now: the next check retries

    def _upkeep(self, reason: str, repo: GitRepo | None = None) -> None:
        """Give space back when due (never raises; a failure is a warning)."""
        try:
            repo = repo or reopen(self.root, self.git_dir)
            report = run_upkeep(
                repo, restore_open=lambda: restore_open(repo), stop=self._stopping.is_set
            )
        except Exception as exc:
            self._note("warning", f"Rewind upkeep failed: {exc}")
            return
        with self._lock:
            self.upkeeps.append((reason, report))

    def _sweep(self, reason: str, session: SweepStart) -> None:
        retention = self.settings.retention
        if retention is None:
            return
        if reason == "upkeep":
            self._upkeep(reason)
            return
        try:
            # Our own handle (pygit2 objects stay per thread); a shadow repository reopens too.
            repo = reopen(self.root, self.git_dir)
            report = run_sweep(
                repo,
                session,
                self.agent_dir,
                scan_mode=retention.scan_mode,
                policy=policy_from(self.settings),
                budget_ms=retention.startup_budget_ms if reason == "startup" else None,
                clock=self.clock,
            )
        except BudgetExceeded as exc:
            self._note("warning", str(exc))
            return
        except Exception as exc:
            label = "startup sweep" if reason == "startup" else "sweep"
            self._note("warning", f"Rewind retention {label} failed: {exc}")
            return
        with self._lock:
            self.reports.append((reason, report))
            if not report.preserved:  # an empty live set: nothing changed, counters unchanged
                self.new_snapshots = 0
                self.completed = True
        if report.rewritten:
            mark_pending(repo)
        if reason != "shutdown" and not self._stopping.is_set():
            self._upkeep(reason, repo)

    def _note(self, level: str, text: str) -> None:
        with self._lock:
            self._notices.append((level, text))
