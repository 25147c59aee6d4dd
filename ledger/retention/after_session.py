"""A print-mode session's shutdown sweep, run once the session is over and off Pi's path.

Why it exists: Pi waits for a ``pi -p`` run's bridge to answer ``session_shutdown`` and then to
exit; a shutdown sweep there (it reads every snapshot commit of the store: ~30 ms at 600
snapshots, growing with the store) was on the path of every first ``pi -p`` of the day (issue
34). A print-mode scheduler (:class:`~ledger.retention.scheduler.SweepScheduler` with
``after_session``) only marks that sweep as owed; the bridge then hands it to the watcher it
starts anyway for the later runs (``rewind serve --watch --sweep-session FILE``), which sweeps
from the session file once Pi has exited, or, where no watcher starts, runs it itself before it
exits, as before (docs/design.md#when-sweeps-run).

Invariants:
- The sweep is the one the bridge would have run: same repository, agent dir and settings
  (the watcher reads them as the bridge did: same environment, same files), same session, the
  same :meth:`SweepScheduler.on_shutdown` code. It only changes *when*.
- Handed off only when the session file holds the session the bridge saw: it names the last
  entry the bridge mirrored, found in the file's last :data:`TAIL_BYTES` (a bounded read).
  Otherwise (no file: ``--no-session``; Pi still buffering its first entries) the bridge sweeps
  from its in-memory mirror, as before. Even so a record the file lacked could not cost a
  recent snapshot: a sweep keeps every stored snapshot no ledger names yet for a day
  (``ledger.retention.plan``, rule 5).
- Never raises: a sweep that fails is a warning nobody reads in print mode (there is no UI);
  the next session's sweep does the work.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from ledger.retention.scheduler import SweepScheduler

TAIL_BYTES = 1 << 20
"""How much of a session file's end is read to find the last entry the bridge mirrored."""

SESSION_OPTION = "--sweep-session"
AGENT_DIR_OPTION = "--sweep-agent-dir"


class OwedSweep:
    """The shutdown sweep a print-mode session left owed, with where its session is on disk."""

    __slots__ = ("last_entry", "scheduler", "session_file")

    def __init__(
        self, scheduler: SweepScheduler, session_file: Path | None, last_entry: str | None
    ) -> None:
        self.scheduler = scheduler
        self.session_file = session_file
        self.last_entry = last_entry

    def hand_off_args(self) -> list[str] | None:
        """The watcher's options that make it run this sweep, or None when only this process
        can (the file does not hold the session the bridge saw)."""
        path = self.session_file
        if path is None or self.last_entry is None or not _names_entry(path, self.last_entry):
            return None
        return [SESSION_OPTION, str(path), AGENT_DIR_OPTION, str(self.scheduler.agent_dir)]

    def run(self) -> None:
        """Sweep here, now (never raises)."""
        with contextlib.suppress(Exception):
            self.scheduler.finish_owed()


def owed_sweep(scheduler: SweepScheduler | None, session_file: Path | None) -> OwedSweep | None:
    """The sweep ``scheduler`` left owed at shutdown, if any (called in the engine's thread)."""
    if scheduler is None or scheduler.owed is False:
        return None
    owed = scheduler.owed
    entries = getattr(owed, "entries", None)
    last = entries[-1].id if entries else None
    return OwedSweep(scheduler, session_file, last if isinstance(last, str) else None)


def _names_entry(path: Path, entry_id: str) -> bool:
    """Whether ``entry_id`` is an entry of ``path``: its id in the file's last TAIL_BYTES."""
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            file.seek(max(0, size - TAIL_BYTES))
            tail = file.read(TAIL_BYTES)
    except OSError:
        return False
    quoted = f'"{entry_id}"'.encode()
    return any(b'"id":' + gap + quoted in tail for gap in (b"", b" "))


def sweep_in_background(
    root: Path, git_dir: Path, agent_dir: Path, session_file: Path
) -> threading.Thread:
    """The watcher's side: run the sweep a print-mode bridge handed over, in a daemon thread
    (the caller joins it before it exits). Settings are read as the bridge read them."""

    def run() -> None:
        with contextlib.suppress(Exception):
            from ledger.git.shadow.layout import reopen
            from ledger.settings import load_settings

            settings = load_settings(agent_dir, root)[0]
            if settings.retention is None:
                return
            repo = reopen(root, git_dir)
            SweepScheduler(
                repo, agent_dir, settings, lambda: session_file, background=False
            ).on_shutdown()

    thread = threading.Thread(target=run, name="rewind-sweep-after-session", daemon=True)
    thread.start()
    return thread


__all__ = [
    "AGENT_DIR_OPTION",
    "SESSION_OPTION",
    "TAIL_BYTES",
    "OwedSweep",
    "owed_sweep",
    "sweep_in_background",
]
