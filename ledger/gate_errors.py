"""The turn gate's refusals (docs/design.md#never-mid-turn): a restore met another session's
turn, or another restore, in the work tree's gate (:mod:`ledger.turngate`).

Why it exists apart from :mod:`ledger.errors`: the gate's two errors carry the most words of any
(who holds the gate, since when, what to do), and they are raised by one module; they are
:class:`~ledger.errors.LedgerError` like every other, so the CLI maps them the same way.
"""

from __future__ import annotations

from pathlib import Path

from ledger.errors import LedgerError
from ledger.session_names import session_label


class OtherTurnRunningError(LedgerError):
    """Another session's agent is in a turn in this work tree (or in a directory nested in it or
    around it: docs/shadow.md#nested-directories): a restore would write files under it, so it
    is refused (after waiting ``waited_s``); nothing was changed (docs/design.md#never-mid-turn)."""

    def __init__(
        self,
        repository: Path | str,
        sessions: list[tuple[str, int]],
        *,
        waited_s: float = 0.0,
        places: dict[str, str] | None = None,
        titles: dict[str, str] | None = None,
    ) -> None:
        self.repository = Path(repository)
        self.sessions = sessions
        """``(session id, pid)`` of each session the registry says is in a turn (may be empty:
        a turn's hold is proof enough; the registry is only the words); the pid is Pi's."""
        self.waited_s = waited_s
        self.places = dict(places or {})
        """Session id → the directory it works in, for sessions of a nested or enclosing one."""
        titles = titles or {}
        if sessions:
            named = ", ".join(
                f"session {session_label(sid, titles.get(sid))} (pid {pid}"
                + (f", working in {self.places[sid]})" if sid in self.places else ")")
                for sid, pid in sessions
            )
            who = f"a turn of {named} is running"
        else:
            who = "another session's turn is running"
        waited = f"; it did not end within {waited_s:.0f} s" if waited_s >= 1 else ""
        super().__init__(
            f"{who} in {self.repository}: its agent may be writing files right now{waited}",
            hint="nothing was changed; try again once that turn has ended (or stop it in its own "
            "terminal); 'rewind status' lists the sessions here",
        )


class OtherRestoreRunningError(OtherTurnRunningError):
    """Another restore (a ``rewind restore/undo/fork`` or a Pi session's) holds this work tree's
    turn gate: it is writing files, so this restore is refused (after waiting ``waited_s``);
    nothing was changed (docs/design.md#never-mid-turn). A subclass of
    :class:`OtherTurnRunningError`: whoever handles a refusal by the gate handles this one."""

    def __init__(
        self,
        repository: Path | str,
        pid: int,
        *,
        session_id: str | None = None,
        started: str | None = None,
        where: str | None = None,
        waited_s: float = 0.0,
    ) -> None:
        self.repository = Path(repository)
        self.pid = pid
        self.session_id = session_id
        self.sessions = []
        self.places = {}
        self.waited_s = waited_s
        self.where = where
        """The directory it restores when that is a nested or enclosing one."""
        details = [f"pid {pid}"]
        if session_id:
            details.append(f"session {session_label(session_id)}")
        if started:
            details.append(f"started {started}")
        if where:
            details.append(f"restoring {where}")
        waited = f"; it did not end within {waited_s:.0f} s" if waited_s >= 1 else ""
        LedgerError.__init__(
            self,
            f"another restore is running ({', '.join(details)}) in {self.repository}: it is "
            f"writing files right now{waited}",
            hint=f"nothing was changed; run this again once it has finished (restores take "
            f"seconds; 'rewind status' lists it). If process {pid} hangs, stop it ('kill {pid}'); "
            "'rewind doctor' then says whether 'rewind undo' is needed",
        )


__all__ = ["OtherRestoreRunningError", "OtherTurnRunningError"]
