"""The rewind engine: lifecycle events in, ledger records and exact restores out.

``Engine`` handles an agent's events (session start, prompt, turns, compaction, /tree, /fork,
shutdown); :mod:`ledger.engine.operations` holds the command-style operations (restore, undo,
fork, checkpoint, diff). A host (:class:`SessionHost`) gives the engine the session; the
:class:`FileHost` is the session-file host the CLI uses.
"""

from ledger.engine.engine import Engine, EventResult
from ledger.engine.host import FileHost, SessionHost
from ledger.engine.messages import Notice

__all__ = ["Engine", "EventResult", "FileHost", "Notice", "SessionHost"]
