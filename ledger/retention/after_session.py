"""A print-mode session's shutdown sweep, run once the session is over and off Pi's path.

Why it exists: Pi waits for a ``pi -p`` run's bridge to answer ``session_shutdown`` and then to
exit; a shutdown sweep there (it reads every snapshot commit of the store: ~30 ms at 600
snapshots, growing with the store) was on the path of every first ``pi -p`` of the day (issue
34). A print-mode scheduler (:class:`~ledger.retention.scheduler.SweepScheduler` with
``after_session``) starts no startup sweep and leaves that shutdown sweep owed when someone will
run it once Pi no longer waits: the watcher a first run's bridge starts anyway for the later runs
(``rewind serve --watch --sweep-session FILE``), which sweeps from the session file once Pi has
exited, or, for a session the watcher hosts, its session thread once the connection is closed.
Where nobody would (no watcher to start, the file does not hold the session), the sweep runs in
the ``session_shutdown`` answer, as it always did (docs/design.md#when-sweeps-run).

Invariants:
- The sweep is the one the bridge would have run: same repository, agent dir and settings
  (the watcher reads them as the bridge did: same environment, same files), same session, the
  same :meth:`SweepScheduler.on_shutdown` code. It only changes *when*.
- Handed off only when the session file holds the session the bridge saw (:func:`holds_session`:
  it names the last entry the bridge mirrored, found in the file's last :data:`TAIL_BYTES`, a
  bounded read), decided in the shutdown answer. Otherwise (no file: ``--no-session``; Pi still
  buffering its first entries) the answer sweeps from the bridge's mirror, as before. Even so a
  record the file lacked could not cost a recent snapshot: a sweep keeps every stored snapshot
  no ledger names yet for a day (``ledger.retention.plan``, rule 5).
- A sweep is never left to a process Pi may kill: a bridge's own exit is given 5 s by the
  extension, so the bridge runs an owed sweep only when the watcher it meant to hand it to
  could not be started after all (a rare race; the sweep is then cut at worst, as a crash
  would cut it, and the next one does the work).
- Never raises: a sweep that fails is a warning nobody reads in print mode (there is no UI);
  the next session's sweep does the work.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from ledger.retention.scheduler import SweepScheduler, SweepStart
from ledger.session.model import Session

TAIL_BYTES = 1 << 20
"""How much of a session file's end is read to find the last entry the bridge mirrored."""

SESSION_OPTION = "--sweep-session"
AGENT_DIR_OPTION = "--sweep-agent-dir"


class OwedSweep:
    """The shutdown sweep a print-mode session left owed, with where its session is on disk."""

    __slots__ = ("scheduler", "session_file")

    def __init__(self, scheduler: SweepScheduler, session_file: Path | None) -> None:
        self.scheduler = scheduler
        self.session_file = session_file

    def hand_off_args(self) -> list[str] | None:
        """The watcher's options that make it run this sweep from the session file, or None
        when there is no file (only this process can run it, from its mirror)."""
        if self.session_file is None:
            return None
        return [
            SESSION_OPTION,
            str(self.session_file),
            AGENT_DIR_OPTION,
            str(self.scheduler.agent_dir),
        ]

    def run(self) -> None:
        """Sweep here, now (never raises)."""
        with contextlib.suppress(Exception):
            self.scheduler.finish_owed()


def owed_sweep(scheduler: SweepScheduler | None, session_file: Path | None) -> OwedSweep | None:
    """The sweep ``scheduler`` left owed at shutdown, if any (called in the engine's thread)."""
    if scheduler is None or scheduler.owed is False:
        return None
    return OwedSweep(scheduler, session_file)


def holds_session(session: SweepStart) -> bool:
    """Whether ``session`` (a mirrored :class:`~ledger.session.model.Session`) is on disk as
    the bridge saw it: its file names its last entry, found in the file's last TAIL_BYTES."""
    if not isinstance(session, Session) or session.path is None or not session.entries:
        return False
    entry_id = session.entries[-1].id
    if not isinstance(entry_id, str):
        return False
    try:
        with open(session.path, "rb") as file:
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
    "holds_session",
    "owed_sweep",
    "sweep_in_background",
]
