"""The file state a rewind action leaves behind: which snapshot the files equal, and which one
undoes the action.

Why it exists: a ``/tree`` navigation, a fork hand-off and a command-style fork each decide a
file state before the record that carries it can be written (after the navigation, in the fork
record, or in the parent when the fork does not happen). The engine and
:mod:`ledger.engine.operations` pass it between those two moments as this value.

Invariants: ``current`` names the snapshot commit the work tree equals after the action; ``undo``
the snapshot a restore replaced, ``None`` when there is nothing to undo (the files were kept, or
the restore changed none), and then no undo is recorded. The value is immutable.
"""

from __future__ import annotations

from ledger.plain import FrozenPlain


class FileState(FrozenPlain):
    """The files after a rewind action: ``current``, and what undoes the action (``undo``)."""

    __slots__ = ("current", "undo")
    current: str
    undo: str | None

    def __init__(self, current: str, undo: str | None = None) -> None:
        object.__setattr__(self, "current", current)
        object.__setattr__(self, "undo", undo)

    def _fields(self) -> tuple[object, ...]:
        return (self.current, self.undo)


__all__ = ["FileState"]
