"""What the engine hands back and keeps per prompt: event results, the prompt collector, and the
retention hooks it calls.

Why it exists: these values are shared by the engine (:mod:`ledger.engine.engine`), the bridge's
handlers and the CLI; keeping them apart keeps the engine module about the engine's decisions.
Invariants: plain values, no I/O.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from ledger.engine import messages as M
from ledger.plain import Plain


class RetentionHooks(Protocol):
    """When the engine asks for retention sweeps (docs/design.md#when-sweeps-run): never raises."""

    def on_session_start(self) -> None: ...

    def on_snapshot_added(self, count: int) -> None: ...

    def on_shutdown(self) -> None: ...


SessionStartReason = Literal["startup", "resume", "new", "fork", "reload"]
FORK_PREFERENCE_SOURCES = frozenset({"fork-from-first"})
CHECKPOINT_SOURCES = frozenset({"pi-custom-compaction"})


class EventResult(Plain):
    """What a handler tells the host: notices to show, and for ``before_*`` events the answer."""

    __slots__ = (
        "cancel",
        "data",
        "notices",
        "panel",
        "panel_is_problem",
        "skip_conversation_restore",
        "status_note",
    )
    notices: list[M.Notice]
    cancel: bool
    skip_conversation_restore: bool
    panel: list[str] | None
    """What a rewind action did, for a host to keep on screen until the next prompt (Pi redraws
    its chat right after ``/tree`` and ``/fork``, so a notice alone is not seen). ``None`` = leave
    the panel as it is, ``[]`` = clear it."""
    panel_is_problem: bool
    """The panel reports an error or a refusal (shown even with ``silentCheckpoints``)."""
    status_note: str | None
    """A short note for the host's status line until the next prompt (an info: dropped with
    ``silentCheckpoints``), e.g. that the pre-prompt snapshot keeps changes made outside the
    agent (docs/design.md#outside-changes)."""
    data: dict[str, Any] | None
    """For a query (``/rewind``'s list, preview, diff): the answer, as plain values."""

    def __init__(
        self,
        notices: list[M.Notice] | None = None,
        cancel: bool = False,
        skip_conversation_restore: bool = False,
        panel: list[str] | None = None,
        panel_is_problem: bool = False,
        status_note: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        self.notices = [] if notices is None else notices
        self.cancel = cancel
        self.skip_conversation_restore = skip_conversation_restore
        self.panel = panel
        self.panel_is_problem = panel_is_problem
        self.status_note = status_note
        self.data = data

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


class Collector(Plain):
    """The snapshots of one prompt, from ``turn_start`` to ``agent_end``."""

    __slots__ = ("kept", "leaf_at_start", "pairs", "pending_user_commit")
    leaf_at_start: str | None
    pending_user_commit: str | None
    pairs: list[tuple[str, str]]
    kept: set[str]
    """Entries a checkpoint bound during this prompt (the agent's ``rewind`` tool): their turn
    does not rebind them to its post-turn snapshot."""

    def __init__(
        self,
        leaf_at_start: str | None,
        pending_user_commit: str | None,
        pairs: list[tuple[str, str]] | None = None,
        kept: set[str] | None = None,
    ) -> None:
        self.leaf_at_start = leaf_at_start
        self.pending_user_commit = pending_user_commit
        self.pairs = [] if pairs is None else pairs
        self.kept = set() if kept is None else kept

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
