"""The file states before past file rewinds, in words that stay true: the ``/rewind`` list's
undo row (undo, redo or the recovery of an interrupted restore), its rows for the states before
earlier file operations, and the panel after an undo (docs/pi.md#rewind).

Why it exists: the list had one row, "Undo last file rewind", and a ``redo`` flag. After a redo
the row still read "Redo the last file rewind (undo the undo)" and choosing it undid; the panel
always said "last file rewind undone"; after new prompts the row would take back the agent's
new work without saying so; and the state before an earlier rewind was found only by hand
(``rewind history``, ``rewind undo --to OP``). Each row now names the state it leads to (which
prompt's files, which rewind, when), computed from the records each time the list is asked
for, so it stays true after undo, redo and new prompts.

- :func:`undo_words`: what the branch's undo brings back, as a label and a panel line.
- :func:`past_states`: the states before the session's (and its ancestors') file operations,
  newest first, bounded; restoring one is ``rewind undo --to OP``
  (:func:`ledger.engine.history.undo_to`, the one restore path for it).
- :func:`agent_since`: how many of the files a restore would change hold work this session's
  agent did since the last file rewind (the restore's authorship: touched, changed since, and
  neither the user's own work nor another session's agent's).

Invariants: read-only (no capture, no append); words only from the records and the bindings
(which entry a snapshot is the point of); a snapshot that names no prompt is described by its
operation and time, never guessed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from ledger.clock import ms_from_iso
from ledger.ledgerview import LedgerView
from ledger.records import FORK_PENDING, OP, DecodedRecord
from ledger.session.model import entry_text, kind_of

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext as Engine
    from ledger.engine.neighbours import WrittenByOther
    from ledger.engine.preview_model import Counts
    from ledger.engine.undo_target import UndoTarget
    from ledger.history import Operation
    from ledger.session.model import Session

MAX_STATES = 10
"""States before past file operations listed at most (newest first)."""
TEXT_CHARS = 32
"""A prompt's text in a label is cut here (the label names it, the list row shows it whole)."""

UndoKind = Literal["undo", "redo", "interrupted"]


@dataclass(frozen=True)
class UndoWords:
    """What the branch's undo does, in words: ``label`` for the list row, ``head`` for the panel
    (``last file rewind undone`` / ``file rewind redone``) and ``state`` (the files it brings
    back: ``the files before rewinding to "edit a" (10:42)``)."""

    kind: UndoKind
    label: str
    head: str
    state: str


@dataclass(frozen=True)
class PastState:
    """The files as they were just before one past file operation."""

    operation: Operation
    snapshot: str
    label: str
    """``Files before rewinding to "edit a" (10:42)``."""


def clock(stamp: str | None, *, now: datetime | None = None) -> str:
    """``10:42`` (local time) for a record's ISO timestamp, with the date when not today."""
    ms = ms_from_iso(stamp)
    if not ms:
        return "an unknown time"
    when = datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone()
    today = (now or datetime.now(tz=UTC)).astimezone().date()
    return when.strftime("%H:%M") if when.date() == today else when.strftime("%b %d %H:%M")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


@dataclass(frozen=True)
class _Named:
    """The entry a snapshot is the point of: a prompt (its point: the files before it ran) or
    another entry (the files after it)."""

    text: str
    prompt: bool

    @property
    def files(self) -> str:
        return f"the files before {self.text}" if self.prompt else f"the files after {self.text}"


def _point_names(engine: Engine) -> dict[str, _Named]:
    """Snapshot → the entry it is the point of (``"edit a"`` for a prompt, ``the assistant
    "…"`` otherwise), through the lineage; a prompt wins over any other entry bound to the same
    snapshot, the nearest session over its ancestors."""
    session = engine.session()
    names: dict[str, _Named] = {}
    prompts: dict[str, _Named] = {}
    for link in engine.reader.lineage(session).links:
        labels = (link.session or session).labels
        for entry_id, sha in link.view.entry_to_commit.items():
            entry = session.get(entry_id) or (link.session.get(entry_id) if link.session else None)
            if entry is None:
                continue
            text = f'"{_short(entry_text(entry))}"'
            label = labels.get(entry_id) or session.labels.get(entry_id)
            if entry.type == "message" and entry.role == "user":
                prompts.setdefault(sha, _Named(text, True))
            elif label:
                # A checkpoint (the agent's rewind tool's, or a label set in /tree): its message
                # may have no text at all (it only called the tool).
                names.setdefault(sha, _Named(f'checkpoint "{_short(label)}"', False))
            else:
                names.setdefault(sha, _Named(f"the {kind_of(entry)} {text}", False))
    names.update(prompts)
    names.update(_agent_restores(session))
    return names


def _agent_restores(session: Session) -> dict[str, _Named]:
    """The files the agent's ``rewind`` tool restored (docs/pi.md#the-agents-rewind-tool), named
    after the point it chose: no entry is bound to them (the user's files were left alone)."""
    from ledger.engine.agent_points import agent_restores

    names: dict[str, _Named] = {}
    for current, point in agent_restores(session).items():
        label, entry_id = point.get("label"), point.get("id")
        entry = session.get(entry_id) if isinstance(entry_id, str) else None
        if isinstance(label, str) and label:
            names[current] = _Named(f'checkpoint "{_short(label)}" (the agent\'s rewind)', False)
        elif entry is not None and entry.type == "message" and entry.role == "user":
            names[current] = _Named(f'"{_short(entry_text(entry))}" (the agent\'s rewind)', True)
        elif isinstance(entry_id, str):
            names[current] = _Named(f"point {entry_id} (the agent's rewind)", False)
    return names


def _ops_on_branch(engine: Engine, *, forks: bool = False) -> list[DecodedRecord]:
    """The branch's file operations that replaced files (an ``undo``), root → leaf: ops, and
    with ``forks`` the ``/fork`` restores too (the branch's undo is an op's only)."""
    session = engine.session()
    records = {r.record_id: r for r in LedgerView.of(session).records}
    kinds = (OP, FORK_PENDING) if forks else (OP,)
    return [
        records[e.id]
        for e in session.branch(engine.host.leaf_id())
        if e.type == "custom"
        and e.id in records
        and records[e.id].custom_type in kinds
        and records[e.id].current
        and records[e.id].undo
    ]


def _stamp(record: DecodedRecord) -> str | None:
    return record.timestamp if isinstance(record.timestamp, str) else None


def _did(
    after: str | None, names: dict[str, _Named], befores: dict[str, str], *, undo: bool
) -> str:
    """What an operation that left the files at ``after`` did: ``rewinding to "edit a"`` (a
    prompt's point), ``going back to the files before the file rewind at 10:42`` (the state
    before an earlier operation: ``befores`` maps those snapshots to its time), ``rewinding to
    the assistant "…"`` (another entry's point)."""
    if undo:
        return "undoing a file rewind"
    name = names.get(after or "")
    if name is not None and name.prompt:
        return f"rewinding to {name.text}"
    if after in befores:
        return f"going back to the files before the file rewind at {befores[after]}"
    return f"rewinding to {name.text}" if name else "a file rewind"


def undo_words(engine: Engine, target: UndoTarget) -> UndoWords:
    """The words for the branch's undo ``target`` (:func:`ledger.engine.undo_target.find_undo`):
    an undo of the last file rewind, a redo when the files are where an undo of it left them,
    or the recovery of an interrupted restore.

    Undo and redo swap two states, so the last op's ``current`` equals the ``undo`` of the op
    before it for every undo in a row. Counting those back to the rewind they swap (the first
    op that is no undo): after an even number the files are that rewind's, and the target the
    state before it (an undo); after an odd number the files are the state before it, and the
    target that rewind's files (a redo)."""
    from ledger.engine import messages as M

    if target.interrupted is not None:
        journal = target.interrupted
        state = f"the files before the interrupted restore (started {journal.started})"
        return UndoWords("interrupted", M.UNDO, "interrupted restore undone", state)
    ops = _ops_on_branch(engine)
    index = next((i for i, op in enumerate(ops) if op.record_id == target.entry), None)
    if index is None:
        state = f"the files of snapshot {target.snapshot[:12]}"
        return UndoWords("undo", f"{M.UNDO} (back to {state})", "last file rewind undone", state)
    undos = 0
    while index > 0 and ops[index].current == ops[index - 1].undo:
        undos, index = undos + 1, index - 1
    rewind = ops[index]
    names = _point_names(engine)
    when = clock(_stamp(rewind))
    if undos % 2:
        name = names.get(rewind.current or "")
        state = name.files if name else f"the files of the file rewind at {when}"
        label = f"Redo: back to {state} (the file rewind at {when})"
        return UndoWords("redo", label, "file rewind redone", state)
    befores = {op.undo: clock(_stamp(op)) for op in ops[:index] if op.undo}
    did = _did(rewind.current, names, befores, undo=False)
    state = f"the files as before {did} at {when}"
    label = f"Undo the last file rewind (restore {state})"
    return UndoWords("undo", label, "last file rewind undone", state)


def past_states(
    engine: Engine, *, skip: Collection[str] = (), limit: int = MAX_STATES
) -> list[PastState]:
    """The states before the file operations of the session and its ancestors, newest first:
    one per distinct tree, none whose snapshot is gone, none whose tree is in ``skip`` (the
    files now, the undo row's), at most ``limit``."""
    from ledger.engine.history import history

    names = _point_names(engine)
    ops = history(engine, lineage=True)
    befores = _befores(ops)
    seen = set(skip)
    found: list[PastState] = []
    for op in ops:
        if len(found) >= limit:
            break
        if op.before is None:
            continue
        tree = engine.repo.tree_of(op.before)
        if tree is None or tree in seen:
            continue
        seen.add(tree)
        found.append(PastState(op, op.before, _state_label(op, names, befores)))
    return found


def _befores(ops: Sequence[Operation]) -> dict[str, str]:
    """Snapshot → the time of the oldest operation it is the state before (``ops`` newest
    first)."""
    return {op.before: clock(op.timestamp) for op in ops if op.before}


def _state_label(op: Operation, names: dict[str, _Named], befores: dict[str, str]) -> str:
    did = _did(op.after, names, befores, undo=op.kind == "undo")
    return f"Files before {did} ({clock(op.timestamp)})"


def state_label(engine: Engine, op: Operation) -> str:
    """``Files before rewinding to "edit a" (10:42)``: the state before ``op``, as listed."""
    from ledger.engine.history import history

    befores = _befores(history(engine, lineage=True))
    return _state_label(op, _point_names(engine), befores)


def last_rewind_tree(engine: Engine) -> str | None:
    """The tree of the files right after the branch's last file operation (restore or undo),
    when a prompt ran after it: what changed since then is the agent's or the user's work."""
    session = engine.session()
    ops = _ops_on_branch(engine, forks=True)
    if not ops:
        return None
    last = ops[-1]
    branch = session.branch(engine.host.leaf_id())
    ids = [e.id for e in branch]
    after = branch[ids.index(last.record_id) + 1 :]
    if not any(e.type == "message" and e.role == "user" for e in after):
        return None
    return engine.repo.tree_of(last.current or "")


def agent_since(
    engine: Engine, now: str, since: str | None, counts: Counts, not_agents: Iterable[str]
) -> int:
    """How many of the files a restore would change (``counts``, every path) changed since the
    tree ``since`` (:func:`last_rewind_tree`) and hold neither the user's own work nor another
    session's agent's (``not_agents``, from :func:`ledger.engine.changes_since.authors_of`):
    what this session's agent wrote since, which the restore takes back."""
    from ledger.git.trees import leaf_changes

    touched = {*counts.added, *counts.modified, *counts.deleted}
    if since is None or since == now or not touched:
        return 0
    changed = {c.path for c in leaf_changes(engine.repo, since, now) or []}
    return len((changed & touched) - set(not_agents))


def since_note(count: int, *, top: bool) -> str:
    """``; also takes back the 2 files the agent wrote since`` (nothing for 0)."""
    if count <= 0:
        return ""
    files = "the file" if count == 1 else f"the {count} files"
    tail = "since" if top else "since the last file rewind"
    return f" — also takes back {files} the agent wrote {tail}"


def paths_of(groups: Sequence[WrittenByOther]) -> list[str]:
    """The paths of other sessions' agents' files, all groups together."""
    return [p for g in groups for p in g.paths]


__all__ = [
    "MAX_STATES",
    "PastState",
    "UndoWords",
    "agent_since",
    "clock",
    "last_rewind_tree",
    "past_states",
    "since_note",
    "state_label",
    "undo_words",
]
