"""Changes the agent did not make: what differs between the latest rewind point and the files now.

Why it exists: a restore overwrites whatever is in the work tree. When the user edited files by
hand after the agent's last turn (or another tool did), that work is replaced; ``rewind undo``
brings it back, but only if the user knows to look (issue 14, docs/design.md#outside-changes).
This module turns the leaf changes between two trees (the session's latest rewind point on the
branch, and a capture of the work tree now) into values the plan, ``rewind status`` and the
Pi menus show, and words them.

Invariants: pure (no I/O, no git): the trees are compared by the git layer
(:func:`ledger.git.restore.safety.tree_changes`), whose leaf changes come in here as values with
``path`` and ``old``/``new`` sides of ``mode``/``oid`` (``None`` for an absent side, or a
directory there). Paths are repository-relative, ``/``-separated, sorted as they come in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, Protocol

from ledger.plain import FrozenPlain
from ledger.quoting import display_name

ChangeKind = Literal["added", "modified", "deleted", "mode", "symlink"]

KINDS: tuple[ChangeKind, ...] = ("added", "modified", "deleted", "mode", "symlink")
LETTERS: dict[ChangeKind, str] = {
    "added": "A",
    "modified": "M",
    "deleted": "D",
    "mode": "X",
    "symlink": "L",
}
"""One letter per kind for ``rewind status`` (A, M, D as in ``git status``; X: only the
executable bit changed; L: a symlink's target changed, or a file became a symlink or back)."""

_LINK = 0o120000
_REGULAR = frozenset({0o100644, 0o100755})
_EXEC = 0o100755

SHOWN = 3
"""How many paths a one-line warning names before it says ``(+N more)``."""


class Side(Protocol):
    """One side of a leaf change (``ledger.git.restore.safety.Entry`` is one)."""

    @property
    def mode(self) -> int: ...

    @property
    def oid(self) -> str: ...


class LeafChange(Protocol):
    """One leaf path that differs between two trees (``restore_safety.Change`` is one)."""

    @property
    def path(self) -> str: ...

    @property
    def old(self) -> Side | None: ...

    @property
    def new(self) -> Side | None: ...


class OutsideChange(FrozenPlain):
    """One path changed since the latest rewind point, and how."""

    __slots__ = ("change", "detail", "path", "since")
    path: str
    change: ChangeKind
    detail: str | None
    """``+x``/``-x`` for a mode change; ``target`` (the link points elsewhere) or ``type`` (a
    file became a symlink or back) for a symlink change; otherwise ``None``."""
    since: str | None
    """For older own work: the entry (a prompt) whose point first kept it; ``None`` for a
    change since the latest rewind point."""

    def __init__(
        self, path: str, change: ChangeKind, detail: str | None = None, since: str | None = None
    ) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "change", change)
        object.__setattr__(self, "detail", detail)
        object.__setattr__(self, "since", since)

    def _fields(self) -> tuple[object, ...]:
        return (self.path, self.change, self.detail, self.since)

    @property
    def letter(self) -> str:
        return LETTERS[self.change]

    def to_json(self) -> dict[str, str | None]:
        return {
            "path": self.path,
            "change": self.change,
            "detail": self.detail,
            "since": self.since,
        }


def classify_one(change: LeafChange) -> OutsideChange:
    """How ``change`` (from the point's tree to the tree now) changed its path.

    A content change together with an exec-bit change is ``modified`` (the content is what a
    user would lose); a submodule (gitlink) is ``added``/``deleted``/``modified`` like a file."""
    old, new = change.old, change.new
    if old is None:
        return OutsideChange(change.path, "added")
    if new is None:
        return OutsideChange(change.path, "deleted")
    if old.mode == _LINK or new.mode == _LINK:
        return OutsideChange(
            change.path, "symlink", "target" if old.mode == new.mode == _LINK else "type"
        )
    if old.mode in _REGULAR and new.mode in _REGULAR and old.oid == new.oid:
        return OutsideChange(change.path, "mode", "+x" if new.mode == _EXEC else "-x")
    return OutsideChange(change.path, "modified")


def classify(changes: Iterable[LeafChange]) -> tuple[OutsideChange, ...]:
    return tuple(classify_one(c) for c in changes)


def outside_skipped(
    changes: Sequence[OutsideChange], prefixes: Sequence[str]
) -> tuple[OutsideChange, ...]:
    """``changes`` without the paths at or under ``prefixes`` (a capture's protected or skipped
    paths, directories ending with ``/``): a restore leaves those alone."""
    if not prefixes:
        return tuple(changes)
    bare = [p.rstrip("/") for p in prefixes]
    return tuple(
        c for c in changes if not any(c.path == p or c.path.startswith(p + "/") for p in bare)
    )


def overwritten(
    changes: Sequence[OutsideChange], touched: Iterable[str]
) -> tuple[OutsideChange, ...]:
    """The outside changes a restore would overwrite or delete: those whose path the restore
    writes or deletes (``touched``: its added, modified and deleted paths).

    A path changed outside the agent that already equals the target is not in ``touched`` (the
    restore does not write it) and is not listed: nothing of the user's is lost there."""
    paths = set(touched)
    return tuple(c for c in changes if c.path in paths)


def counts(changes: Sequence[OutsideChange]) -> dict[ChangeKind, int]:
    """``{kind: n}`` for every kind, in :data:`KINDS` order."""
    out: dict[ChangeKind, int] = dict.fromkeys(KINDS, 0)
    for c in changes:
        out[c.change] += 1
    return out


def count_text(changes: Sequence[OutsideChange]) -> str:
    """``1 added, 2 modified, 1 mode change`` (kinds present only)."""
    names = {
        "added": "added",
        "modified": "modified",
        "deleted": "deleted",
        "mode": "mode change",
        "symlink": "symlink change",
    }
    parts = []
    for kind, n in counts(changes).items():
        if n:
            noun = names[kind]
            plural = n > 1 and kind in ("mode", "symlink")
            parts.append(f"{n} {noun}{'s' if plural else ''}")
    return ", ".join(parts)


def plan_counts(added: Sequence[str], modified: Sequence[str], deleted: Sequence[str]) -> str:
    """``1 added, 2 modified, 1 deleted`` (kinds present only; ``no file changes`` for none): the
    one wording and order of a restore's counts, in the panel, the menus, ``rewind restore``,
    ``rewind diff`` and ``/rewind``."""
    return count_words(len(added), len(modified), len(deleted))


def count_words(added: int, modified: int, deleted: int) -> str:
    """:func:`plan_counts` from the numbers alone."""
    parts = [
        f"{n} {name}"
        for name, n in (("added", added), ("modified", modified), ("deleted", deleted))
        if n
    ]
    return ", ".join(parts) if parts else "no file changes"


def plan_files(
    added: Sequence[str], modified: Sequence[str], deleted: Sequence[str], limit: int = 4
) -> str:
    """``A new.txt  M a.txt  D old.txt (+2 more)``: the first few files a restore changes, with
    ``rewind status``'s letters, added first (empty for none); names as git quotes them where
    needed (:func:`ledger.quoting.display_name`)."""
    named = [
        *(f"A {display_name(p)}" for p in added),
        *(f"M {display_name(p)}" for p in modified),
        *(f"D {display_name(p)}" for p in deleted),
    ]
    shown = "  ".join(named[:limit])
    more = len(named) - limit
    return f"{shown} (+{more} more)" if more > 0 else shown


def short_list(paths: Sequence[str], limit: int = SHOWN) -> str:
    """``a.txt, b.txt, c.txt (+2 more)`` (names as git quotes them where needed)."""
    shown = ", ".join(display_name(p) for p in paths[:limit])
    more = len(paths) - limit
    return f"{shown} (+{more} more)" if more > 0 else shown


def files(n: int) -> str:
    return f"{n} file{'s' if n != 1 else ''}"


def plan_warning(changes: Sequence[OutsideChange], *, undo: str) -> str | None:
    """The plan's line about overwritten outside changes, or ``None`` when there are none.

    ``undo`` names how to get them back where the user is (``rewind undo @`` on the command
    line, "Undo last file rewind" in Pi's menus)."""
    if not changes:
        return None
    paths = [c.path for c in changes]
    hold = "holds" if len(changes) == 1 else "hold"
    return (
        f"{files(len(changes))} {hold} your own work, not the agent's, and will be overwritten: "
        f"{short_list(paths)}; {undo} brings {_them(changes)} back"
    )


def _them(changes: Sequence[OutsideChange]) -> str:
    return "them" if len(changes) != 1 else "it"


def done_warning(changes: Sequence[OutsideChange], *, undo: str) -> str | None:
    """After the restore: the same, in the past tense."""
    if not changes:
        return None
    paths = [c.path for c in changes]
    return (
        f"overwrote {files(len(changes))} that held your own work, not the agent's: "
        f"{short_list(paths)}; {undo} brings {_them(changes)} back"
    )


def others_warning(label: str, paths: Sequence[str], *, undo: str, done: bool = False) -> str:
    """The plan's (``done``: the result's) line about files another session's agent wrote:
    ``2 files written by session 01a2b3c4… (still running) will be overwritten: src/app.py,
    api.ts; "Undo last file rewind" brings them back``. ``label`` names the session
    (:attr:`ledger.engine.neighbours.Neighbour.label`)."""
    them = "them" if len(paths) != 1 else "it"
    if done:
        head = f"overwrote {files(len(paths))} written by {label}: {short_list(paths)}"
    else:
        head = f"{files(len(paths))} written by {label} will be overwritten: {short_list(paths)}"
    return f"{head}; {undo} brings {them} back"


def prompt_note(changes: Sequence[OutsideChange]) -> str | None:
    """The status-line note at the start of a prompt whose pre-prompt snapshot keeps changes
    made outside the agent, or ``None``."""
    if not changes:
        return None
    n = len(changes)
    return (
        f"rewind: kept your {n} changed file{'s' if n != 1 else ''} as a point before this prompt"
    )


__all__ = [
    "KINDS",
    "LETTERS",
    "ChangeKind",
    "LeafChange",
    "OutsideChange",
    "classify",
    "classify_one",
    "count_text",
    "count_words",
    "counts",
    "done_warning",
    "files",
    "others_warning",
    "outside_skipped",
    "overwritten",
    "plan_counts",
    "plan_files",
    "plan_warning",
    "prompt_note",
    "short_list",
]
