"""What the engine hands back and keeps per prompt: event results, the prompt collector, and the
retention hooks it calls.

Why it exists: these values are shared by the engine (:mod:`ledger.engine.engine`), the bridge's
handlers and the CLI; keeping them apart keeps the engine module about the engine's decisions.
Invariants: plain values, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ledger.engine import messages as M


class RetentionHooks(Protocol):
    """When the engine asks for retention sweeps (docs/design.md#when-sweeps-run): never raises."""

    def on_session_start(self) -> None: ...

    def on_snapshot_added(self, count: int) -> None: ...

    def on_shutdown(self) -> None: ...


SessionStartReason = Literal["startup", "resume", "new", "fork", "reload"]
FORK_PREFERENCE_SOURCES = frozenset({"fork-from-first"})
CHECKPOINT_SOURCES = frozenset({"pi-custom-compaction"})


@dataclass
class EventResult:
    """What a handler tells the host: notices to show, and for ``before_*`` events the answer."""

    notices: list[M.Notice] = field(default_factory=list)
    cancel: bool = False
    skip_conversation_restore: bool = False
    panel: list[str] | None = None
    """What a rewind action did, for a host to keep on screen until the next prompt (Pi redraws
    its chat right after ``/tree`` and ``/fork``, so a notice alone is not seen). ``None`` = leave
    the panel as it is, ``[]`` = clear it."""
    panel_is_problem: bool = False
    """The panel reports an error or a refusal (shown even with ``silentCheckpoints``)."""
    status_note: str | None = None
    """A short note for the host's status line until the next prompt (an info: dropped with
    ``silentCheckpoints``), e.g. that the pre-prompt snapshot keeps changes made outside the
    agent (docs/design.md#outside-changes)."""
    data: dict[str, Any] | None = None
    """For a query (``/rewind``'s list, preview, diff): the answer, as plain values."""

    def info(self, text: str) -> None:
        self.notices.append(M.Notice("info", text))

    def warn(self, text: str) -> None:
        self.notices.append(M.Notice("warning", text))

    def error(self, text: str) -> None:
        self.notices.append(M.Notice("error", text))

    def show(self, *lines: str, problem: bool = False) -> None:
        self.panel = list(lines)
        self.panel_is_problem = problem

    def failed(self, text: str) -> None:
        """An error notice that also stays on screen."""
        self.error(text)
        self.show(f"Rewind: {text}", problem=True)


@dataclass
class Collector:
    """The snapshots of one prompt, from ``turn_start`` to ``agent_end``."""

    leaf_at_start: str | None
    pending_user_commit: str | None
    pairs: list[tuple[str, str]] = field(default_factory=list)
    kept: set[str] = field(default_factory=set)
    """Entries a checkpoint bound during this prompt (the agent's ``rewind`` tool): their turn
    does not rebind them to its post-turn snapshot."""

    @property
    def bound(self) -> set[str]:
        return {entry_id for entry_id, _ in self.pairs} | self.kept


__all__ = [
    "CHECKPOINT_SOURCES",
    "FORK_PREFERENCE_SOURCES",
    "Collector",
    "EventResult",
    "RetentionHooks",
    "SessionStartReason",
]
