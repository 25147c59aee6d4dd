"""Value classes that cost nothing to create: what ``@dataclass`` gives, without compiling it.

Why it exists: a spawned bridge answers Pi's ``session_start`` within ~100 ms at 100k files
(issue 34), and each ``@dataclass`` on its way costs ~1-1.5 ms at import (its ``__init__``,
``__repr__``, ``__eq__``, ``__hash__`` are generated as source and compiled per class). A class
deriving from :class:`Plain` or :class:`FrozenPlain` lists its fields in ``__slots__`` and
writes its ``__init__`` (the constructor's order is the dataclass's); the methods here are
compiled once, with this module. The engine's import path uses them too (69 classes: every
cold command and the first ``pi -p`` of the day import it; 75-132 ms less than as dataclasses),
and so does the rest of a cold ``rewind restore``/``undo`` (19 more, settings included: ~12 ms
of dataclass processing less per process, 2026-11-29).
A class made per file or per record sets its fields with ``object.__setattr__`` and spells out
:meth:`Plain._fields` (``tests/unit/test_plain_fields.py`` holds that tuple to the slots).

Invariants (each what ``@dataclass`` / ``@dataclass(frozen=True)`` does):
- ``==`` compares the field tuples of two objects of the very same class (else
  ``NotImplemented``); a :class:`Plain` is unhashable, a :class:`FrozenPlain` hashes its field
  tuple;
- ``repr`` is ``Name(field=value, ...)``, in ``__slots__`` order (sorted, as ruff keeps it);
- a :class:`FrozenPlain` refuses assignment and deletion (:class:`AttributeError`, of which
  dataclasses' ``FrozenInstanceError`` is a subclass); its ``__init__`` sets fields with
  :meth:`FrozenPlain._init`.
Not ``dataclasses.replace``/``fields``/``asdict``: a class that needs them stays a dataclass,
or spells out the copies it needs (``RestorePlan.with_scan``, ``SnapshotSettings.replace``). A
dataclass field with ``compare=False``/``repr=False`` becomes a class that overrides
:meth:`Plain._names` (the fields ``==``, hash and repr use), as ``RestorePlan`` does.
"""

from __future__ import annotations


class Plain:
    """A mutable value: fields in ``__slots__``; ``==`` and ``repr`` by fields."""

    __slots__ = ()

    def _names(self) -> tuple[str, ...]:
        names: tuple[str, ...] = type(self).__slots__
        return names

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._names())

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Plain)
        return self._fields() == other._fields()

    # No __hash__: Python sets it to None for a class defining __eq__ (unhashable, as a
    # dataclass with eq and not frozen).

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._names())
        return f"{self.__class__.__qualname__}({fields})"


class FrozenPlain(Plain):
    """An immutable value: as :class:`Plain`, hashable, fields set once by ``__init__``."""

    __slots__ = ()

    def _init(self, **fields: object) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __hash__(self) -> int:
        return hash(self._fields())


__all__ = ["FrozenPlain", "Plain"]
