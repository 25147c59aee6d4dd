"""The rewind engine: lifecycle events in, ledger records and exact restores out.

``Engine`` handles an agent's events (session start, prompt, turns, compaction, /tree, /fork,
shutdown); :mod:`ledger.engine.operations` holds the command-style operations (restore, undo,
fork, checkpoint, diff). A host (:class:`SessionHost`) gives the engine the session; the
:class:`FileHost` is the session-file host the CLI uses. :class:`FileState` is the file state
a rewind action hands on (to the record written after a navigation, or to a fork).
"""

from ledger.engine.engine import Engine, EventResult
from ledger.engine.filestate import FileState
from ledger.engine.host import FileHost, SessionHost
from ledger.engine.messages import Notice

__all__ = ["Engine", "EventResult", "FileHost", "FileState", "Notice", "SessionHost"]
