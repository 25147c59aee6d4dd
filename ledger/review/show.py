"""``rewind show`` and ``rewind log --patch|--stat|--numstat|--name-status``: steps with diffs.

Why it exists: the CLI stays a formatter. This module opens a session with its lineage, finds
the steps (:mod:`ledger.review.steps`), has git compute each step's diff
(:class:`ledger.review.diff.GitDiffer`, one git process per format for all the steps of a log)
and renders the ``git show``-like text: a header (kind, entry id, label, session, date, the two
points), the prompt text indented, the assistant's summary line, then git's text.

Invariants:
- Read-only (git reads the repository; nothing is written).
- The diff part of the text is exactly ``git diff <option> <before> <after>`` (``--no-color``
  unless colour is asked for, then git's own colours: stripping the escapes gives the same bytes).
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
from ledger.review.diff import Format, GitDiffer, TreeDiff
from ledger.review.steps import Step, branch_points, branch_steps, step_for
from ledger.session.model import Session

Detail = Literal["none", "stat", "patch", "numstat", "name-status"]
TEXT_FORMATS: tuple[Detail, ...] = ("stat", "patch", "numstat", "name-status")

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
    color: bool = False
    width: int = 80
    relative: str | None = None
    """``diff.relative``'s prefix (:func:`ledger.review.diff.relative_prefix`) or ``None``."""
    _differ: GitDiffer | None = None
    _batched: set[tuple[Format, bool]] = field(default_factory=set)

    @property
    def differ(self) -> GitDiffer:
        if self._differ is None:
            self._differ = GitDiffer(
                self.repo,
                find_renames=self.find_renames,
                color=self.color,
                width=self.width,
                relative=self.relative,
            )
        return self._differ

    def prefetch(self, steps: list[Step], fmt: Format, *, color: bool = False) -> None:
        """Compute ``fmt`` for all these steps with one git process."""
        pairs = [(s.before, s.after) for s in steps if s.before and s.after]
        self.differ.fetch(pairs, fmt, color=color)
        if steps is self.steps:
            self._batched.add((fmt, color and fmt not in ("files", "shortstat")))

    def diff(
        self,
        step: Step,
        *,
        with_patch: bool = True,
        values: bool = True,
        texts: tuple[Format, ...] = (),
        color: bool = False,
    ) -> TreeDiff | None:
        """The step's diff: values (``values``), git's patch (``with_patch``) and ``texts``."""
        if step.before is None or step.after is None:
            return None
        wanted = (*(("patch",) if with_patch else ()), *texts)
        # The first request of a format computes it for every step of the branch in one git
        # process (a report or a log asks step by step: one process each would cost seconds).
        for fmt in (*wanted, *(("files",) if values else ())):
            batch = (fmt, color and fmt not in ("files", "shortstat"))
            if batch not in self._batched and any(s is step for s in self.steps):
                self._batched.add(batch)
                self.prefetch(self.steps, fmt, color=batch[1])
        return self.differ.diff(
            step.before, step.after, files=values, texts=tuple(dict.fromkeys(wanted)), color=color
        )

    def reviews(self, detail: Detail = "patch") -> Iterator[StepReview]:
        self.prefetch(self.steps, "files")
        if detail == "patch":
            self.prefetch(self.steps, "patch")
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
    color: bool = False,
    width: int = 80,
    relative: str | None = None,
) -> Review:
    """The session at ``path`` with its steps along the branch ending at ``leaf_id``."""
    reader = reader or LineageReader()
    start = reader.load(path, full=True)
    assert start.session is not None
    chain = reader.lineage(start.session)
    points = branch_points(chain, repo.commit_exists, own_only=not lineage)
    steps = branch_steps(start.session, points, leaf_id=leaf_id)
    return Review(
        repo,
        start.session,
        steps,
        find_renames,
        list(chain.warnings),
        color=color,
        width=width,
        relative=relative,
    )


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
    values: bool = True,
    color: bool = False,
    width: int = 80,
    relative: str | None = None,
) -> tuple[StepReview, list[str]]:
    """The step of one user or assistant entry with its diff: the values (``values``) and
    git's text of ``detail`` (also coloured when ``color``); ``relative``: only the files below
    that directory, named from it (``diff.relative``), values and text alike."""
    reader = LineageReader()
    session = reader.load(path, full=True).session
    assert session is not None
    review = open_review(
        repo,
        path,
        leaf_id=deepest_leaf(session, entry_id),
        find_renames=find_renames,
        reader=reader,
        color=color,
        width=width,
        relative=relative,
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
    texts: tuple[Format, ...] = (detail,) if detail in TEXT_FORMATS else ()  # type: ignore[assignment]
    diff = review.diff(step, with_patch=False, values=values, texts=texts, color=color)
    return StepReview(step, diff), review.warnings


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
        return text + prompt_totals.summary() + "\n\n"
    if detail not in TEXT_FORMATS:
        return text
    body = diff_text(diff, detail, color=color, width=width)
    return text + body + ("\n" if body else "")


def diff_text(diff: TreeDiff, detail: Detail, *, color: bool = False, width: int = 80) -> str:
    """git's text of ``detail`` for ``diff`` (coloured by git when it was asked to)."""
    if color and f"{detail}+color" in diff.texts:
        return diff.texts[f"{detail}+color"]
    if detail in diff.texts:
        return diff.texts[detail]
    if detail == "stat":
        return diff.stat(width)
    return colorize_patch(diff.patch) if color and detail == "patch" else diff.patch


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
    """The text of ``rewind log --patch|--stat|--numstat|--name-status``, one chunk per step.

    A prompt whose turns carry their own diffs shows only its totals (git's shortstat; its turns
    follow with the detail); a prompt without turns shows its own diff. Two git processes in
    all: one for the totals, one for the detail.
    """
    turns_of: dict[str, int] = {}
    for step in review.steps:
        if step.kind == "turn":
            turns_of[step.prompt_id] = turns_of.get(step.prompt_id, 0) + 1
    totals_steps = [s for s in review.steps if s.kind == "prompt" and turns_of.get(s.entry_id)]
    totals_ids = {id(s) for s in totals_steps}
    review.differ.width = max(1, width)
    detail_steps = [s for s in review.steps if id(s) not in totals_ids]
    review.prefetch(totals_steps, "shortstat")
    review._batched.add(("shortstat", False))  # only the totals' steps need it
    texts: tuple[Format, ...] = (detail,) if detail in TEXT_FORMATS else ()  # type: ignore[assignment]
    if texts:
        review.prefetch(detail_steps, texts[0], color=color)
        review._batched.add((texts[0], color and texts[0] != "shortstat"))
    for step in review.steps:
        if id(step) in totals_ids:
            totals = review.diff(step, with_patch=False, values=False, texts=("shortstat",))
            yield render_step(
                StepReview(step, totals), detail, color=color, prompt_totals=totals, width=width
            )
        else:
            diff = review.diff(step, with_patch=False, values=False, texts=texts, color=color)
            yield render_step(StepReview(step, diff), detail, color=color, width=width)


__all__ = [
    "Detail",
    "Review",
    "StepReview",
    "colorize_patch",
    "deepest_leaf",
    "diff_text",
    "log_text",
    "open_review",
    "render_step",
    "show_entry",
]
