"""Each bridge event mapped onto the engine's event API.

Why it exists: the protocol's event names and payloads are Pi's
(docs/design.md#pis-events-and-their-order); the engine's methods are host-agnostic. The
:data:`ROUTES` table is the only place that knows both. :class:`~ledger.bridge.state.BridgeState`
(re-exported here) is what the bridge keeps between events, :class:`Outcome` what one event
produced; the server owns the one and puts the other on the wire.

Invariants:
- ``session_start`` (re)creates the engine: Pi runs a fresh extension instance after
  ``/new``, ``/resume``, ``/fork``, ``/clone`` and ``/reload``, and state is rebuilt from the
  session each time. Outside a git repository the engine is off and every event is a no-op.
- Events before any ``session_start`` start the engine as a ``startup`` would.
- Info notices are dropped when ``silentCheckpoints`` is on; warnings and errors never are.
- Another writer of ledger records in this session (pi-rewind-hook, or a second copy of ours):
  after its first record we warn once and stand aside (no records, no menus, footer untouched;
  docs/defects.md#other-writer).
- Each started engine announces its session in the presence registry (:mod:`ledger.presence`),
  withdrawn when the next ``session_start`` replaces the engine, at ``session_shutdown`` (before
  its sweep: Pi starts the next instance once it is answered) and when the bridge ends; the
  entry's "in a turn" flag is rewritten only when a prompt starts (when it was idle) and at
  ``agent_end``, never inside a capture.
- Never mid-turn (:mod:`ledger.turngate`): from a prompt's start (before its pre-prompt
  capture) to ``agent_end`` the session holds the work tree's turn gate shared; its engine's
  restores take it exclusive through the same descriptor, so another session's restore waits
  for (or, inside Pi, refuses during) this session's turn, and this turn waits for a restore in
  progress. Let go with the presence entry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.bridge.protocol import EventMessage, EventName
from ledger.bridge.state import BridgeState, Outcome, PendingStart
from ledger.errors import LedgerError, NotARepositoryError
from ledger.record_envelope import FORK_PENDING, OP, TURN
from ledger.session_names import TitleTracker

# The engine, pygit2 and the /rewind events are imported where used, not here: a spawned
# bridge answers its first session_start without them (ledger/bridge/quick_start.py).
if TYPE_CHECKING:
    from ledger.engine.engine import Choose, Engine, EventResult, SessionStartReason
    from ledger.git.repo import GitRepo
    from ledger.retention.scheduler import SweepScheduler
    from ledger.settings import Settings


Handler = Callable[[BridgeState, "Engine", EventMessage], "EventResult | None"]
"""Handle one event with the engine; None when the event has nothing to report."""


class Route:
    """An event's handler, and how the dispatcher treats the event around it. A plain class,
    not a dataclass: created at import, before a spawned bridge's first answer (issue 34)."""

    __slots__ = ("ends_session", "handle", "records")

    def __init__(
        self, handle: Handler, *, records: bool = True, ends_session: bool = False
    ) -> None:
        self.handle = handle
        self.records = records
        """The event may record or show a menu: skipped while another writer records the
        session."""
        self.ends_session = ends_session
        """The engine ran its shutdown sweep: the scheduler is done once its notices are
        drained."""


def _str(payload: dict[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) and value else None


def _int(payload: dict[str, Any], key: str, default: int = 0) -> int:
    value = payload.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


_REASONS: dict[str, SessionStartReason] = {
    "startup": "startup",
    "resume": "resume",
    "new": "new",
    "fork": "fork",
    "reload": "reload",
}


def start_engine(
    state: BridgeState, cwd: str | None, reason: str, previous: str | None, outcome: Outcome
) -> None:
    from ledger.session.agent_dir import resolve_agent_dir

    state.engine = None
    state.pending = None
    withdraw(state)
    agent_dir = resolve_agent_dir(state.agent_dir)
    repo = _open(state, cwd, agent_dir, outcome)
    if repo is None:
        return
    _settings(state, agent_dir, repo.root, outcome)
    _run_engine(state, repo, agent_dir, reason, previous, outcome)
    state.host.watch_writers()
    _open_gate(state, repo)
    _announce(state, repo.git_dir)
    _retention_notices(state, outcome)


def _open(state: BridgeState, cwd: str | None, agent_dir: Path, outcome: Outcome) -> GitRepo | None:
    from ledger.errors import ShadowRefusedError
    from ledger.git.shadow.open import open_work_tree

    try:
        # Outside git, a shadow repository (docs/shadow.md); a git init since is migrated.
        opened = open_work_tree(cwd or ".", agent_dir, create=True, known=state.known_repo)
    except ShadowRefusedError as exc:
        outcome.notices.append({"level": "warning", "text": f"Rewind: off: {exc.message}"})
        return None
    except NotARepositoryError:
        return (
            None  # shadow repositories off (or no such directory): rewind is off, as the reference
        )
    for notice in opened.notices:
        outcome.notices.append({"level": "info", "text": f"Rewind: {notice}"})
    return opened.repo


def _settings(state: BridgeState, agent_dir: Path, root: Path, outcome: Outcome) -> None:
    from ledger.settings import load_settings

    settings, warnings = load_settings(agent_dir, root)
    state.settings = settings
    for warning in warnings:
        outcome.notices.append({"level": "warning", "text": f"Rewind: {warning}"})


def _run_engine(
    state: BridgeState,
    repo: GitRepo,
    agent_dir: Path,
    reason: str,
    previous: str | None,
    outcome: Outcome,
) -> None:
    from ledger.engine.engine import Engine

    assert state.settings is not None  # set by _settings for this repository
    state.scheduler = _scheduler(state, repo, agent_dir, state.settings)
    engine = Engine(state.host, repo, settings=state.settings, retention=state.scheduler)
    # A long-lived engine: the authorship index is loaded once, then only what other sessions
    # append is read (docs/authorship.md#wiring).
    engine.authorship.keep_loaded = True
    state.engine = engine
    _absorb(state, engine.session_start(_REASONS.get(reason, "startup"), previous), outcome)


def quick_start(
    state: BridgeState, cwd: str | None, reason: str, previous: str | None, outcome: Outcome
) -> bool:
    """Answer a spawned bridge's usual ``session_start`` without the engine
    (:mod:`ledger.bridge.quick_start`): what :func:`start_engine` would answer, the engine
    started by :func:`finish_start` right after the answer. False (nothing done) otherwise."""
    import os

    from ledger.bridge.quick_start import usual_start
    from ledger.session.agent_dir import resolve_agent_dir

    if state.kind != "bridge" or reason == "fork" or os.environ.get("REWIND_QUICK_START") == "0":
        return False
    agent_dir = resolve_agent_dir(state.agent_dir)
    found = usual_start(cwd, agent_dir)
    if found is None:
        return False
    session = state.host.session()  # the session start's one call; start_engine makes it too
    if session.parent_session is not None or next(session.iter_custom(*LEDGER_TYPES), None):
        return False  # points to count (through lineage): the engine's footer
    root, git_dir = found
    state.engine = None
    withdraw(state)
    _settings(state, agent_dir, root, outcome)
    state.pending = PendingStart(cwd, reason, previous, agent_dir, root, git_dir)
    state.host.watch_writers()
    _announce(state, git_dir)
    return True


def finish_start(state: BridgeState) -> None:
    """Start the engine of a ``session_start`` that :func:`quick_start` answered: the rest of
    :func:`start_engine`, on the session as mirrored for that answer (no call to the host).
    What it has to tell (a restore journal or a shadow that appeared since the answer, a
    retention warning) goes with the next event's answer (:attr:`BridgeState.carried`)."""
    pending, state.pending = state.pending, None
    if pending is None:
        return
    outcome = Outcome()
    try:
        repo = _open(state, pending.cwd, pending.agent_dir, outcome)
        if repo is None:
            withdraw(state)  # the repository went away since the answer: rewind is off
        else:
            if repo.git_dir != pending.git_dir:
                withdraw(state)  # moved since the answer: announced where the engine works
                _announce(state, repo.git_dir)
            _run_engine(state, repo, pending.agent_dir, pending.reason, pending.previous, outcome)
            _open_gate(state, repo)
            _retention_notices(state, outcome)
    except Exception as exc:  # the answer is out: say why and keep serving
        # A full start would have answered this as the event's error; here the answer went
        # already, so rewind goes off for the session and the next answer says why, as
        # Pi's warning, instead of the bridge ending mid-session.
        state.engine = None
        withdraw(state)
        why = exc.message if isinstance(exc, LedgerError) else f"{type(exc).__name__}: {exc}"
        outcome.notices.append({"level": "warning", "text": f"Rewind: off: {why}"})
    state.carried.extend(outcome.notices)


def _open_gate(state: BridgeState, repo: GitRepo) -> None:
    from ledger.turngate import TurnGate, TurnPolicy

    state.gate = TurnGate(repo.git_dir)
    if state.engine is not None:
        state.engine.turns = TurnPolicy(gate=state.gate)  # inside Pi: refuse, never wait


def _announce(state: BridgeState, git_dir: Path) -> None:
    from ledger.presence import announce

    file = state.host.session_file
    session = state.host.session_for_status()
    state.titles = TitleTracker()
    state.presence = announce(
        git_dir,
        session.id,
        str(file) if file else None,
        kind=state.kind,
        title=state.titles.update(session),  # a resumed session's name or first prompt
        pi_pid=state.pi_pid,
    )


def withdraw(state: BridgeState) -> None:
    """This session is over (or replaced): its presence entry goes."""
    presence, state.presence = state.presence, None
    if presence is not None:
        presence.withdraw()
    gate, state.gate = state.gate, None
    if gate is not None:
        gate.close()  # a turn still held (no agent_end came) ends with the session


def _turn_begins(state: BridgeState) -> None:
    """A prompt starts: the gate shared (waits for a restore in progress), then the word."""
    if state.gate is not None:
        state.gate.begin_turn()
    if state.presence is not None:
        state.presence.set_busy(True)


def _turn_ends(state: BridgeState) -> None:
    if state.gate is not None:
        state.gate.end_turn()
    if state.presence is not None:
        # The first prompt (or a /name since) is in the mirrored session by now: the entry's
        # title follows, rewritten only when it changed.
        state.presence.set_busy(False, state.titles.update(state.host.session_for_status()))


LEDGER_TYPES = frozenset({TURN, OP, FORK_PENDING})
OTHER_WRITER = (
    "Rewind: another rewind extension is recording this session too (pi-rewind-hook, or a second copy "
    "of rewind-ledger): rewind-ledger stops recording and shows no menus in this session, so that each "
    "prompt is recorded once. Keep one: remove the other from ~/.pi/agent/extensions/ or from "
    '"packages" in ~/.pi/agent/settings.json (pi remove <source>), then restart Pi or run /reload.'
)


def _other_writer(state: BridgeState, outcome: Outcome) -> bool:
    """True when another extension writes ledger records here: then we stand aside
    (docs/defects.md#other-writer)."""
    if state.passive:
        return True
    foreign = state.host.foreign_records(LEDGER_TYPES)
    if not foreign:
        return False
    state.passive = True
    outcome.notices.append({"level": "warning", "text": OTHER_WRITER})
    return True


def _scheduler(
    state: BridgeState, repo: GitRepo, agent_dir: Path, settings: Settings
) -> SweepScheduler | None:
    from ledger.retention.scheduler import SweepScheduler

    if settings.retention is None:
        return None
    # Pi owns the session and may not have written it yet: sweep from the mirrored entries.
    # A pi -p run's sweeps wait until it is over, where its server can run them off Pi's path.
    return SweepScheduler(
        repo,
        agent_dir,
        settings,
        state.host.session,
        after_session=state.sweeps_after_session and state.print_mode,
        defer=state.defer_sweep,
    )


def _absorb(state: BridgeState, result: EventResult, outcome: Outcome) -> None:
    silent = state.settings is not None and state.settings.silent_checkpoints
    for notice in result.notices:
        if notice.level == "info" and silent:
            continue
        outcome.notices.append({"level": notice.level, "text": notice.text})
    if result.cancel:
        outcome.result["cancel"] = True
    if result.skip_conversation_restore:
        outcome.result["skipConversationRestore"] = True
    if result.panel is not None and (not silent or result.panel_is_problem or not result.panel):
        outcome.panel = list(result.panel)
    if result.panel:
        state.status_note = None  # a rewind action changed the files: the note is stale
    if result.status_note is not None and not silent:
        state.status_note = result.status_note
    if result.data is not None:
        outcome.result.update(result.data)


def _retention_notices(state: BridgeState, outcome: Outcome) -> None:
    if state.scheduler is not None:
        for level, text in state.scheduler.drain_notices():
            outcome.notices.append({"level": level, "text": text})


def _latest_assistant(engine: Engine) -> str | None:
    session = engine.session()
    for entry in reversed(session.branch(engine.host.leaf_id())):
        if entry.type == "message" and entry.role == "assistant":
            return entry.id
        if entry.type == "message" and entry.role == "user":
            return None
    return None


def _choose(state: BridgeState, message: EventMessage) -> Choose | None:
    return state.host.select if message.ctx.has_ui else None


# --- the handlers ---------------------------------------------------------------------------


def _before_agent_start(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    if not state.passive:
        _turn_begins(state)  # before the capture: it must see a restore in progress finished
    result = engine.before_agent_start(_str(message.payload, "prompt") or "")
    if not state.passive:
        result.panel = []  # a new prompt: the last rewind action's panel has been read
        state.status_note = None  # and the last prompt's status note too
        state.overwrite_note = None  # and another session's restore (a new one is shown anew)
        state.intent = None
    return result


def _turn_start(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    result = engine.turn_start(_int(message.payload, "turnIndex"))
    _turn_begins(state)  # a host without before_agent_start; otherwise already held
    if _int(message.payload, "turnIndex") == 0 and state.restored_by:
        # Files another session restored are not "your changed files" (issue 33).
        restored, state.restored_by = state.restored_by, {}
        if result.status_note is not None:
            from ledger.bridge.overwrites import prompt_note

            with contextlib.suppress(LedgerError, OSError):
                result.status_note = prompt_note(engine, restored) or result.status_note
    return result


def _message_end(state: BridgeState, engine: Engine, message: EventMessage) -> None:
    return None  # the entry is written after this event; turn_end binds it


def _turn_end(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult | None:
    # Pi's assistant message is matched by its timestamp (the reference's rule); a host that
    # sends only the role gets the latest assistant message of the prompt on the branch.
    payload = message.payload
    turn_index = _int(payload, "turnIndex")
    value = payload.get("message")
    if isinstance(value, dict) and value.get("timestamp") is not None:
        return engine.turn_end(turn_index, message=value)
    if payload.get("role", "assistant") != "assistant":
        return None
    return engine.turn_end(turn_index, assistant_entry_id=_latest_assistant(engine))


def _agent_end(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    result = engine.agent_end()
    _turn_ends(state)
    return result


def _session_compact(
    state: BridgeState, engine: Engine, message: EventMessage
) -> EventResult | None:
    entry = _str(message.payload, "compactionEntryId")
    return engine.compact(entry) if entry is not None else None


def _session_before_tree(
    state: BridgeState, engine: Engine, message: EventMessage
) -> EventResult | None:
    from ledger.bridge.rewind_events import chooser

    target = _str(message.payload, "targetId")
    if target is None:
        return None
    choose = chooser(state, "tree", target, _choose(state, message))
    return engine.before_tree(target, choose, has_ui=message.ctx.has_ui or choose is not None)


def _session_tree(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    payload = message.payload
    return engine.record_navigation(
        _str(payload, "newLeafId"), summary_entry_id=_str(payload, "summaryEntryId")
    )


def _session_before_fork(
    state: BridgeState, engine: Engine, message: EventMessage
) -> EventResult | None:
    from ledger.bridge.rewind_events import chooser, fork_refused

    entry = _str(message.payload, "entryId")
    if entry is None or fork_refused(state, engine, message):
        return None  # Pi will refuse this fork: change nothing (no restore, no hand-off)
    choose = chooser(state, "fork", entry, _choose(state, message))
    return engine.before_fork(entry, choose, has_ui=message.ctx.has_ui or choose is not None)


def _session_shutdown(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    return engine.shutdown(_str(message.payload, "reason") or "quit")


def _checkpoint_entry(
    state: BridgeState, engine: Engine, message: EventMessage
) -> EventResult | None:
    entry = _str(message.payload, "entryId")
    if entry is None:
        return None
    return engine.checkpoint_entry(entry, _str(message.payload, "source"))


def _fork_preference(state: BridgeState, engine: Engine, message: EventMessage) -> None:
    payload = message.payload
    engine.fork_preference(_str(payload, "mode") or "", _str(payload, "source") or "")


def _rewind_event(name: str) -> Handler:
    """A ``/rewind`` event's handler in :mod:`ledger.bridge.rewind_events`, imported at its
    first use (it loads the engine)."""

    def handle(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult | None:
        from ledger.bridge import rewind_events

        handler: Handler = getattr(rewind_events, name)
        return handler(state, engine, message)

    handle.__name__ = name
    return handle


def _tool_event(state: BridgeState, engine: Engine, message: EventMessage) -> EventResult:
    """The model's ``rewind`` tool (:mod:`ledger.bridge.tool_events`, loaded at its first use)."""
    from ledger.bridge.tool_events import rewind_tool

    return rewind_tool(state, engine, message)


ROUTES: dict[EventName, Route] = {
    "before_agent_start": Route(_before_agent_start, records=False),
    "turn_start": Route(_turn_start),
    "message_end": Route(_message_end, records=False),
    "turn_end": Route(_turn_end),
    "agent_end": Route(_agent_end),
    "session_compact": Route(_session_compact),
    "session_before_tree": Route(_session_before_tree),
    "session_tree": Route(_session_tree),
    "session_before_fork": Route(_session_before_fork),
    "session_shutdown": Route(_session_shutdown, ends_session=True),
    "checkpoint_entry": Route(_checkpoint_entry),
    "fork_preference": Route(_fork_preference, records=False),
    "rewind_list": Route(_rewind_event("rewind_list"), records=False),
    "rewind_preview": Route(_rewind_event("rewind_preview"), records=False),
    "rewind_diff": Route(_rewind_event("rewind_diff"), records=False),
    "rewind_apply": Route(_rewind_event("rewind_apply")),
    "rewind_intent": Route(_rewind_event("rewind_intent"), records=False),
    "rewind_tool": Route(_tool_event),
}
"""Every event that needs the engine (all but ``ping`` and ``session_start``)."""


def dispatch(state: BridgeState, message: EventMessage) -> Outcome:
    outcome = Outcome()
    event, ctx = message.event, message.ctx
    if event == "ping":
        return outcome
    if state.carried:
        # What starting the engine after the last session_start's answer had to tell.
        outcome.notices.extend(state.carried)
        state.carried = []
    if event == "session_start":
        state.print_mode = not ctx.has_ui
        payload = message.payload
        reason = _str(payload, "reason") or "startup"
        previous = _str(payload, "previousSessionFile")
        if not quick_start(state, ctx.cwd, reason, previous, outcome):
            start_engine(state, ctx.cwd, reason, previous, outcome)
        return outcome
    if state.engine is None and state.settings is None:
        start_engine(state, ctx.cwd, "startup", None, outcome)
    engine = state.engine
    if engine is None:
        return outcome
    route = ROUTES[event]
    if route.ends_session:
        # First, and also when we stand aside: Pi starts the next instance (/new, /fork,
        # /reload) once this event is answered, and it must not count this one as another.
        withdraw(state)
    if route.records and _other_writer(state, outcome):
        return outcome
    result = route.handle(state, engine, message)
    if result is None:
        return outcome
    _absorb(state, result, outcome)
    _retention_notices(state, outcome)
    if route.ends_session:
        if state.scheduler is not None and state.scheduler.owed is not False:
            from ledger.retention.after_session import owed_sweep

            state.owed_sweep = owed_sweep(state.scheduler, state.host.session_file)
        state.scheduler = None  # the engine ran its shutdown sweep (or left it owed)
    return outcome
