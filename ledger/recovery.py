"""Finding and finishing interrupted restores: the session side of the restore journal.

Why it exists: :mod:`ledger.git.journal` knows which restores of a work tree started and did not
finish, but only the session's ledger can say whether a finished restore was *recorded*. This
module joins the two (docs/design.md#crash-safe-restore):

- :func:`settle_journals` closes every ``done`` journal whose session holds a record naming its
  undo snapshot, written at or after the journal started. What stays open is an interruption:
  files possibly mixed (``writing``: killed, out of space, a failed rollback) or changed without
  a record (``done``: the append failed).
- :func:`recover` is ``rewind undo`` for such a state: it restores the journal's undo snapshot
  (every byte from before that restore; itself undoable, journaled and verified), records an op
  in the session so the branch state is right again, and closes the journal.

Invariants: a journal is closed only when its restore is recorded or undone; recovery never
needs the interrupted process's op record; nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import InterruptedRestoreError, LedgerError
from ledger.git.journal import Journal, RestoreIntent, open_journals, restore_intent, settle
from ledger.git.repo import GitRepo
from ledger.ledgerview import LedgerView
from ledger.session.store import read_session

if TYPE_CHECKING:
    # The engine imports this module to report interrupted restores; recovery needs the
    # engine's type only for its signature, so no run-time dependency runs back to the engine.
    from ledger.engine.engine import Engine


def _recorded(journal: Journal) -> bool:
    if journal.session is None:
        return True  # nothing could record it: the restore closed such journals itself
    try:
        view = LedgerView.of(read_session(journal.session))
    except LedgerError:
        return False
    return any(
        ref.snapshot == journal.undo
        and ref.kind in ("undo", "fork-pending")
        and ref.timestamp_ms >= journal.started_ms
        for ref in view.references
    )


def settle_journals(repo: GitRepo) -> list[Journal]:
    """Close the journals of recorded restores; return the interrupted ones, oldest first."""
    return settle(repo, _recorded)


def interruption_error(journal: Journal) -> InterruptedRestoreError:
    return InterruptedRestoreError(
        journal.undo,
        journal.target,
        session=_session_name(journal),
        entry=journal.entry,
        started=journal.started,
        state=journal.state,
    )


def refuse_if_interrupted(repo: GitRepo) -> None:
    """Raise :class:`InterruptedRestoreError` for the newest interrupted restore, if any."""
    left = settle_journals(repo)
    if left:
        raise interruption_error(left[-1])


def _session_name(journal: Journal) -> str | None:
    return str(journal.session) if journal.session else None


@dataclass
class RecoveryReport:
    journal: str
    session: str | None
    restored_to: str
    interrupted_target: str
    changed: bool
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    undo: str | None = None
    record: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "recovered": self.journal,
            "session": self.session,
            "target": self.restored_to,
            "interruptedTarget": self.interrupted_target,
            "changed": self.changed,
            "added": self.added,
            "modified": self.modified,
            "deleted": self.deleted,
            "undo": self.undo,
            "record": self.record,
            "mode": "recover",
        }


def recover(engine: Engine, journal: Journal) -> RecoveryReport:
    """Bring the work tree back to ``journal``'s undo snapshot and record it in the engine's
    session (see the module docstring)."""
    from ledger.git.restore import restore_commit

    session_file = engine.host.session_file
    intent = RestoreIntent(session=str(session_file) if session_file else None, operation="recover")
    with restore_intent(intent):
        outcome = restore_commit(
            engine.repo,
            journal.undo,
            engine.settings.snapshot,
            clock=engine.clock,
            recovering=journal,
        )
    report = RecoveryReport(
        journal.id,
        intent.session,
        journal.undo,
        journal.target,
        outcome.changed,
        list(outcome.plan.added),
        list(outcome.plan.modified),
        list(outcome.plan.deleted),
        outcome.undo_commit,
    )
    # The branch's state is the pre-restore one again; the record also keeps that snapshot live.
    report.record = engine.append_op(current=journal.undo, undo=outcome.undo_commit)
    settle_journals(engine.repo)
    return report


def newest_interrupted(repo: GitRepo, session: Path | None) -> Journal | None:
    """The interrupted restore ``rewind undo`` should finish for ``session`` (the newest one of
    that session, or of no session); None when there is none."""
    left = settle_journals(repo)
    if not left:
        return None
    mine = [j for j in left if j.session is None or session is None or Path(j.session) == session]
    if not mine:
        raise interruption_error(left[-1])
    chosen = mine[-1]
    # A recovery that was itself interrupted: its undo snapshot is the mixed tree it started
    # from; the state to bring back is the one before the restore it was recovering.
    by_id = {j.id: j for j in left}
    while chosen.recovering is not None and chosen.recovering in by_id:
        chosen = by_id[chosen.recovering]
    return chosen


__all__ = [
    "RecoveryReport",
    "interruption_error",
    "newest_interrupted",
    "open_journals",
    "recover",
    "refuse_if_interrupted",
    "settle_journals",
]
