"""A bridge's captures answered by the watcher of its repository (``rewind serve --watch``).

Why it exists: every ``pi -p`` run starts a new bridge, whose own change feed is never ready in
time (the watcher's walk of a 100k-file tree outlasts a scripted prompt), so each of its captures
was a full scan (~0.2 s at 100k files, docs/capture.md#shared-watcher). A watcher that outlives
the runs — started by the user, or by the bridge itself with ``rewind.snapshot.autoWatchSeconds``
— has a warm feed: the bridge sends it each capture over the snapshot socket
(:mod:`ledger.bridge.snapshot_socket`, op ``capture``) and gets the tree back in O(changed). It
commits the tree itself, as after a local capture.

Invariants:
- Delegation never changes the answer: the watcher captures the same work tree and git dir, in
  the same git environment (it declines otherwise), with the bridge's own capture settings.
- Never waits for a watcher: while the one it started is coming up, captures are local full
  scans (what the bridge's own feed would give at that moment anyway).
- On any other failure (declined, broken answer, a watcher that died early) the bridge stops
  delegating for good and runs its own feed instead (``on_lost``): no flapping between the two.
  A watcher that ended because it was idle for ``autoWatchSeconds`` is started again.
- One instance per process, set once by ``rewind serve --stdio``, or by a one-shot command
  that opens a session's engine (:func:`for_command`) when a watcher serves its repository
  (:mod:`ledger.git.capture.scan` looks it up in ``sys.modules``, never imports it).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

# Not `from typing import TYPE_CHECKING` (start-up cost, see ledger/cli/context.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess

    from ledger.git.capture.scan import CaptureResult
    from ledger.settings import SnapshotSettings

EARLY_DEATH_S = 5.0
"""A watcher we started that ends sooner than this did not end because it was idle: it failed."""
STARTING_S = 30.0
"""A watcher we started that is alive but still not listening after this long is not used."""


class Delegation:
    """Where the captures of one repository go."""

    def __init__(
        self,
        root: Path,
        git_dir: Path,
        *,
        on_lost: Callable[[str], None],
        restart: Callable[[], subprocess.Popen[bytes] | None] | None = None,
        watcher: subprocess.Popen[bytes] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.git_dir = Path(os.path.realpath(git_dir))
        self.lost: str | None = None
        self._on_lost = on_lost
        self._restart = restart
        self._watcher = watcher
        self._clock = clock
        self._started_at = clock()
        self._guard = threading.Lock()

    def capture(self, root: Path, settings: SnapshotSettings) -> CaptureResult | None:
        """The watcher's capture of ``root``, or ``None``: capture locally (full scan)."""
        from ledger.bridge.snapshot_socket import capture_settings_fields, request_capture

        if self.lost is not None or Path(os.path.realpath(root)) != self.root:
            return None
        fields = capture_settings_fields(
            settings.max_untracked_file_bytes,
            settings.protected_dirs,
            settings.first_capture_max_files,
            settings.first_capture_max_bytes,
        )
        answer = request_capture(self.root, self.git_dir, fields)
        if isinstance(answer, dict):
            refused = answer.get("refused")
            if isinstance(refused, dict):
                # The watcher's capture refused what a local one would refuse too: say so, and
                # keep delegating (the service is fine).
                from ledger.errors import LedgerError

                raise LedgerError(str(refused.get("message")), hint=refused.get("hint"))
            return _result(answer)
        if answer == "absent" and self._coming_up():
            return None
        self._lose(answer)
        return None

    def _coming_up(self) -> bool:
        """Nobody listens: still starting (ours, alive), or ended idle (ours; start another)."""
        watcher = self._watcher
        if watcher is None:
            return False  # the user's watcher is gone: we do not start one behind their back
        if watcher.poll() is None:
            return self._clock() - self._started_at < STARTING_S
        ended_early = self._clock() - self._started_at < EARLY_DEATH_S
        if ended_early or watcher.returncode != 0 or self._restart is None:
            return False
        with self._guard:
            self._watcher = self._restart()
            self._started_at = self._clock()
        return self._watcher is not None

    def _lose(self, why: str) -> None:
        with self._guard:
            if self.lost is not None:
                return
            self.lost = why
        self._on_lost(why)


def _result(fields: dict[str, object]) -> CaptureResult:
    from ledger.git.capture.plan import SkippedPath
    from ledger.git.capture.scan import CaptureResult

    skipped = fields["skipped"]
    assert isinstance(skipped, list)
    updated, ms = fields["updated"], fields["ms"]
    assert isinstance(updated, int) and isinstance(ms, (int, float))
    return CaptureResult(
        tree=str(fields["tree"]),
        skipped=tuple(SkippedPath(s["path"], s["reason"], s.get("size")) for s in skipped),
        rebuilt=bool(fields["rebuilt"]),
        updated=updated,
        ms=float(ms),
    )


_current: Delegation | None = None


def install(delegation: Delegation | None) -> None:
    """Send this process's captures of ``delegation.root`` to its watcher (``None``: stop)."""
    global _current
    _current = delegation


def current() -> Delegation | None:
    return _current


def for_command(root: Path, git_dir: Path) -> Delegation | None:
    """A one-shot command's captures (``rewind restore``, ``undo``, ``diff``, ``status``, the
    plans behind them) asked of the repository's running watcher, as ``rewind snapshot`` asks
    it (docs/capture.md#served-commands): installed for this process and returned, or ``None``
    when captures stay local (``REWIND_SERVED=0``, or nobody serves ``(root, git_dir)``).
    Never a watcher started here, never a wait: a watcher that declines or is gone makes the
    command scan by itself, once (:class:`Delegation` stops asking after the first failure).
    Under the private index's lock a capture is never delegated
    (:meth:`ledger.git.capture.scan.Capturer.capture`): the restore then re-checks its plan's
    paths instead (:mod:`ledger.git.restore.recheck`)."""
    import sys

    from ledger.bridge.snapshot_socket import serving

    if os.environ.get("REWIND_SERVED", "1") == "0" or "ledger.git.feed.service" in sys.modules:
        return None  # asked not to; or this process runs feeds (a watcher running the command)
    if not serving(root, git_dir):
        return None
    delegation = Delegation(root, git_dir, on_lost=lambda _why: None)
    install(delegation)
    return delegation


__all__ = ["EARLY_DEATH_S", "STARTING_S", "Delegation", "current", "for_command", "install"]
