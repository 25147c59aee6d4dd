"""``rewind show`` and ``rewind log --patch/--stat``: steps with their diffs, as text or values.

Why it exists: the CLI stays a formatter. This module opens a session with its lineage, finds
the steps (:mod:`ledger.review.steps`), computes each step's diff (:mod:`ledger.review.diff`)
and renders the ``git show``-like text: a header (kind, entry id, label, session, date, the two
points), the prompt text indented, the assistant's summary line, then a stat or the patch.

Invariants:
- Read-only; the repository is only read through pygit2.
- The patch part of the text is exactly ``git diff <before> <after>``; colour (only when asked)
  is git's default palette added around whole lines, so stripping the escapes gives the same bytes.
- A missing (pruned) snapshot is no point: the step is listed without a diff, never an error in
  ``log``; ``show`` of an entry without both points raises :class:`NoRewindPointError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ledger.errors import NoRewindPointError
from ledger.git.repo import GitRepo
from ledger.lineage import LineageReader
from ledger.review.diff import Abbrev, TreeDiff, diff_trees
from ledger.review.steps import Step, branch_points, branch_steps, step_for
from ledger.session.model import Session

Detail = Literal["none", "stat", "patch"]

RESET = "\x1b[m"
BOLD = "\x1b[1m"
RED = "\x1b[31m"
GREEN = "\x1b[32m"
YELLOW = "\x1b[33m"
CYAN = "\x1b[36m"


@dataclass(frozen=True)
class StepReview:
    step: Step
    diff: TreeDiff | None

    def to_json(self, detail: Detail) -> dict[str, object]:
        s = self.step
        payload: dict[str, object] = {
            "kind": s.kind,
            "entryId": s.entry_id,
            "promptId": s.prompt_id,
            "session": s.session_id,
            "before": s.before,
            "after": s.after,
            "label": s.label,
            "timestamp": s.timestamp,
            "text": s.text,
            "summary": s.summary,
        }
        if self.diff is not None:
            payload["files"] = [f.to_json() for f in self.diff.files]
            payload["additions"] = self.diff.additions
            payload["deletions"] = self.diff.deletions
            if detail == "patch":
                payload["patch"] = self.diff.patch
        else:
            payload["files"] = None
        return payload


@dataclass
class Review:
    """A session opened for review: its branch steps and how to diff them."""

    repo: GitRepo
    session: Session
    steps: list[Step]
    find_renames: bool = False
    warnings: list[str] = field(default_factory=list)
    _abbrev: Abbrev | None = None

    @property
    def abbrev(self) -> Abbrev:
        if self._abbrev is None:
            self._abbrev = Abbrev(self.repo.pygit2)
        return self._abbrev

    def diff(self, step: Step, *, with_patch: bool = True) -> TreeDiff | None:
        if step.before is None or step.after is None:
            return None
        return diff_trees(
            self.repo.pygit2,
            step.before,
            step.after,
            find_renames=self.find_renames,
            abbrev=self.abbrev,
            with_patch=with_patch,
        )

    def reviews(self, detail: Detail = "patch") -> Iterator[StepReview]:
        for step in self.steps:
            yield StepReview(step, self.diff(step, with_patch=detail == "patch"))


def open_review(
    repo: GitRepo,
    path: Path,
    *,
    lineage: bool = True,
    leaf_id: str | None = None,
    find_renames: bool = False,
    reader: LineageReader | None = None,
) -> Review:
    """The session at ``path`` with its steps along the branch ending at ``leaf_id``."""
    reader = reader or LineageReader()
    start = reader.load(path, full=True)
    assert start.session is not None
    chain = reader.lineage(start.session)
    points = branch_points(chain, repo.commit_exists, own_only=not lineage)
    steps = branch_steps(start.session, points, leaf_id=leaf_id)
    return Review(repo, start.session, steps, find_renames, list(chain.warnings))


def deepest_leaf(session: Session, entry_id: str) -> str:
    """The entry's branch end: the leaf if the entry is on its branch, else its latest descendant."""
    if any(e.id == entry_id for e in session.branch()):
        return session.leaf_id or entry_id
    children: dict[str, list[str]] = {}
    for entry in session.entries:
        if entry.parent_id:
            children.setdefault(entry.parent_id, []).append(entry.id)
    cursor, seen = entry_id, {entry_id}
    while children.get(cursor):
        nxt = children[cursor][-1]
        if nxt in seen:
            break
        seen.add(nxt)
        cursor = nxt
    return cursor


def show_entry(
    repo: GitRepo,
    path: Path,
    entry_id: str,
    *,
    find_renames: bool = False,
    detail: Detail = "patch",
) -> tuple[StepReview, list[str]]:
    """The step of one user or assistant entry with its diff."""
    reader = LineageReader()
    session = reader.load(path, full=True).session
    assert session is not None
    review = open_review(
        repo,
        path,
        leaf_id=deepest_leaf(session, entry_id),
        find_renames=find_renames,
        reader=reader,
    )
    step = step_for(review.steps, entry_id)
    if step is None:
        entry = session.get(entry_id)
        what = (
            f"{entry.type}:{entry.role}"
            if entry is not None and entry.role
            else (entry.type if entry else "?")
        )
        raise NoRewindPointError(
            entry_id,
            reason=f"a {what} entry is not a prompt or a turn with a rewind point",
            hint="show a user message (its whole prompt) or an assistant message "
            "marked ◆ in 'rewind tree'",
        )
    if not step.has_diff:
        missing = "before" if step.before is None else "after"
        raise NoRewindPointError(
            entry_id,
            reason=f"no rewind point {missing} it",
            hint="see 'rewind tree SESSION' for the entries marked ◆",
        )
    return StepReview(step, review.diff(step, with_patch=detail == "patch")), review.warnings


# --- text --------------------------------------------------------------------------------------


def render_step(
    review: StepReview,
    detail: Detail,
    *,
    color: bool = False,
    prompt_totals: TreeDiff | None = None,
    width: int = 80,
) -> str:
    """The ``git show``-like text of one step (ends with a newline)."""
    s = review.step
    lines: list[str] = []
    title = f"{s.kind} {s.entry_id}"
    if s.kind == "turn" and s.prompt_id:
        title += f" (prompt {s.prompt_id})"
    if s.label:
        title += f" [{s.label}]"
    if s.fork_children > 1:
        title += f" (fork: {s.fork_children} branches)"
    lines.append(f"{YELLOW}{title}{RESET}" if color else title)
    lines.append(f"Session: {s.session_id}")
    if s.timestamp:
        lines.append(f"Date:    {s.timestamp}")
    lines.append(f"Points:  {_short(s.before)}..{_short(s.after)}")
    lines.append("")
    body = s.text if s.kind == "prompt" else s.summary
    for line in (body or "(no text)").splitlines() or [""]:
        lines.append(f"    {line}".rstrip())
    if s.kind == "prompt" and s.summary:
        lines.append("")
        lines.append(f"    → {s.summary}")
    lines.append("")
    text = "\n".join(lines) + "\n"
    diff = review.diff
    if diff is None:
        return text + "    (no diff: a rewind point is missing)\n\n"
    if prompt_totals is not None:
        text += prompt_totals.summary() + "\n\n"
    if detail == "stat" and prompt_totals is None:
        text += diff.stat(width) + "\n"
    elif detail == "patch" and prompt_totals is None:
        text += colorize_patch(diff.patch) if color else diff.patch
        if diff.files:
            text += "\n"
    return text


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "-"


def colorize_patch(patch: str) -> str:
    """git's default diff colours (``color.diff``): meta bold, hunk header cyan, -/+ red/green."""
    out = []
    in_header = False
    for line in patch.split("\n"):
        if line.startswith("diff --git "):
            in_header = True
        if in_header:
            if line.startswith("@@"):
                in_header = False
            elif line.startswith("Binary files "):
                in_header = False
                out.append(line)
                continue
            else:
                out.append(f"{BOLD}{line}{RESET}" if line else line)
                continue
        if line.startswith("@@"):
            end = line.find("@@", 2)
            head, rest = (line[: end + 2], line[end + 2 :]) if end > 0 else (line, "")
            out.append(f"{CYAN}{head}{RESET}{rest}")
        elif line.startswith("+"):
            out.append(f"{GREEN}{line}{RESET}")
        elif line.startswith("-"):
            out.append(f"{RED}{line}{RESET}")
        else:
            out.append(line)
    return "\n".join(out)


def log_text(
    review: Review, detail: Detail, *, color: bool = False, width: int = 80
) -> Iterator[str]:
    """The text of ``rewind log --patch/--stat``, one chunk per step.

    A prompt whose turns carry their own diffs shows only its totals (its turns follow with the
    detail); a prompt without turns shows its own diff.
    """
    turns_of: dict[str, int] = {}
    for step in review.steps:
        if step.kind == "turn":
            turns_of[step.prompt_id] = turns_of.get(step.prompt_id, 0) + 1
    for step in review.steps:
        if step.kind == "prompt" and turns_of.get(step.entry_id):
            totals = review.diff(step, with_patch=False)
            yield render_step(
                StepReview(step, totals),
                detail,
                color=color,
                prompt_totals=totals if totals is not None else None,
                width=width,
            )
        else:
            yield render_step(
                StepReview(step, review.diff(step, with_patch=detail == "patch")),
                detail,
                color=color,
                width=width,
            )


__all__ = [
    "Detail",
    "Review",
    "StepReview",
    "colorize_patch",
    "deepest_leaf",
    "log_text",
    "open_review",
    "render_step",
    "show_entry",
]
