"""Each bridge event mapped onto the engine's event API.

Why it exists: the protocol's event names and payloads are Pi's (pi-session-format.md §10); the
engine's methods are host-agnostic. This table is the only place that knows both.

Invariants:
- ``session_start`` (re)creates the engine: Pi runs a fresh extension instance after
  ``/new``, ``/resume``, ``/fork``, ``/clone`` and ``/reload``, and state is rebuilt from the
  session each time. Outside a git repository the engine is off and every event is a no-op.
- Events before any ``session_start`` start the engine as a ``startup`` would.
- Info notices are dropped when ``silentCheckpoints`` is on; warnings and errors never are.
- Another writer of ledger records in this session (pi-rewind-hook, or a second copy of ours):
  after its first record we warn once and stand aside (no records, no menus, footer untouched).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger.bridge.protocol import EventMessage
from ledger.errors import NotARepositoryError
from ledger.records import FORK_PENDING, OP, TURN

if TYPE_CHECKING:
    from ledger.bridge.server import BridgeServer, Outcome


def _str(payload: dict[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) and value else None


def _int(payload: dict[str, Any], key: str, default: int = 0) -> int:
    value = payload.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def start_engine(
    server: BridgeServer, cwd: str | None, reason: str, previous: str | None, outcome: Outcome
) -> None:
    from ledger.engine.engine import Engine
    from ledger.errors import ShadowRefusedError
    from ledger.git.shadow import open_work_tree
    from ledger.session.discovery import resolve_agent_dir
    from ledger.settings import load_settings

    server.engine = None
    agent_dir = resolve_agent_dir(server.agent_dir)
    try:
        # Outside git, a shadow repository (docs/shadow.md); a git init since is migrated.
        opened = open_work_tree(cwd or ".", agent_dir, create=True)
    except ShadowRefusedError as exc:
        outcome.notices.append({"level": "warning", "text": f"Rewind: off: {exc.message}"})
        return
    except NotARepositoryError:
        return  # shadow repositories off (or no such directory): rewind is off, as the reference
    repo = opened.repo
    for notice in opened.notices:
        outcome.notices.append({"level": "info", "text": f"Rewind: {notice}"})
    settings, warnings = load_settings(agent_dir, repo.root)
    server.settings = settings
    for warning in warnings:
        outcome.notices.append({"level": "warning", "text": f"Rewind: {warning}"})
    server.scheduler = _scheduler(server, repo, agent_dir, settings)
    server.engine = Engine(server.host, repo, settings=settings, retention=server.scheduler)
    _absorb(
        server,
        server.engine.session_start(reason if reason in _REASONS else "startup", previous),
        outcome,
    )
    server.host.watch_writers()
    _retention_notices(server, outcome)


LEDGER_TYPES = frozenset({TURN, OP, FORK_PENDING})
OTHER_WRITER = (
    "Rewind: another rewind extension is recording this session too (pi-rewind-hook, or a second copy "
    "of rewind-ledger): rewind-ledger stops recording and shows no menus in this session, so that each "
    "prompt is recorded once. Keep one: remove the other from ~/.pi/agent/extensions/ or from "
    '"packages" in ~/.pi/agent/settings.json (pi remove <source>), then restart Pi or run /reload.'
)
_WATCHED = frozenset(
    {
        "turn_start",
        "turn_end",
        "agent_end",
        "session_compact",
        "session_before_tree",
        "session_tree",
        "session_before_fork",
        "checkpoint_entry",
        "session_shutdown",
    }
)


def _other_writer(server: BridgeServer, outcome: Outcome) -> bool:
    """True when another extension writes ledger records here: then we stand aside (D-dup)."""
    if server.passive:
        return True
    foreign = server.host.foreign_records(LEDGER_TYPES)
    if not foreign:
        return False
    server.passive = True
    outcome.notices.append({"level": "warning", "text": OTHER_WRITER})
    return True


_REASONS = frozenset({"startup", "resume", "new", "fork", "reload"})


def _scheduler(server: BridgeServer, repo: Any, agent_dir: Any, settings: Any) -> Any:
    from ledger.retention.scheduler import SweepScheduler

    if settings.retention is None:
        return None
    # Pi owns the session and may not have written it yet: sweep from the mirrored entries.
    return SweepScheduler(repo, agent_dir, settings, server.host.session)


def _absorb(server: BridgeServer, result: Any, outcome: Outcome) -> None:
    silent = server.settings is not None and server.settings.silent_checkpoints
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


def _latest_assistant(engine: Any) -> str | None:
    session = engine.session()
    for entry in reversed(session.branch(engine.host.leaf_id())):
        if entry.type == "message" and entry.role == "assistant":
            return entry.id
        if entry.type == "message" and entry.role == "user":
            return None
    return None


def dispatch(server: BridgeServer, message: EventMessage) -> Outcome:
    from ledger.bridge.server import Outcome

    outcome = Outcome()
    payload, event, ctx = message.payload, message.event, message.ctx
    if event == "ping":
        return outcome
    if event == "session_start":
        start_engine(
            server,
            ctx.cwd,
            _str(payload, "reason") or "startup",
            _str(payload, "previousSessionFile"),
            outcome,
        )
        return outcome
    if server.engine is None and server.settings is None:
        start_engine(server, ctx.cwd, "startup", None, outcome)
    engine = server.engine
    if engine is None:
        return outcome
    if event in _WATCHED and _other_writer(server, outcome):
        return outcome
    choose = server.host.select if ctx.has_ui else None
    if event == "before_agent_start":
        result = engine.before_agent_start(_str(payload, "prompt") or "")
        if not server.passive:
            outcome.panel = []  # a new prompt: the last rewind action's panel has been read
    elif event == "turn_start":
        result = engine.turn_start(_int(payload, "turnIndex"))
    elif event == "message_end":
        return outcome  # the entry is written after this event (§10.2); turn_end binds it
    elif event == "turn_end":
        # Pi's assistant message is matched by its timestamp (the reference's rule); a host that
        # sends only the role gets the latest assistant message of the prompt on the branch.
        message_value = payload.get("message")
        if isinstance(message_value, dict) and message_value.get("timestamp") is not None:
            result = engine.turn_end(_int(payload, "turnIndex"), message=message_value)
        elif payload.get("role", "assistant") != "assistant":
            return outcome
        else:
            result = engine.turn_end(
                _int(payload, "turnIndex"), assistant_entry_id=_latest_assistant(engine)
            )
    elif event == "agent_end":
        result = engine.agent_end()
    elif event == "session_compact":
        entry = _str(payload, "compactionEntryId")
        if entry is None:
            return outcome
        result = engine.compact(entry)
    elif event == "session_before_tree":
        target = _str(payload, "targetId")
        if target is None:
            return outcome
        result = engine.before_tree(target, choose, has_ui=ctx.has_ui)
    elif event == "session_tree":
        result = engine.tree(
            _str(payload, "newLeafId"), summary_entry_id=_str(payload, "summaryEntryId")
        )
    elif event == "session_before_fork":
        entry = _str(payload, "entryId")
        if entry is None:
            return outcome
        result = engine.before_fork(entry, choose, has_ui=ctx.has_ui)
    elif event == "session_shutdown":
        result = engine.shutdown(_str(payload, "reason") or "quit")
        _absorb(server, result, outcome)
        _retention_notices(server, outcome)
        server.scheduler = None  # the engine ran its shutdown sweep
        return outcome
    elif event == "checkpoint_entry":
        entry = _str(payload, "entryId")
        if entry is None:
            return outcome
        result = engine.checkpoint_entry(entry, _str(payload, "source"))
    elif event == "fork_preference":
        engine.fork_preference(_str(payload, "mode") or "", _str(payload, "source") or "")
        return outcome
    else:  # pragma: no cover - EVENT_NAMES and this table are kept in step by a test
        return outcome
    _absorb(server, result, outcome)
    _retention_notices(server, outcome)
    return outcome


def _retention_notices(server: BridgeServer, outcome: Outcome) -> None:
    if server.scheduler is not None:
        for level, text in server.scheduler.drain_notices():
            outcome.notices.append({"level": level, "text": text})
