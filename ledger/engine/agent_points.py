"""The points the model's ``rewind`` tool can name, and whose work each differing file holds
(docs/pi.md#the-agents-rewind-tool).

Why it exists: the tool (:mod:`ledger.engine.agent_tool`) speaks to a model, which names a point
by the id it was given or by the label it chose, and must be told, for every file a restore
would change, whether that file is its own work (taken back) or someone else's (left alone).
Both questions are answered here, as values:

- :func:`branch_points`: this conversation's points on the current branch, newest first: its
  checkpoints (a labelled entry bound to a snapshot) and its prompts;
- :func:`find_point`: a point by id (or a unique prefix of one) or by a checkpoint's label;
- :func:`sort_files`: each change of a plan, with its author and whether the tool takes it back.

**The rule** (docs/authorship.md#the-rule gives the verdicts): the tool takes a file back only
when its current content is this conversation's agent's (``this-session``, ``fork-parent``), or
was put there by one of this tool's own restores in this conversation (a ``rewind`` verdict whose
snapshot is such a restore's ``current``). Everything else is left as it is and named: the
user's work, another session's agent's, and content a user's rewind put back.

Invariants: read-only; nothing here captures or appends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ledger.engine.ownership import branch_prompts
from ledger.errors import UnknownPointError
from ledger.git.trees import Change
from ledger.session.model import entry_text, is_restorable

if TYPE_CHECKING:
    from ledger.engine.attribution import Attribution
    from ledger.engine.context import EngineContext as Engine
    from ledger.session.model import Session

TOOL_NAME = "rewind"
"""The tool's name in Pi (``pi.registerTool``), and so in its ``toolResult`` messages."""

PointKind = Literal["checkpoint", "prompt", "turn"]
FileChange = Literal["added", "modified", "deleted"]
"""What the restore would do to the file (``added``: it comes back; ``deleted``: it goes)."""

MIN_PREFIX = 4
"""The shortest id prefix a point may be named by."""
MAX_REF = 80
"""A point's name is quoted back at most this long."""


@dataclass(frozen=True)
class ToolPoint:
    """One point the tool can restore: an entry of this conversation bound to a snapshot."""

    id: str
    kind: PointKind
    label: str | None
    text: str
    """The prompt's text (a prompt), or what the checkpoint was taken in (a checkpoint)."""
    timestamp: str | None
    snapshot: str


@dataclass(frozen=True)
class ToolFile:
    """One file that differs between now and a point."""

    path: str
    change: FileChange
    author: str
    """Whose work the file holds now, in words: ``your own work (this conversation's agent)``."""
    taken_back: bool
    """Whether the tool's restore changes it (only this conversation's agent's work)."""

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "change": self.change,
            "author": self.author,
            "restores": self.taken_back,
        }


MINE = "your work (this conversation's agent)"
MINE_RESTORED = "your work (put back by an earlier rewind of yours)"
USERS = "the user's own work"
REWOUND = "put back by the user's rewind"


def _labels(session: Session) -> dict[str, str]:
    return session.labels


@dataclass(frozen=True)
class _Candidate:
    """An entry of the branch that is a point if its snapshot still exists (not yet resolved:
    resolving goes through the lineage and the object store, so it is done only for the
    candidates an answer needs)."""

    id: str
    kind: PointKind
    label: str | None
    text: str
    timestamp: str | None


def _candidates(engine: Engine) -> list[_Candidate]:
    """Every labelled entry and every prompt of the current branch, newest first."""
    session = engine.session()
    leaf = engine.host.leaf_id()
    labels = _labels(session)
    branch = [e for e in session.branch(leaf) if is_restorable(e)]
    prompts = {e.id for e in branch_prompts(session, leaf)}
    last_prompt = ""
    texts: dict[str, str] = {}
    for entry in branch:
        if entry.id in prompts:
            last_prompt = entry_text(entry)
        texts[entry.id] = last_prompt
    found: list[_Candidate] = []
    seen: set[str] = set()
    for entry in reversed(branch):
        label = labels.get(entry.id)
        if entry.id in seen or (label is None and entry.id not in prompts):
            continue
        seen.add(entry.id)
        kind: PointKind = (
            "prompt" if entry.id in prompts else "checkpoint" if label is not None else "turn"
        )
        found.append(
            _Candidate(
                entry.id,
                kind,
                label,
                texts.get(entry.id, ""),
                entry.timestamp if isinstance(entry.timestamp, str) else None,
            )
        )
    return found


class _Resolver:
    """Candidates to points, each resolved once (the running prompt's own point is recorded at
    its end: its pending binding stands for it)."""

    def __init__(self, engine: Engine) -> None:
        prompt = engine.this_prompt()
        self.engine = engine
        self.pending = dict(prompt.pairs) if prompt is not None else {}

    def point(self, candidate: _Candidate) -> ToolPoint | None:
        engine = self.engine
        snapshot = self.pending.get(candidate.id) or engine.resolve_point(candidate.id)
        if snapshot is None or not engine.repo.commit_exists(snapshot):
            return None
        return ToolPoint(
            candidate.id,
            candidate.kind,
            candidate.label,
            candidate.text,
            candidate.timestamp,
            snapshot,
        )

    def points(self, candidates: Iterable[_Candidate], limit: int | None = None) -> list[ToolPoint]:
        found: list[ToolPoint] = []
        for candidate in candidates:
            if limit is not None and len(found) >= limit:
                break
            point = self.point(candidate)
            if point is not None:
                found.append(point)
        return found


def branch_points(engine: Engine, *, limit: int | None = None) -> list[ToolPoint]:
    """This conversation's points on the current branch, newest first: every labelled entry
    (a checkpoint, the tool's or the user's) and every prompt that is bound to a snapshot that
    still exists, the running prompt's included (its point is recorded at its end).
    ``limit``: the newest ``limit`` only."""
    return _Resolver(engine).points(_candidates(engine), limit)


def find_point(engine: Engine, ref: str) -> ToolPoint:
    """The point ``ref`` names: an entry id of this branch (or a unique prefix of at least
    :data:`MIN_PREFIX` characters), a checkpoint label (exact, then ignoring case: the newest
    such checkpoint) before an id prefix. Raises :class:`~ledger.errors.NoRewindPointError` with the
    candidates when nothing or more than one point matches.

    Only the candidates that match ``ref`` are resolved (a long session has hundreds of
    prompts; :func:`branch_points` over all of them cost ~0.3 ms each per call), which gives
    the same answer as filtering the resolved points: a candidate whose snapshot is gone is
    no point either way."""
    wanted = ref.strip()
    shown = wanted if len(wanted) <= MAX_REF else wanted[: MAX_REF - 1] + "…"
    candidates = _candidates(engine)
    resolver = _Resolver(engine)
    exact = resolver.points((c for c in candidates if c.id == wanted), 1)
    if exact:
        return exact[0]
    # A label before an id prefix: ids are 8 hex digits, so a label such as "cafe" or "2024"
    # must never name another point without saying so.
    for same in (lambda a, b: a == b, lambda a, b: a.casefold() == b.casefold()):
        labelled = resolver.points(
            (c for c in candidates if c.label is not None and same(c.label, wanted)), 1
        )
        if labelled:
            return labelled[0]  # newest first
    if len(wanted) >= MIN_PREFIX:
        prefixed = resolver.points(c for c in candidates if c.id.startswith(wanted))
        if len(prefixed) == 1:
            return prefixed[0]
        if len(prefixed) > 1:
            raise UnknownPointError(
                shown,
                "more than one point's id starts with it",
                f"give more of the id: {', '.join(p.id for p in prefixed[:5])}",
            )
    entry = engine.session().get(wanted)
    reason = (
        "that entry has no snapshot (it is not a prompt or a checkpoint, or it was pruned)"
        if entry is not None
        else "no point of this conversation's branch has that id or label"
    )
    newest = resolver.points(candidates, 5)
    named = ", ".join(f'{p.id} ("{p.label}")' if p.label else p.id for p in newest)
    raise UnknownPointError(
        shown, reason, f"newest points: {named or 'none yet'}; action list shows them all"
    )


def agent_restores(session: Session) -> dict[str, dict[str, Any]]:
    """The snapshots this tool's own restores wrote in this conversation (the ``current`` of
    each, kept in the ``details`` of the tool's results), each with the point it restored
    (``{id, kind, label, snapshot}``), oldest first."""
    return {current: point for current, (point, _) in _tool_results(session).items()}


def tool_restores(session: Session) -> dict[str, frozenset[str]]:
    """Each snapshot this tool's own restores wrote, with the paths it took back: only those
    hold the agent's work there (the others were left as they were: someone else's)."""
    return {current: paths for current, (_, paths) in _tool_results(session).items()}


def _tool_results(session: Session) -> dict[str, tuple[dict[str, Any], frozenset[str]]]:
    found: dict[str, tuple[dict[str, Any], frozenset[str]]] = {}
    for entry in session.entries:
        # The line's bytes first: decoding (and keeping) every message of a long session at
        # each call would grow with the history. Pi writes `"toolName":"rewind"`; a line written
        # otherwise is missed, which only leaves files alone (never the unsafe side).
        if entry.type != "message" or not entry.may_hold(b'"rewind"'):
            continue
        if entry.role != "toolResult":
            continue
        message = entry.raw.get("message")
        if not isinstance(message, dict) or message.get("toolName") != TOOL_NAME:
            continue
        details = message.get("details")
        if not isinstance(details, dict) or not isinstance(details.get("current"), str):
            continue
        point = details.get("point")
        restored = details.get("restored")
        paths = frozenset(
            f["path"]
            for f in (restored if isinstance(restored, list) else [])
            if isinstance(f, dict) and isinstance(f.get("path"), str)
        )
        found[details["current"]] = (point if isinstance(point, dict) else {}, paths)
    return found


def _change_kind(change: Change) -> FileChange:
    if change.old is None:
        return "added"
    if change.new is None:
        return "deleted"
    return "modified"


def sort_files(
    attribution: Attribution,
    changes: Iterable[Change],
    own_restores: Mapping[str, frozenset[str]] | None = None,
) -> list[ToolFile]:
    """Each change (from now to a point), with whose work the file holds now and whether the
    tool takes it back (see the module's rule), by path. ``own_restores``:
    :func:`tool_restores`."""
    restored_by_me = own_restores or {}
    files: list[ToolFile] = []
    for change in sorted(changes, key=lambda c: c.path):
        whose = attribution.whose(change)
        kind = whose.attribution
        if kind in ("this-session", "fork-parent"):
            author, back = MINE, True
        elif kind == "rewind":
            # Only a path the tool itself took back in that restore: the restore also wrote
            # back, as they were, the files it left alone, and a user's rewind to the same
            # snapshot puts the user's own files there too.
            mine = whose.producer is not None and change.path in restored_by_me.get(
                whose.producer.snapshot, ()
            )
            author, back = (MINE_RESTORED, True) if mine else (REWOUND, False)
        elif kind == "other-session" and whose.neighbour is not None:
            author, back = f"the work of {whose.neighbour.label}", False
        elif kind == "other-session":
            author, back = "another session's work", False
        else:
            author, back = USERS, False
        files.append(ToolFile(change.path, _change_kind(change), author, back))
    return files


def left_alone(files: Sequence[ToolFile]) -> list[ToolFile]:
    return [f for f in files if not f.taken_back]


def point_words(point: ToolPoint) -> str:
    """``checkpoint "before the refactor" (1a2b3c4d)`` or ``the prompt "fix the bug" (…)``."""
    if point.label:
        return f'checkpoint "{point.label}" ({point.id})'
    text = " ".join(point.text.split())
    short = text if len(text) <= 50 else text[:49] + "…"
    return f'the point before the prompt "{short}" ({point.id})'


__all__ = [
    "MIN_PREFIX",
    "TOOL_NAME",
    "ToolFile",
    "ToolPoint",
    "agent_restores",
    "branch_points",
    "find_point",
    "left_alone",
    "point_words",
    "sort_files",
    "tool_restores",
]
