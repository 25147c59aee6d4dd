"""The rewind engine: an agent's lifecycle events in, ledger records and file restores out.

Why it exists: pi-rewind-hook v2's behaviour (docs/design.md#engine-events, #recording-a-prompt,
#the-fork-hand-off) as a library any host drives (our CLI, Pi's bridge, a Python agent), fixed:

- D1: the pre-prompt snapshot is taken at ``turn_start`` of turn 0 and bound to **this**
  prompt's user entry once it exists (the first user message after the leaf seen at
  ``turn_start``); never to an older entry, never overwriting an earlier binding.
- D3: ``current``/``undo`` come from :meth:`LedgerView.branch_state` (branch order).
- D9: no capture at session start; the dedup compares a capture with the recorded ``current``.
- D11: a compaction is bound to ``current`` only if a capture shows the files still equal it.
- D12: a headless ``/tree`` behaves as "Keep current files" and is recorded.
- D13: restores roll back on failure (the restore layer); a fork-pending record is imported only
  by the fork it was written for; a fork that did not happen gets its restore recorded in the
  parent, where it can be undone.
- Pi 0.73.1 honours only ``cancel`` from ``session_before_fork``: the ``/fork`` options that act on
  files only ("Code only", "Undo last file rewind") restore, record the op here and cancel the
  fork (the reference forks anyway, into an empty session that loses the undo).
- Every menu action says what it did in ``EventResult.panel``, kept on screen by its host.

Invariants: the engine never prints; every handler returns the notices to show. Every handler
that changes the work tree goes through :meth:`Engine.restore_files` (``restore_commit``), which
snapshots first and rolls back on failure. Records are appended only through the host.

The surface for operations (:mod:`ledger.engine.operations`, :mod:`ledger.recovery`,
:mod:`ledger.engine.agent_tool`): ``snapshot``, ``restore_files``, ``append_op``,
``prepare_fork`` / ``settle_fork``, ``for_host``, ``this_prompt``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ledger.clock import Clock, SystemClock
from ledger.engine import messages as M
from ledger.engine.authorship_log import AuthorshipLog, busy_other, ledgers_here
from ledger.engine.changes_since import prompt_status_note
from ledger.engine.conversation import assistant_entry, describe_entry, prompt_user_entry
from ledger.engine.filestate import FileState
from ledger.engine.fork_import import import_fork
from ledger.engine.host import SessionHost
from ledger.engine.results import (
    CHECKPOINT_SOURCES,
    FORK_PREFERENCE_SOURCES,
    Collector,
    EventResult,
    RetentionHooks,
    SessionStartReason,
)
from ledger.engine.tell_others import Overwritten, overwritten_by, tell
from ledger.engine.undo_target import find_undo, report_interrupted, require_undo, undo_files
from ledger.errors import LedgerError
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import recording
from ledger.git.store.snapshot import LastExact, take_snapshot
from ledger.ledgerview import BranchState, LedgerView
from ledger.lineage import LineageReader
from ledger.records import FORK_PENDING, OP, TURN
from ledger.recovery import journal_states
from ledger.session.model import Session, is_restorable
from ledger.session.store import UNSET, ParentRequest
from ledger.settings import Settings
from ledger.turngate import TurnPolicy

if TYPE_CHECKING:
    from ledger.git.restore.journal import Journal
    from ledger.git.restore.plan import RestorePlan
    from ledger.git.restore.run import RestoreOutcome
    from ledger.git.trees import Change

Choose = Callable[[str, list[str]], "str | None"]


class Engine:
    """One session's rewind state. Create it at session start; feed it the host's events."""

    def __init__(
        self,
        host: SessionHost,
        repo: GitRepo,
        *,
        settings: Settings | None = None,
        clock: Clock | None = None,
        reader: LineageReader | None = None,
        retention: RetentionHooks | None = None,
    ) -> None:
        self.host = host
        self.retention = retention
        """Runs retention sweeps at session start, every 50 new snapshots and at shutdown."""
        self.repo = repo
        self.settings = settings or Settings()
        self.clock = clock or SystemClock()
        self.reader = reader or LineageReader()
        self.last_exact: LastExact | None = None
        self._collector: Collector | None = None
        self._pending_tree: FileState | None = None
        self.tree_diff_cache: dict[tuple[str, str], list[Change]] = {}
        """Leaf changes between two recorded trees (ledger.engine.ownership): they never change."""
        self.authorship = AuthorshipLog(
            repo,
            lambda: ledgers_here(self.session(), self.host.session_file, self.reader, repo.git_dir),
        )
        """Who produced each file's content (docs/authorship.md)."""
        self._held_journals: list[Journal] = []
        self._fork_preference: str | None = None
        self._unconsumed_fork: FileState | None = None
        """A fork prepared here (its record written) that has not happened yet."""
        self.boomerang_collapse = False
        """The host collapses a navigation back and forth (boomerang): keep the files, no menu."""
        self.turns = TurnPolicy()  # restores vs other sessions' turns (design.md#never-mid-turn)
        self.restore_fault: Callable[[str], None] | None = None
        """Test seam: called at each step of a restore; raising there injects a failure."""
        self._overwritten: Overwritten | None = None  # asked after a restore, told at its record

    # --- state ----------------------------------------------------------------------------

    def session(self) -> Session:
        return self.host.session()

    def branch_state(self) -> BranchState:
        session = self.session()
        return LedgerView.of(session).branch_state(session, self.host.leaf_id())

    def resolve_point(self, entry_id: str) -> str | None:
        """The entry's exact rewind point through lineage, if its commit still exists."""
        session = self.session()
        found = self.reader.lineage(session).resolve(entry_id, self.repo.commit_exists)
        return found[0] if found else None

    def pruned_point(self, entry_id: str) -> bool:
        """The entry was bound to a snapshot that no longer exists (retention pruned it)."""
        return self.reader.lineage(self.session()).resolve(entry_id, lambda _: True) is not None

    def _say_pruned(self, entry_id: str, target: str | None, result: EventResult) -> None:
        """A Restore option the user might expect is missing: say why, below what happened."""
        if target is None and self.pruned_point(entry_id):
            result.show(*(result.panel or []), M.PRUNED_POINT, problem=True)

    def undo_point(self) -> str | None:
        """What "Undo last file rewind" brings back: an interrupted restore's undo snapshot
        first, else the branch's (:func:`ledger.engine.undo_target.find_undo`)."""
        found = find_undo(self)
        return found.snapshot if found is not None else None

    def _reconstruct(self) -> None:
        """The reference's ``reconstructState``, minus its capture (D9): remember ``current``
        as the dedup candidate; a later capture decides whether it still matches."""
        current = self.branch_state().current
        tree = self.repo.tree_of(current) if current else None
        self.last_exact = LastExact(current, tree) if current and tree else None

    def snapshot(self, *, agent_entry: str | None = None) -> str:
        """Capture the work tree (reusing the latest exact snapshot when unchanged): a ledger
        point, so recorded in the authorship index as ``agent_entry``'s turn, else found."""
        report = take_snapshot(
            self.repo, self.settings.snapshot, last_exact=self.last_exact, clock=self.clock
        )
        self.last_exact = LastExact(report.commit, report.tree)
        if not report.reused and self.retention is not None:
            self.retention.on_snapshot_added(1)
        own = self.session().id
        if agent_entry is not None:
            self.authorship.agent(report.commit, own, agent_entry)
        else:
            self.authorship.capture(report.commit, own, busy=busy_other(self.repo.git_dir, own))
        return report.commit

    def _try_snapshot(
        self, when: str, result: EventResult, *, agent_entry: str | None = None
    ) -> str | None:
        """:meth:`snapshot`, where a failed capture is a warning that says ``when``, not an error."""
        try:
            return self.snapshot(agent_entry=agent_entry)
        except LedgerError as exc:
            hint = f"; {exc.hint}" if exc.hint else ""
            result.warn(f"Rewind: could not snapshot {when} ({exc.message}){hint}")
            return None

    def append_op(
        self,
        *,
        current: str | None = None,
        undo: str | None = None,
        bindings: list[tuple[str, str]] | None = None,
        parent_id: ParentRequest = UNSET,
    ) -> str:
        """Append a ``rewind-op`` record (at the leaf, or under ``parent_id``: ``None`` = a new
        root) and make its ``current`` the dedup candidate; returns the record's id."""
        from ledger.record_fast import build_op

        data = build_op(current=current, undo=undo, bindings=bindings).to_data()
        told, self._overwritten = self._overwritten, None  # only the record right after it
        record = self.host.append_custom(OP, data, parent_id=parent_id)
        self._reconstruct()
        tell(self, told, record)  # the other live sessions whose agents' files it overwrote
        return record

    def restore_files(
        self,
        commit: str,
        *,
        until_recorded: bool = False,
        recovering: Journal | None = None,
        planned: RestorePlan | None = None,
    ) -> RestoreOutcome:
        """Restore the work tree to ``commit`` (undo snapshot first, rolled back on failure),
        journaled with the session the op record goes to; appends nothing. The journal counts
        as a running restore until the caller's ``restore_intent`` block ends;
        ``until_recorded``: until :meth:`_release_held` (the record comes in a later event, as
        ``/tree``'s), so no other process calls it interrupted meanwhile. ``recovering``: the
        interrupted restore this one undoes (:func:`ledger.recovery.recover`). ``planned``: the
        plan already shown for ``commit``, whose scan the restore reuses when still current."""
        from ledger.git.restore import journal as J
        from ledger.git.restore.run import restore_commit

        # The restore journal names the session the op record goes to, so that an interrupted
        # restore can be found and undone from it (docs/design.md#crash-safe-restore).
        intent = J.current_intent()
        if intent.session is None and self.host.session_file is not None:
            intent = J.RestoreIntent(
                session=os.path.realpath(self.host.session_file),
                entry=intent.entry,
                operation=intent.operation,
                agent_dir=intent.agent_dir,
            )
        self._release_held()
        holding: contextlib.AbstractContextManager[list[Journal]] = (
            J.held_journals() if until_recorded else contextlib.nullcontext([])
        )
        gate = self.turns.restoring(self.repo.git_dir, self.session().id)
        with gate, holding as held, J.restore_intent(intent):
            outcome = restore_commit(
                self.repo,
                commit,
                self.settings.snapshot,
                last_exact=self.last_exact,
                clock=self.clock,
                fault=self.restore_fault,
                recovering=recovering,
                planned=planned,
            )
        self._held_journals = held
        # Only a verified restore makes the target the dedup candidate; otherwise the next
        # capture must compare against the work tree, not assume it.
        self.last_exact = LastExact(commit, outcome.plan.target_tree) if outcome.exact else None
        # Whose files it overwrote (for their sessions' notices), asked before the index
        # learns that what it wrote is a rewind's and what its capture found, the user's.
        self._overwritten = overwritten_by(self, outcome.plan) if outcome.changed else None
        self.authorship.rewind(outcome.undo_commit, commit, self.session().id)
        return outcome

    def _release_held(self) -> None:
        """The restore held by ``until_recorded`` is recorded now (or never will be)."""
        held, self._held_journals = self._held_journals, []
        self._overwritten = None  # a restore not recorded by now never will be: no notice
        for journal in held:
            journal.release()

    # --- lifecycle ------------------------------------------------------------------------

    def session_start(
        self, reason: SessionStartReason = "startup", previous_session_file: str | None = None
    ) -> EventResult:
        result = EventResult()
        self._collector = None
        self._pending_tree = None
        self._unconsumed_fork = None
        self._reconstruct()
        if reason == "fork" and previous_session_file:
            import_fork(self, previous_session_file, result)
        report_interrupted(self, result)  # docs/design.md#crash-safe-restore
        if self.retention is not None:
            self.retention.on_session_start()
        return result

    def before_agent_start(self, prompt: str) -> EventResult:
        return EventResult()  # a prompt is about to run: nothing to do before its turn_start

    def turn_start(self, turn_index: int) -> EventResult:
        result = EventResult()
        if turn_index != 0:
            return result
        self.settle_fork(happened=False)
        before = self.last_exact
        commit = self._try_snapshot("before this prompt", result)
        if commit is None:
            self._collector = None
            return result
        self._collector = Collector(leaf_at_start=self.host.leaf_id(), pending_user_commit=commit)
        result.status_note = prompt_status_note(self, before)
        return result

    def _bind_pending_user(self, *, final: bool, result: EventResult) -> None:
        collector = self._collector
        if collector is None or collector.pending_user_commit is None:
            return
        session = self.session()
        user = prompt_user_entry(session, collector.leaf_at_start, self.host.leaf_id())
        if user is None:
            if final:
                result.warn(M.PROMPT_NOT_FOUND)
                collector.pending_user_commit = None
            return
        already = LedgerView.of(session).entry_to_commit
        if user.id not in collector.bound and user.id not in already:
            collector.pairs.insert(0, (user.id, collector.pending_user_commit))
        collector.pending_user_commit = None

    def turn_end(
        self,
        turn_index: int,
        *,
        assistant_entry_id: str | None = None,
        message: dict[str, Any] | None = None,
    ) -> EventResult:
        result = EventResult()
        if self._collector is None:
            # This engine started mid-prompt (a bridge restarted after the old one died): adopt
            # the prompt, so this turn's and later turns' points are still recorded; the files
            # before the prompt were the dead bridge's to record (docs/pi.md, healing).
            self._collector = Collector(self.host.leaf_id(), None)
        self._bind_pending_user(final=False, result=result)
        if message is not None and message.get("role") != "assistant":
            return result
        session = self.session()
        entry = session.get(assistant_entry_id) if assistant_entry_id else None
        if entry is None and message is not None:
            entry = assistant_entry(session, message, self.host.leaf_id())
        if entry is None:
            return result
        commit = self._try_snapshot("after this turn", result, agent_entry=entry.id)
        if commit is None:
            return result
        if entry.id not in self._collector.bound:
            self._collector.pairs.append((entry.id, commit))
        return result

    def agent_end(self) -> EventResult:
        result = EventResult()
        if self._collector is None:
            return result
        self._bind_pending_user(final=True, result=result)
        pairs = self._collector.pairs
        self._collector = None
        if pairs:
            from ledger.record_fast import build_turn

            self.host.append_custom(TURN, build_turn(pairs).to_data())
            self._reconstruct()
        return result

    def compact(self, compaction_entry_id: str) -> EventResult:
        """Bind a compaction to the current files (D11: verified by a capture, not assumed)."""
        return self._bind_now(compaction_entry_id, "at compaction", EventResult())

    def _bind_now(self, entry_id: str, when: str, result: EventResult) -> EventResult:
        """Snapshot now and bind it to ``entry_id``; a failed capture is a warning, not an error."""
        commit = self._try_snapshot(when, result)
        if commit is not None:
            self.append_op(bindings=[(entry_id, commit)])
        return result

    def checkpoint_entry(self, entry_id: str, source: str | None = None) -> EventResult:
        """The reference's ``rewind:checkpoint-entry``: bind the current files to an entry."""
        result = EventResult()
        if source is not None and source not in CHECKPOINT_SOURCES:
            return result
        session = self.session()
        entry = session.get(entry_id)
        if (
            entry is None
            or not is_restorable(entry)
            or entry_id in LedgerView.of(session).entry_to_commit
        ):
            return result
        return self._bind_now(entry_id, "for checkpoint", result)

    def this_prompt(self) -> Collector | None:
        """The running prompt's bindings, not recorded until its ``agent_end`` (its user entry's
        once that exists); a checkpoint adds to ``kept``."""
        if self._collector is not None:
            self._bind_pending_user(final=False, result=EventResult())
        return self._collector

    def fork_preference(self, mode: str, source: str) -> None:
        if mode == "conversation-only" and source in FORK_PREFERENCE_SOURCES:
            self._fork_preference = source

    # --- /tree ----------------------------------------------------------------------------

    def before_tree(
        self, target_id: str, choose: Choose | None = None, *, has_ui: bool = True
    ) -> EventResult:
        result = EventResult()
        self.settle_fork(happened=False)
        try:
            if self.boomerang_collapse or not has_ui or choose is None:
                # D12: headless navigation keeps the files, and says so in the ledger.
                self._pending_tree = FileState(self.snapshot())
                return result
            entry = self.session().get(target_id)
            target = (
                self.resolve_point(target_id)
                if entry is not None and is_restorable(entry)
                else None
            )
            undo = self.undo_point()
            from ledger.engine.preview import choice_title  # /rewind's words: not every command's

            choice = choose(
                choice_title(self, target_id, target, undo, fork=False),
                M.tree_options(has_target=target is not None, has_undo=undo is not None),
            )
            if choice is None or choice == M.TREE_CANCEL:
                result.info(M.NAVIGATION_CANCELLED)
                result.cancel = True
                result.show()
            elif choice == M.UNDO and undo is not None:
                # Files undone; the conversation stays where it is (the navigation is cancelled,
                # as in the reference): the op is recorded at the current leaf.
                self._undo_files(M.STAY_TREE, result)
            elif choice == M.TREE_KEEP:
                self._pending_tree = FileState(self.snapshot())
                result.show(M.PANEL_KEPT)
            elif choice == M.TREE_RESTORE:
                if target is None:
                    result.failed(M.TREE_NOT_RESTORABLE)
                    result.cancel = True
                else:
                    outcome = self.restore_files(target, until_recorded=True)
                    self._pending_tree = FileState(target, outcome.undo_commit)
                    result.info(M.FILES_RESTORED_TO_POINT)
                    result.show(
                        *M.panel_restored(
                            outcome.plan, self.describe(target_id), after=M.MOVED_TREE
                        ),
                        M.UNDO_HINT,
                    )
            else:
                result.info(M.NAVIGATION_CANCELLED)
                result.cancel = True
                result.show()
            if entry is not None and is_restorable(entry):
                self._say_pruned(target_id, target, result)
        except LedgerError as exc:
            self._pending_tree = None
            self._release_held()
            result.failed(M.TREE_FAILED.format(error=exc.message))
            result.cancel = True
        return result

    def _undo_files(self, stay: str, result: EventResult) -> None:
        """The menus' "Undo last file rewind" (:mod:`ledger.engine.undo_target`, as every undo):
        restore, record at the leaf (undoable again), cancel the navigation or fork; ``stay``
        says what became of the conversation."""
        from ledger.engine.past_states import undo_words

        target = require_undo(self)
        words = undo_words(self, target)  # undo or redo, said before its op turns it around
        done = undo_files(self, target)
        result.info(M.FILES_RESTORED_BEFORE_REWIND)
        result.cancel = True
        panel = M.panel_undone(done, stay=stay, head=words.head, state=words.state)
        result.show(*panel, *done.notes, M.UNDO_HINT_AGAIN)

    def describe(self, entry_id: str) -> str:
        """``user "fix the parser…" (a1b2c3d4)``: which point, in words the user recognises."""
        return describe_entry(self.session(), entry_id)

    def record_navigation(
        self, new_leaf_id: str | None, *, summary_entry_id: str | None = None
    ) -> EventResult:
        """``session_tree`` (after a ``/tree`` navigation): record the files chosen in
        :meth:`before_tree` at the new leaf (``None``: a new root), binding the branch summary
        entry to them when Pi wrote one."""
        result = EventResult()
        state, self._pending_tree = self._pending_tree, None
        if state is None:
            self._release_held()
            self._reconstruct()
            return result
        bindings = [(summary_entry_id, state.current)] if summary_entry_id else None
        try:
            self.append_op(
                current=state.current, undo=state.undo, bindings=bindings, parent_id=new_leaf_id
            )
        finally:
            self._release_held()
        return result

    # --- /fork ----------------------------------------------------------------------------

    def before_fork(
        self, entry_id: str, choose: Choose | None = None, *, has_ui: bool = True
    ) -> EventResult:
        result = EventResult()
        self.settle_fork(happened=False)
        forced, self._fork_preference = self._fork_preference, None
        try:
            if not has_ui or choose is None:
                self.prepare_fork(FileState(self.snapshot()))
                return result
            target = self.resolve_point(entry_id)
            undo = self.undo_point()
            if forced is not None:
                self.prepare_fork(FileState(self.snapshot()))
                result.info(M.FORCED_CONVERSATION_ONLY.format(source=forced))
                return result
            from ledger.engine.preview import choice_title

            choice = choose(
                choice_title(self, entry_id, target, undo, fork=True),
                M.fork_options(has_target=target is not None, has_undo=undo is not None),
            )
            if choice is None:
                result.info(M.REWIND_CANCELLED)
                result.cancel = True
                result.show()
            elif choice == M.UNDO and undo is not None:
                # Pi 0.73.1 cannot fork "without the conversation": undoing is a file action, so
                # it happens here, is recorded here (undoable again) and the fork is cancelled.
                self._undo_files(M.STAY_FORK, result)
            elif choice == M.FORK_CONVERSATION_ONLY:
                self.prepare_fork(FileState(self.snapshot()))
            elif choice in (M.FORK_RESTORE_ALL, M.FORK_CODE_ONLY):
                if target is None:
                    result.failed(M.NO_EXACT_POINT)
                    result.cancel = True
                elif choice == M.FORK_CODE_ONLY:
                    # Pi 0.73.1 ignores skipConversationRestore: forking would drop the user into a
                    # new, empty session (and lose the undo). "Keep conversation" means: stay here.
                    with recording():
                        outcome = self.restore_files(target)
                        if outcome.changed or self.branch_state().current != target:
                            self.append_op(current=target, undo=outcome.undo_commit)
                    result.info(M.FILES_RESTORED_FROM_POINT)
                    result.cancel = True
                    result.show(
                        *M.panel_restored(
                            outcome.plan, self.describe(entry_id), after=M.STAY_CODE_ONLY
                        ),
                        M.UNDO_HINT if outcome.undo_commit else M.NOTHING_TO_UNDO,
                    )
                else:
                    with recording():  # the fork-pending record is the restore's record
                        outcome = self.restore_files(target)
                        self.prepare_fork(FileState(target, outcome.undo_commit))
                    result.info(M.FILES_RESTORED_FROM_POINT)
            else:
                result.info(M.REWIND_CANCELLED)
                result.cancel = True
                result.show()
            self._say_pruned(entry_id, target, result)
        except LedgerError as exc:
            result.failed(M.FORK_FAILED.format(error=exc.message))
            result.cancel = True
        return result

    def prepare_fork(self, state: FileState) -> str:
        """Hand ``state`` to the fork about to be made: append the ``rewind-fork-pending``
        record the child imports, and remember the fork until :meth:`settle_fork`."""
        from ledger.record_fast import ForkPendingData

        data = ForkPendingData(v=2, current=state.current, undo=state.undo).to_data()
        told, self._overwritten = self._overwritten, None
        record = self.host.append_custom(FORK_PENDING, data)
        self._unconsumed_fork = state
        tell(self, told, record)  # a /fork restore's operation is this record
        return record

    def settle_fork(self, *, happened: bool) -> None:
        """The fork prepared by :meth:`prepare_fork` (if any) was made, or not. D13: one that did
        not happen (we are still in the parent) has its file state recorded here, so that a
        restore it made can be undone; one that happened is the child's to import."""
        state, self._unconsumed_fork = self._unconsumed_fork, None
        if not happened and state is not None and state.undo is not None:
            self.append_op(current=state.current, undo=state.undo)

    def for_host(self, host: SessionHost) -> Engine:
        """An engine on another session (a fork's child) with this one's repository, settings,
        clock and lineage reader (and its way of reading the authorship index)."""
        child = Engine(
            host, self.repo, settings=self.settings, clock=self.clock, reader=self.reader
        )
        child.authorship.keep_loaded = self.authorship.keep_loaded
        return child

    def shutdown(self, reason: str = "quit") -> EventResult:
        """``session_shutdown``. ``reason="fork"``: the prepared fork happens (the child imports
        its state); otherwise it did not and is recorded here. Journals of restores recorded in
        their session files are closed now (the next start need not step aside for them)."""
        self.settle_fork(happened=reason == "fork")
        self._release_held()  # a /tree restore whose navigation never came: interrupted now
        with contextlib.suppress(LedgerError, OSError):
            journal_states(self.repo)  # the files decide: a record Pi holds only in memory waits
        if self.retention is not None:
            self.retention.on_shutdown()  # waits for a sweep in flight, then sweeps
        return EventResult()
