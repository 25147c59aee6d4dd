"""``rewind serve --stdio``: the engine as a long-running process behind a line protocol.

Why it exists: Pi's extension (tools/pi-extension/rewind-ledger.ts) stays thin; every rewind
decision is made here, by the same :class:`~ledger.engine.engine.Engine` the CLI uses, with a
:class:`~ledger.bridge.host.BridgeHost` that reaches Pi's session through calls.

Invariants:
- One event at a time: the bridge reads an event, handles it (issuing calls and reading their
  replies in between), and writes exactly one ``result`` or ``error`` with the event's id.
- Malformed JSON, unknown message types and unknown events get an ``error`` reply and the loop
  goes on; so does any failure inside a handler (an internal error is reported, never raised).
- The bridge never writes the session file: records go to the host (``pi.appendEntry``).
- End of input ends the bridge, after a retention sweep in flight has finished.
- A stop between events (:meth:`BridgeServer.stop_between_events`, under
  :attr:`BridgeServer.between_events`; a watcher that hosts sessions and is being stopped)
  never cuts an event: the one being handled finishes, and a line read after it is not started.
- ``REWIND_TRACE=<file>`` appends one JSON line per event: the time the bridge spent on it, the
  part of it spent waiting for the host's replies, the footer's share, and when it began
  (``at``, seconds since the epoch: a timeline beside the host's own) (for benchmarks and bug
  reports; nothing else reads it).
- Sessions here (docs/design.md#sessions-here): while another live session shares the work tree
  the footer ends with `` · N sessions here``, and each session is told once (a warning notice)
  of every other session it learns of: at its ``session_start``, or at the first event after
  the other one started (no push). The registry is listed for this at event time through a
  :class:`~ledger.work_tree_scope.ScopeView` (the registries of nested plain directories too;
  again only when one changed or a second passed), never while a capture runs. The entry is
  withdrawn when the bridge ends.
- Another session's restore (docs/design.md#telling-the-other-session): the notices it left for
  this session are taken after each event and shown in that event's reply (a warning, the
  panel, the footer until the next prompt; :mod:`ledger.bridge.overwrites`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ledger.bridge import wire_json
from ledger.bridge.dispatch import BridgeState, Outcome, dispatch, finish_start, withdraw
from ledger.bridge.host import BridgeHost, HostCallError
from ledger.bridge.overwrites import show_overwrites
from ledger.bridge.protocol import (
    EVENT_NAMES,
    SKIPPED_EVENTS,
    BadHostMessage,
    ErrorCode,
    EventMessage,
    ReplyMessage,
    decode_host_message,
)
from ledger.errors import LedgerError
from ledger.loaded_modules import finished
from ledger.presence import Kind, footer_mark, others_notice
from ledger.work_tree_scope import ScopeView

if TYPE_CHECKING:
    from ledger.retention.after_session import OwedSweep
    from ledger.retention.scheduler import SweepStart
    from ledger.session.model import Session


MAX_AHEAD = 64
"""Events a host may write while a call of ours waits for its reply (more are refused)."""


class BridgeClosed(Exception):
    """The host closed its end while the bridge waited for a reply."""


class BridgeServer:
    """Serve one extension instance (one Pi session) until end of input."""

    def __init__(
        self,
        reader: IO[bytes],
        writer: IO[bytes],
        *,
        agent_dir: Path | None = None,
        on_first_event: Callable[[EventMessage], None] | None = None,
        kind: Kind = "bridge",
        pi_pid: int | None = None,
    ) -> None:
        """``kind``: ``bridge`` for a process of its own (:func:`serve_stdio`), ``hosted`` for the
        watcher's sessions (:mod:`ledger.bridge.hosted`). ``pi_pid``: the Pi process served
        (shown in the listings instead of this process's)."""
        self.reader = reader
        self.writer = writer
        self._on_first_event = on_first_event
        self.state = BridgeState(BridgeHost(self._call), agent_dir, kind=kind, pi_pid=pi_pid)
        self._presence = ScopeView()  # nested directories' sessions too (work_tree_scope)
        self._told: set[str] = set()
        """The other sessions (entry stems) this session was told of."""
        self._calls = 0
        self._status: str | None = None
        self._status_key: tuple[int, int, str | None] | None = None
        self._counted: tuple[int, str | None] | None = None
        """The entries held and the leaf when the footer's points were last counted."""
        self._trace_path = os.environ.get("REWIND_TRACE") or None
        self._waited_s = 0.0
        self._footer_s = 0.0
        self.between_events = threading.Lock()
        """Held while an event is handled: whoever holds it knows no event is half-done."""
        self._stopping = False
        self._ahead: deque[bytes] = deque()
        """Events the host wrote while a call of ours waited for its reply, in order."""
        self.warming: threading.Thread | None = None
        """What the last ``session_start`` prepares in the background (:mod:`.warm_up`)."""

    # --- wire -------------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        # orjson once loaded; the standard library for a spawned bridge's first answer (issue 34)
        self.writer.write(wire_json.dumps_line(message))
        self.writer.flush()

    def _error(self, event_id: int | str | None, code: ErrorCode, message: str) -> None:
        self._send({"type": "error", "id": event_id, "error": {"code": code, "message": message}})

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        """Ask the host and wait for its reply. An event that comes meanwhile (a host may write
        an event before the one before it is answered: README, "The bridge protocol") is kept,
        at most :data:`MAX_AHEAD`, for :meth:`serve` to handle after this one; anything else is
        refused."""
        self._calls += 1
        call_id = f"c{self._calls}"
        self._send({"type": "call", "id": call_id, "method": method, "params": params})
        while True:
            started = time.perf_counter()
            line = self.reader.readline()
            self._waited_s += time.perf_counter() - started
            if not line:
                raise BridgeClosed
            message = self._decode(line)
            if message is None:
                continue
            if isinstance(message, ReplyMessage) and message.id == call_id:
                if message.error is not None:
                    raise HostCallError(f"the host refused '{method}': {message.error}")
                return message.result
            if isinstance(message, EventMessage) and len(self._ahead) < MAX_AHEAD:
                self._ahead.append(line)  # decoded again when its turn comes: cheap, and rare
                continue
            # The host must answer our call before anything but events.
            self._error(
                message.id,
                "bad-message",
                f"expected the reply to call {call_id} ({method}) first",
            )

    def _decode(self, line: bytes) -> EventMessage | ReplyMessage | None:
        """A host message, or None after replying with the reason it is unusable."""
        if not line.strip():
            return None
        try:
            raw = wire_json.loads(line)
        except json.JSONDecodeError as exc:  # orjson's error too (a subclass)
            self._error(None, "bad-json", f"not valid JSON: {exc}")
            return None
        if not isinstance(raw, dict):
            self._error(None, "bad-message", "a message must be a JSON object")
            return None
        event = raw.get("event")
        # Not `in EVENT_NAMES` alone: a list or an object is unhashable (it ended the bridge).
        if raw.get("type") == "event" and not (isinstance(event, str) and event in EVENT_NAMES):
            self._error(raw.get("id"), "unknown-event", f"unknown event: {event!r}")
            return None
        try:
            return decode_host_message(raw)  # pydantic only for an unusual message
        except BadHostMessage as exc:
            self._error(raw.get("id"), "bad-message", exc.text)
            return None

    # --- loop -------------------------------------------------------------------------------

    def serve(self) -> int:
        try:
            while True:
                line = self._ahead.popleft() if self._ahead else self.reader.readline()
                if not line:
                    break
                with self.between_events:
                    if self._stopping:
                        break  # read but not started: the host sees the end, nothing half-done
                    self._serve_line(line)
        except BridgeClosed:
            pass
        finally:
            self._finish()
        return 0

    def _serve_line(self, line: bytes) -> None:
        message = self._decode(line)
        if message is None:
            return
        if isinstance(message, ReplyMessage):
            self._error(message.id, "bad-message", "a reply with no call waiting for it")
            return
        first, self._on_first_event = self._on_first_event, None
        self._handle(message)
        if first is not None:
            # After the answer: what it starts (the bridge's own change feed, whose walk of the
            # tree holds the GIL in turns) must not slow the answer Pi awaits (issue 34: ~20 ms
            # of a session_start at 100k files). Before the engine's start below: a pi -p
            # bridge's walk then runs while the engine loads (ledger/cli/serve.py).
            first(message)
        if self.state.pending is not None:
            # A session_start answered without the engine (ledger/bridge/quick_start.py): start
            # it now, before the next line is read, so that every later event finds it.
            finish_start(self.state)
        if message.event == "session_start":
            # After the answer too: the first /rewind of the session then costs what a later
            # one does (the index loaded, the list's diffs kept, the feed's base scan taken).
            from ledger.bridge.warm_up import after_session_start  # the engine's imports

            self.warming = after_session_start(
                self.state, has_ui=message.ctx.has_ui, busy=self.between_events
            )

    def stop_between_events(self) -> None:
        """Start no further event (call with :attr:`between_events` held); the loop ends at
        the next line or at the end of input."""
        self._stopping = True

    def _handle(self, message: EventMessage) -> None:
        if self._trace_path is None:
            self._handle_event(message)
            return
        at, started, calls = time.time(), time.perf_counter(), self._calls
        self._waited_s = self._footer_s = 0.0
        self._handle_event(message)
        line = wire_json.dumps_line(
            {
                "event": message.event,
                "ms": round((time.perf_counter() - started) * 1000, 2),
                "hostMs": round(self._waited_s * 1000, 2),
                "calls": self._calls - calls,
                "footerMs": round(self._footer_s * 1000, 2),
                "at": round(at, 4),
            }
        )
        with open(self._trace_path, "ab") as trace:
            trace.write(line)

    def _handle_event(self, message: EventMessage) -> None:
        try:
            outcome = self._dispatch(message)
        except BridgeClosed:
            raise
        except LedgerError as exc:
            self._error(message.id, "failed", exc.message)
            return
        except Exception as exc:
            self._error(message.id, "internal", f"{type(exc).__name__}: {exc}")
            return
        reply: dict[str, Any] = {
            "type": "result",
            "id": message.id,
            "result": outcome.result,
            "notices": outcome.notices,
        }
        if not self.state.passive:
            started = time.perf_counter()
            show_overwrites(self.state, outcome)  # another session's restore (issue 33)
            others = self._others(outcome)
            reply["status"] = self._footer(recount=message.event != "message_end", others=others)
            self._footer_s = time.perf_counter() - started
        if outcome.panel is not None:
            reply["panel"] = outcome.panel
        if message.event == "session_start":
            # Events a host may leave out (six of a prompt's round trips: issue 34, per prompt).
            reply["skip"] = list(SKIPPED_EVENTS)
        self._send(reply)

    def _finish(self) -> None:
        withdraw(self.state)  # before waiting: the session is over for everyone else
        early = finished("ledger.git.capture.prefetch")
        if early is not None:
            # A pi -p bridge's first status, never taken (no prompt came): it holds the capture
            # lock, which the sweep waited for below may need (ledger/git/feed/early_status.py).
            early.stop()
        if self.state.scheduler is not None:
            self.state.scheduler.wait()  # the host is gone: finish a sweep in flight, start none

    # --- events -----------------------------------------------------------------------------

    def _dispatch(self, message: EventMessage) -> Outcome:
        self.state.host.begin_event(message.ctx.session_file, message.ctx.leaf_id, message.session)
        return dispatch(self.state, message)

    def _others(self, outcome: Outcome) -> int:
        """How many other live sessions share this work tree; adds the notice about the ones
        this session was not told of yet to ``outcome``'s notices (already in the reply)."""
        git_dir, own = self.state.git_dir, self.state.presence
        if git_dir is None:
            return 0
        try:
            live = self._presence.live(git_dir)
        except OSError:
            return 0  # the registry is a courtesy: never fail an event for it
        stem = own.presence.stem if own is not None else None
        others = [entry for entry in live if entry.stem != stem]
        new = [entry for entry in others if entry.stem not in self._told]
        if new:
            self._told.update(entry.stem for entry in new)
            outcome.notices.append({"level": "warning", "text": others_notice(new)})
        return len(others)

    def _footer(self, *, recount: bool = True, others: int = 0) -> str | None:
        """``◆ N points / M snapshots`` (docs/design.md#the-footer); None when silent or outside a
        repository. D14 fixed: N counts the entries **on the branch the user is on** (root → the
        live leaf) with an exact rewind point **through lineage** (a fresh fork shows its parent's
        points, which it can restore), M the distinct snapshots among them. Recomputed only when
        the mirrored session or the leaf changed (so after /tree, /fork, a restore or an undo),
        and not for a turn's messages alone (:meth:`_only_messages_since_count`). ``recount=False`` (``message_end``: it records nothing, its entry is bound by the next
        ``turn_end``) keeps the last count: a count walks the branch, ~0.5 ms per event."""
        engine, settings = self.state.engine, self.state.settings
        if settings is None or settings.silent_checkpoints:
            return None
        if engine is None and self.state.pending is None:
            return None
        session = self.state.host.session_for_status()
        leaf = self.state.host.known_leaf()
        key = (id(session), len(session.entries), leaf)
        if key != self._status_key and engine is None:
            # A session_start answered before the engine (ledger/bridge/quick_start.py): only
            # for a session with no ledger records and no parent, so no points to count.
            self._status = "◆ 0 points / 0 snapshots"
            self._status_key = key
        elif key != self._status_key and self._only_messages_since_count(session, leaf):
            # A turn's messages and nothing else, on from the counted leaf: none of them is a
            # point before a record binds it, so the count stands (~0.5 ms an event: issue 34).
            self._status_key = key
        elif key != self._status_key and (recount or self._status_key is None):
            assert engine is not None
            points = engine.reader.lineage(session).points(engine.repo.commit_exists)
            on_branch = [
                points[entry.id][0] for entry in session.branch(leaf) if entry.id in points
            ]
            self._status = f"◆ {len(on_branch)} points / {len(set(on_branch))} snapshots"
            from ledger.git.shadow.layout import ShadowRepo  # loaded with the engine already

            if isinstance(engine.repo, ShadowRepo):
                # Not a git repository: say where the points are kept (docs/shadow.md).
                self._status += " · shadow repository"
            self._status_key = key
            self._counted = (len(session.entries), leaf)
        # Another session's restore first: the prompt's note must not hide it (issue 33).
        notes = [n for n in (self.state.overwrite_note, self.state.status_note) if n]
        status = " · ".join([self._status, *notes]) if self._status else self._status
        return status + footer_mark(others + 1) if status else status

    def _only_messages_since_count(self, session: Session, leaf: str | None) -> bool:
        """Whether the mirrored session only grew by message entries since the last count, and
        the leaf only moved down along them (so the branch counted is a prefix of this one)."""
        counted = self._counted
        if counted is None or self._status is None:
            return False
        held, counted_leaf = counted
        entries = session.entries
        if len(entries) < held:
            return False  # a new mirror (the host reset): count again
        new: dict[str, str | None] = {}
        for entry in entries[held:]:
            if entry.type != "message":
                return False  # a record, a compaction, a navigation's summary…: count again
            new[entry.id] = entry.parent_id
        here = leaf
        while here != counted_leaf:
            if here not in new:
                return False  # elsewhere in the tree (a /tree move): count again
            here = new.pop(here)
        self._counted = (len(entries), leaf)
        return True


def serve_stdio(
    agent_dir: Path | None = None,
    *,
    on_first_event: Callable[[EventMessage], None] | None = None,
    owed: list[OwedSweep] | None = None,
    hand_off: Callable[[], bool] | None = None,
) -> int:
    """Run the bridge on this process's stdin and stdout; ``on_first_event`` sees the first
    event once it is answered (``rewind serve`` learns from it whether Pi has a UI). With
    ``owed``, a print-mode session starts no startup sweep, and its shutdown sweep is put there
    for the caller to hand to a watcher when ``hand_off()`` (asked in the shutdown answer) says
    one will be started and the session file holds the session; else the answer sweeps, as
    ever (:mod:`ledger.retention.after_session`)."""
    server = BridgeServer(
        sys.stdin.buffer,
        sys.stdout.buffer,
        agent_dir=agent_dir,
        on_first_event=on_first_event,
        kind="bridge",
        # Pi spawns the bridge itself (tools/pi-extension/rewind-ledger.ts): its parent is the
        # Pi the user sees (a wrapper in REWIND_BRIDGE_CMD would be named instead; 1: orphaned).
        pi_pid=os.getppid() if os.getppid() > 1 else None,
    )
    server.state.sweeps_after_session = owed is not None
    if owed is not None:
        server.state.defer_sweep = lambda session: _handed_off(hand_off, session)
    try:
        return server.serve()
    finally:
        if owed is not None and server.state.owed_sweep is not None:
            owed.append(server.state.owed_sweep)


def _handed_off(hand_off: Callable[[], bool] | None, session: SweepStart) -> bool:
    """Whether the shutdown sweep of ``session`` goes to a watcher (see :func:`serve_stdio`)."""
    if hand_off is None or not hand_off():
        return False
    from ledger.retention.after_session import holds_session  # the engine is loaded by now

    return holds_session(session)
