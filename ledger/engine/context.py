"""What the engine's helper modules need of an engine, as a protocol (issue 33: "engine helpers
take the values they need, not the Engine").

Why it exists: :class:`ledger.engine.engine.Engine` imports its helpers (``changes_since``,
``neighbours``, ``ownership``, ``preview``, ``undo_target``, and :mod:`ledger.recovery`) to run
them; when they named ``Engine`` in their signatures, even under ``if TYPE_CHECKING:``, each
was in an import circle with the engine (tests/unit/test_import_graph.py counts those). They
annotate with :class:`EngineContext` instead, which ``Engine`` satisfies structurally: nothing
here imports ``ledger.engine.engine``, and nothing needs to subclass this.

Invariants: declares only what those helpers use today (add a member when a helper starts
using one); read-only properties for the state, so the helpers promise not to rebind it (the
``tree_diff_cache`` dict is filled in place); the imports below are type names only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ledger.clock import Clock
    from ledger.engine.authorship_log import AuthorshipLog
    from ledger.engine.filestate import FileState
    from ledger.engine.host import SessionHost
    from ledger.engine.results import Collector, EventResult, SessionStartReason
    from ledger.git.repo import GitRepo
    from ledger.git.restore.journal import Journal
    from ledger.git.restore.plan import RestorePlan
    from ledger.git.restore.run import RestoreOutcome
    from ledger.git.store.snapshot import LastExact
    from ledger.git.trees import Change
    from ledger.ledgerview import BranchState
    from ledger.lineage import LineageReader
    from ledger.session.model import Session
    from ledger.session.store import ParentRequest
    from ledger.settings import Settings


class EngineContext(Protocol):
    """One session's engine as its helpers see it (:class:`ledger.engine.engine.Engine`)."""

    @property
    def host(self) -> SessionHost: ...

    @property
    def repo(self) -> GitRepo: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def reader(self) -> LineageReader: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def last_exact(self) -> LastExact | None:
        """The latest exact snapshot, the dedup candidate of the next capture."""
        ...

    @property
    def tree_diff_cache(self) -> dict[tuple[str, str], list[Change]]:
        """Leaf changes between two recorded trees (:mod:`ledger.engine.ownership`)."""
        ...

    @property
    def authorship(self) -> AuthorshipLog:
        """The work tree's authorship index (:mod:`ledger.engine.authorship_log`)."""
        ...

    def session(self) -> Session: ...

    def branch_state(self) -> BranchState: ...

    def resolve_point(self, entry_id: str) -> str | None:
        """The entry's exact rewind point through lineage, if its commit still exists."""
        ...

    def pruned_point(self, entry_id: str) -> bool:
        """The entry was bound to a snapshot that retention pruned since."""
        ...

    def restore_files(
        self,
        commit: str,
        *,
        until_recorded: bool = False,
        recovering: Journal | None = None,
        planned: RestorePlan | None = None,
    ) -> RestoreOutcome:
        """Restore the work tree to ``commit`` (undo snapshot first, rolled back on failure)."""
        ...

    def append_op(
        self,
        *,
        current: str | None = None,
        undo: str | None = None,
        bindings: list[tuple[str, str]] | None = None,
        parent_id: ParentRequest = ...,
    ) -> str:
        """Append a ``rewind-op`` record; returns its id."""
        ...

    def this_prompt(self) -> Collector | None:
        """The running prompt's bindings, not recorded until its ``agent_end``."""
        ...

    def snapshot(self, *, agent_entry: str | None = None) -> str:
        """Capture the work tree as a ledger point; returns the snapshot commit."""
        ...

    def prepare_fork(self, state: FileState) -> str:
        """Hand ``state`` to the fork about to be made (a ``rewind-fork-pending`` record)."""
        ...

    def settle_fork(self, *, happened: bool) -> None:
        """The fork prepared by :meth:`prepare_fork` was made, or not."""
        ...

    def for_host(self, host: SessionHost) -> EngineContext:
        """An engine on another session (a fork's child) sharing this one's repository."""
        ...

    def session_start(
        self, reason: SessionStartReason = "startup", previous_session_file: str | None = None
    ) -> EventResult:
        """``session_start``: a fork's child imports its parent's hand-off."""
        ...
