"""What the bridge keeps between the events of one extension instance (one Pi session).

Why it exists apart from :mod:`ledger.bridge.dispatch`: the ``/rewind`` events
(:mod:`ledger.bridge.rewind_events`) read and set its ``intent``, and the dispatcher imports
them; with the state defined in the dispatcher the two modules imported each other (issue 33:
no import circles, type-only imports included). Both import it from here; the dispatcher
re-exports it.

Invariants: plain data, no behaviour; imports nothing of the bridge but its host. Plain
classes, not dataclasses: a spawned bridge creates them before it answers Pi's ``session_start``
and a dataclass costs ~1-1.5 ms to create (its methods are compiled at import), besides
``dataclasses`` with ``inspect`` (issue 34). Nothing compares or copies them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.bridge.host import BridgeHost
from ledger.session_names import TitleTracker

if TYPE_CHECKING:
    from ledger.engine.engine import Engine
    from ledger.git.locate import Located
    from ledger.presence import Announcement, Kind
    from ledger.retention.after_session import OwedSweep
    from ledger.retention.scheduler import SweepScheduler, SweepStart
    from ledger.settings import Settings
    from ledger.turngate import TurnGate


class BridgeState:
    """What the bridge keeps between the events of one extension instance (one Pi session)."""

    def __init__(
        self,
        host: BridgeHost,
        agent_dir: Path | None = None,
        *,
        kind: Kind = "bridge",
        pi_pid: int | None = None,
    ) -> None:
        self.host = host
        self.agent_dir = agent_dir
        self.engine: Engine | None = None
        """None before the first event, and outside a git repository (rewind is off)."""
        self.settings: Settings | None = None
        """Set once an engine was started (stays set while the engine is off outside a
        repository)."""
        self.scheduler: SweepScheduler | None = None
        """The retention sweeps of this session; None when retention is off or after shutdown."""
        self.passive = False
        """Another extension records this session: we record nothing and leave the footer
        alone."""
        self.status_note: str | None = None
        """Shown after the footer until the next prompt or rewind action
        (docs/design.md#outside-changes)."""
        self.intent: tuple[str, str] | None = None
        """``(action, entry)`` of a ``/rewind`` action the next ``/tree`` or ``/fork`` menu for
        that entry answers (:mod:`ledger.bridge.rewind_events`)."""
        self.kind: Kind = kind
        """How this session is served: a bridge process of its own, or hosted by the watcher."""
        self.presence: Announcement | None = None
        """This session's entry in the presence registry while its engine is on."""
        self.gate: TurnGate | None = None
        """The work tree's turn gate as this session holds it (:mod:`ledger.turngate`)."""
        self.pi_pid = pi_pid
        """The Pi process this session serves (the bridge's parent, or a hosted session's
        peer): the pid the listings show (docs/design.md#sessions-here)."""
        self.titles = TitleTracker()
        """This session's title for its presence entry, read from the entries appended since
        the last prompt only (ledger/session_names.py)."""
        self.overwrite_note: str | None = None
        """Another session's restore overwrote this session's agent's files: the footer says
        so until the next prompt starts (:mod:`ledger.bridge.overwrites`)."""
        self.restored_by: dict[str, str] = {}
        """Paths other sessions' restores changed since this session's last prompt → the
        restoring session's label: the next prompt's note does not call them the user's."""
        self.pending: PendingStart | None = None
        """A ``session_start`` answered without the engine (:mod:`ledger.bridge.quick_start`),
        whose engine :func:`ledger.bridge.dispatch.finish_start` starts right after the
        answer."""
        self.carried: list[dict[str, str]] = []
        """Notices that starting the engine after the answer produced: shown with the next
        event's answer."""
        self.sweeps_after_session = False
        """Set by a server that runs a print-mode session's shutdown sweep once the session is
        over (:mod:`ledger.retention.after_session`): such a session's sweeps then wait."""
        self.known_repo: Located | None = None
        """A hosted session's: git's answer for the watcher's work tree root, which the
        session opens without asking git again when its cwd is that root
        (:meth:`ledger.git.repo.GitRepo.discover`)."""
        self.print_mode = False
        """The last ``session_start`` came from a Pi without a UI (``pi -p``)."""
        self.owed_sweep: OwedSweep | None = None
        """The shutdown sweep the session left owed, for its server to run or hand off."""
        self.defer_sweep: Callable[[SweepStart], bool] | None = None
        """Asked in the shutdown answer whether the owed sweep will be run in time once the
        session is over (``None``: always; a bridge of its own: only when it can hand it to a
        watcher it starts, :func:`ledger.retention.after_session.holds_session`)."""

    @property
    def git_dir(self) -> Path | None:
        """The git directory of the session's repository while rewind is on (the engine's,
        or the one a pending start found); None when off."""
        if self.engine is not None:
            return self.engine.repo.git_dir
        return self.pending.git_dir if self.pending is not None else None


class PendingStart:
    """What the answer to a ``session_start`` found without the engine, to start it with
    (set once, never changed)."""

    __slots__ = ("agent_dir", "cwd", "git_dir", "previous", "reason", "root")

    def __init__(
        self,
        cwd: str | None,
        reason: str,
        previous: str | None,
        agent_dir: Path,
        root: Path,
        git_dir: Path,
    ) -> None:
        self.cwd = cwd
        self.reason = reason
        self.previous = previous
        self.agent_dir = agent_dir
        self.root = root
        self.git_dir = git_dir


class Outcome:
    """What one event produced, before it is put on the wire."""

    __slots__ = ("notices", "panel", "result")

    def __init__(
        self,
        result: dict[str, Any] | None = None,
        notices: list[dict[str, str]] | None = None,
        panel: list[str] | None = None,
    ) -> None:
        self.result: dict[str, Any] = {} if result is None else result
        self.notices: list[dict[str, str]] = [] if notices is None else notices
        self.panel = panel
