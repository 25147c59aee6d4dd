"""What a rewind would do, as values: the ``/rewind`` list, a point's preview, its files and
actions (docs/pi.md#rewind), and their JSON as the bridge sends it to the extension.

Why it exists: the values and their wire shape are one thing to read and pin (the extension's
TypeScript types mirror them); how they are computed is :mod:`ledger.engine.preview`'s.

Invariants: plain values, no I/O; ``to_json`` is the wire format (field names are the
extension's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ledger.engine.changes_since import MENU_UNDO
from ledger.engine.neighbours import WrittenByOther
from ledger.outside_rules import OutsideChange, count_words, others_warning, plan_warning


@dataclass(frozen=True)
class Counts:
    """What a restore would change. ``added``/``modified``/``deleted`` hold every path, or for a
    listed point only the first few names of each (then ``sizes`` holds the real counts)."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    sizes: tuple[int, int, int] | None = None

    @property
    def numbers(self) -> tuple[int, int, int]:
        if self.sizes is not None:
            return self.sizes
        return len(self.added), len(self.modified), len(self.deleted)

    @property
    def words(self) -> str:
        return count_words(*self.numbers)

    def to_json(self) -> dict[str, Any]:
        a, m, d = self.numbers
        # As plan_files words it: the first four, added first (the samples hold at least the
        # first four of each kind), then how many more.
        named = [
            *(f"A {p}" for p in self.added),
            *(f"M {p}" for p in self.modified),
            *(f"D {p}" for p in self.deleted),
        ][:4]
        more = a + m + d - len(named)
        shown = "  ".join(named) + (f" (+{more} more)" if more > 0 else "")
        return {"added": a, "modified": m, "deleted": d, "words": self.words, "files": shown}


@dataclass(frozen=True)
class Missing:
    """Why a prompt has no point to restore, in the words the list, the preview and the menus
    use: what happened, and what the user can still do."""

    code: str
    """``never`` (no snapshot was ever bound to the prompt) or ``pruned`` (bound, commit gone)."""
    row: str
    """Short, for the list row."""
    why: str
    """For an action that is not offered (``Not offered: …``)."""
    advice: str
    """What the user can do instead (the preview's line)."""

    @property
    def line(self) -> str:
        return f"Files cannot be restored: {self.why}; {self.advice}"


NEVER_TAKEN = Missing(
    "never",
    "no snapshot was taken (rewind was off or its bridge stopped as it ran): conversation only",
    "no snapshot was taken while this prompt ran (rewind was off, or its bridge was stopped "
    "or killed then)",
    "choose the prompt before or after it to restore files, or Conversation only to go back "
    "in the conversation",
)
PRUNED = Missing(
    "pruned",
    "snapshot pruned by retention: files cannot be restored, conversation only",
    "its snapshot was pruned by retention",
    "Conversation only still goes back; to keep points longer, raise rewind.retention "
    "(maxSnapshots, maxAgeDays) in settings.json",
)

FORK_LABEL = "Fork from this prompt (a new session up to before it, with these files)"
"""Pi forks only from a prompt (a user message): the new session holds the conversation before
it and the prompt goes back to the editor (ledger.engine.preview.pi_fork_refusal)."""


@dataclass(frozen=True)
class Point:
    """One prompt's rewind point on the branch, compared with the files now."""

    entry: str
    text: str
    timestamp: str | None
    snapshot: str | None
    """``None``: no point to restore (``missing`` says why); listed all the same."""
    counts: Counts = Counts()
    own: tuple[OutsideChange, ...] = ()
    others: tuple[str, ...] = ()
    """Files another session's agent wrote that restoring this point would overwrite."""
    missing: Missing | None = None

    def to_json(self) -> dict[str, Any]:
        missing = self.missing if self.snapshot is None else None
        if self.snapshot is None and missing is None:
            missing = NEVER_TAKEN
        return {
            "entryId": self.entry,
            "text": self.text,
            "timestamp": self.timestamp,
            "snapshot": self.snapshot,
            # Wire: ``pruned`` is true only for a snapshot retention removed; ``missing`` is
            # ``never`` / ``pruned`` / null and ``missingText`` the row's words for it.
            "pruned": missing is PRUNED,
            "missing": missing.code if missing else None,
            "missingText": missing.row if missing else None,
            "counts": self.counts.to_json(),
            "own": [c.path for c in self.own],
            "others": list(self.others),
        }


@dataclass(frozen=True)
class UndoPoint:
    """What the list's top row, "Undo last file rewind", would bring back, named: ``kind`` is
    ``undo`` (the state before the last file rewind), ``redo`` (the last file action was an undo
    of it: this brings the rewind's files back) or ``interrupted`` (the recovery of an
    interrupted restore); ``label`` says which and the state it leads to
    (:func:`ledger.engine.past_states.undo_words`), and ``agent`` how many of the files this
    session's agent wrote since the last file rewind it takes back (the label says it too)."""

    snapshot: str
    kind: str
    label: str
    state: str
    counts: Counts
    own: tuple[OutsideChange, ...] = ()
    others: tuple[str, ...] = ()
    agent: int = 0

    @property
    def redo(self) -> bool:
        return self.kind == "redo"

    def to_json(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot,
            "redo": self.redo,
            "kind": self.kind,
            "label": self.label,
            "state": self.state,
            "counts": self.counts.to_json(),
            "own": [c.path for c in self.own],
            "others": list(self.others),
            "agentSince": self.agent,
        }


@dataclass(frozen=True)
class StatePoint:
    """The files as they were just before a past file operation (a row of the list's "earlier
    file states"): restoring it is ``rewind undo --to OP``
    (:func:`ledger.engine.history.undo_to`)."""

    operation: str
    """The operation's id (its record's entry id), as ``rewind history`` prints it."""
    kind: str
    label: str
    """``Files before rewinding to "edit a" (10:42)``, with what it also takes back."""
    timestamp: str | None
    snapshot: str
    counts: Counts = Counts()
    own: tuple[OutsideChange, ...] = ()
    others: tuple[str, ...] = ()
    agent: int = 0
    """Files this session's agent wrote since the last file rewind that restoring takes back."""

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "kind": self.kind,
            "label": self.label,
            "timestamp": self.timestamp,
            "snapshot": self.snapshot,
            "counts": self.counts.to_json(),
            "own": [c.path for c in self.own],
            "others": list(self.others),
            "agentSince": self.agent,
        }


@dataclass
class PointList:
    points: list[Point] = field(default_factory=list)
    undo: UndoPoint | None = None
    states: list[StatePoint] = field(default_factory=list)
    """The states before past file operations, newest first (bounded; the undo row's not)."""
    more: int = 0
    """Older points not listed (beyond :data:`MAX_POINTS`)."""
    shadow: str | None = None
    """The shadow repository's git dir, when the directory is protected through one."""
    ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "points": [p.to_json() for p in self.points],
            "undo": self.undo.to_json() if self.undo else None,
            "states": [s.to_json() for s in self.states],
            "more": self.more,
            "shadow": self.shadow,
            "ms": round(self.ms, 1),
        }


@dataclass(frozen=True)
class PreviewFile:
    path: str
    change: str
    """``A`` (the restore creates it), ``M`` (writes other content), ``D`` (deletes it)."""
    additions: int = 0
    deletions: int = 0
    binary: bool = False
    own: bool = False
    by: str | None = None
    """The id of the other session whose agent wrote the file's state now, if one did."""
    by_label: str | None = None
    """That session's name for the user (:func:`ledger.session_names.session_label`)."""
    sizes: tuple[int, int] | None = None
    """A binary file's size in bytes now and after the restore (``0``: absent on that side)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "change": self.change,
            "additions": self.additions,
            "deletions": self.deletions,
            "binary": self.binary,
            "own": self.own,
            "by": self.by,
            "byLabel": self.by_label,
            "sizes": list(self.sizes) if self.sizes is not None else None,
        }


@dataclass(frozen=True)
class Action:
    id: str
    label: str
    available: bool
    why: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "available": self.available, "why": self.why}


@dataclass
class Preview:
    """A prompt's point (``entry``), or with ``operation`` the state before that operation
    (``entry`` is then the operation's id too)."""

    entry: str
    text: str
    snapshot: str | None
    title: str = ""
    """The preview's heading: ``Rewind to before "edit a"``, ``Restore the files before …``."""
    operation: str | None = None
    note: str | None = None
    """What else the restore takes back (the agent's work since the last file rewind)."""
    current_tree: str | None = None
    """The tree of the plan's capture (not sent)."""
    counts: Counts = Counts()
    files: list[PreviewFile] = field(default_factory=list)
    own: tuple[OutsideChange, ...] = ()
    others: tuple[WrittenByOther, ...] = ()
    """Files another session's agent wrote that this restore would overwrite, per session."""
    warnings: list[str] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    refused: str | None = None
    """Why the files of this point cannot be restored now (an unsafe plan), if so."""
    missing: str | None = None
    """Why there is no point to restore at all, and what to do instead (:class:`Missing`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "entryId": self.entry,
            "text": self.text,
            "title": self.title,
            "operation": self.operation,
            "note": self.note,
            "snapshot": self.snapshot,
            "missing": self.missing,
            "counts": self.counts.to_json(),
            "files": [f.to_json() for f in self.files],
            "more": max(
                0,
                len(self.counts.added + self.counts.modified + self.counts.deleted)
                - len(self.files),
            ),
            "own": [c.to_json() for c in self.own],
            "ownLine": plan_warning(self.own, undo=MENU_UNDO),
            "others": [group.to_json() for group in self.others],
            "otherLines": [
                others_warning(g.neighbour.label, g.paths, undo=MENU_UNDO) for g in self.others
            ],
            "warnings": self.warnings,
            "actions": [a.to_json() for a in self.actions],
            "refused": self.refused,
        }


__all__ = [
    "FORK_LABEL",
    "NEVER_TAKEN",
    "PRUNED",
    "Action",
    "Counts",
    "Missing",
    "Point",
    "PointList",
    "Preview",
    "PreviewFile",
    "StatePoint",
    "UndoPoint",
]
