"""``rewind report``: the session's branch as one self-contained HTML page, built to be used.

Why it exists: a review to open in a browser or attach to a pull request, used the way a
reviewer uses GitHub's "Files changed". The page has a navigation pane (every prompt as a
timeline entry, its turns with the tools each ran, each turn's files, all linking to their
diffs; the prompt, turn and file at the top of the main column are marked as you scroll), a
filter (a text naming a file shows just the diffs of the files it names; other text keeps the
prompts and turns whose words match; no match says so), expand and collapse all, a unified /
side-by-side switch, a "viewed" mark per file kept in the browser's storage, and the main
column: every prompt (its text, the assistant's summary line, totals), every turn (tools, files
and each file's diff), labels and forks marked.

It must stay fast on long sessions (200 turns, thousands of file changes): small diffs are
rendered here, highlighted, while a page-wide budget lasts; a large diff, a turn touching many
files and everything past the budget start collapsed, their patch text carried in the page and
rendered by the page's script when opened (all of them in one gzip-compressed, base64 block:
patch text is most of a long page and compresses well) (:mod:`ledger.review.html_diff`,
:mod:`ledger.review.assets`). Prompt sections use ``content-visibility: auto`` so the browser
lays out only what is on screen.

Invariants:
- Self-contained: one file, inline CSS and one inline script, no network reference (no
  ``http:``, ``https:`` or ``//`` URL anywhere); every user-provided string is escaped, and
  script data is JSON with ``<``, ``>`` and ``&`` escaped.
- The diff content is the same :class:`~ledger.review.diff.TreeDiff` that ``rewind show`` prints,
  and each file's rows are exactly the lines of its patch (split on ``\\n`` only). The page
  carries one unified table per diff whatever the view: the side-by-side view is built from it
  in the page (so switching costs no page size), and ``side_by_side`` only sets the first view.
- Each diff's number columns fit its largest line number (``table.gN``: N digits), so no number
  wraps and every row is one line tall however long the file.
- Written atomically (temporary file next to the target, renamed into place); nothing else is
  written.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ledger.git.repo import GitRepo
from ledger.review.assets import CSS, SCRIPT
from ledger.review.diff import FileDiff, TreeDiff
from ledger.review.html_diff import (
    EAGER_FILE_LINES,
    FORMATTER,
    MAX_GUTTER_DIGITS,
    cut,
    diff_table,
    display_name,
    labels,
    pack_patches,
    patch_lines,
    text_html,
    typechanges,
)
from ledger.review.show import Review, open_review
from ledger.review.steps import Step, first_line

EAGER_PAGE_LINES = 2500
"""Patch lines rendered into the page as HTML; beyond this every diff is rendered on opening."""
EAGER_TURN_FILES = 20
"""A turn (or prompt) with more files than this shows them collapsed."""
NAV_OPEN_FILES = 12
"""A turn's file list in the navigation pane is folded beyond this many files."""
_MAX_NAV_TEXT = 90
_MAX_QUERY_TEXT = 2000


@dataclass
class ReportResult:
    path: Path
    prompts: int
    turns: int
    files: int
    bytes: int
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "output": str(self.path),
            "prompts": self.prompts,
            "turns": self.turns,
            "files": self.files,
            "bytes": self.bytes,
        }


def _attr(text: str) -> str:
    return html.escape(text.encode("utf-8", "replace").decode("utf-8"), quote=True)


def _short(text: str, limit: int = _MAX_NAV_TEXT) -> str:
    line = first_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _query(*parts: str) -> str:
    return _attr(" ".join(parts)[:_MAX_QUERY_TEXT].lower())


def _href(prefix: str, ident: str) -> str:
    return f"#{prefix}{quote(ident, safe='')}"


def counted(n: int, noun: str) -> str:
    """``1 prompt``, ``2 prompts``, ``0 file changes``: a count with its noun, singular for one."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def header_counts(counts: dict[str, int]) -> str:
    """The header's totals: ``1 prompt · 2 turns · 1 file change``."""
    return " · ".join(
        counted(counts[key], noun)
        for key, noun in (("prompts", "prompt"), ("turns", "turn"), ("files", "file change"))
    )


def _counts(f: FileDiff) -> str:
    if f.binary:
        return '<span class="meta">binary</span>'
    return f'<span class="add">+{f.additions}</span> <span class="del">-{f.deletions}</span>'


class _Page:
    """Accumulates the main column and the navigation pane in one pass over the steps."""

    def __init__(self, review: Review) -> None:
        self.review = review
        self.budget = EAGER_PAGE_LINES
        self.main: list[str] = []
        self.nav: list[str] = []
        self.counts = {"prompts": 0, "turns": 0, "files": 0}
        self.lazy: list[str] = []
        """Patch texts of the diffs rendered on opening, by their ``data-i``."""
        self._file_no = 0

    # -- one file -----------------------------------------------------------------------------

    def file_block(self, f: FileDiff, typechange: tuple[int, int] | None, eager: bool) -> str:
        self._file_no += 1
        fid = f"f-{self._file_no}"
        name = display_name(f)
        kinds = "".join(f'<span class="kind">{text_html(k)}</span>' for k in labels(f, typechange))
        title = f'{text_html(name)} <span class="meta">{html.escape(f.status)}</span>{kinds} {_counts(f)}'
        lines, note = cut(patch_lines(f.patch))
        head = f'class="file{{}}" id="{fid}" data-p="{_attr(name.lower())}"'
        extra = ""
        if f.binary:
            extra = f'<div class="note">Binary file ({f.old_size} → {f.new_size} bytes)</div>'
        elif not any(line.startswith("@@") for line in lines):
            extra = '<div class="note">no content change</div>'
        size = len(lines)
        if eager and (size <= EAGER_FILE_LINES or f.binary) and size <= self.budget:
            self.budget -= size
            table = diff_table(f.path, lines) if lines else ""
            note_html = f'<div class="note">{text_html(note)}</div>' if note else ""
            return (
                f"<details {head.format('')} open><summary>{title}</summary>"
                f"{table}{extra}{note_html}</details>"
            )
        index = len(self.lazy)
        self.lazy.append("\n".join(lines) + "\n" if lines else "")
        note_attr = f' data-note="{_attr(note)}"' if note else ""
        return (
            f'<details {head.format(" lazy")} data-i="{index}"{note_attr}><summary>{title}</summary>'
            f"{extra}</details>"
        )

    def files(self, diff: TreeDiff | None) -> tuple[str, str]:
        """(main column HTML, navigation list HTML) for a step's files."""
        if diff is None:
            return '<div class="note">no diff: a rewind point is missing</div>', ""
        if not diff.files:
            return '<div class="note">no file changes</div>', ""
        changes = typechanges(diff.files)
        eager = len(diff.files) <= EAGER_TURN_FILES
        blocks: list[str] = []
        items: list[str] = []
        if not eager:
            blocks.append(
                f'<div class="note">{counted(len(diff.files), "file")}: collapsed, open one or '
                f"use Expand all</div>"
            )
        for i, f in enumerate(diff.files):
            blocks.append(self.file_block(f, changes.get(i), eager))
            name = display_name(f)
            count = "binary" if f.binary else f"+{f.additions} -{f.deletions}"
            items.append(
                f'<li class="nf"><a href="#f-{self._file_no}">{text_html(name)}</a>'
                f'<span class="count">{count}</span></li>'
            )
        self.counts["files"] += len(diff.files)
        nav = f'<ul class="nf">{"".join(items)}</ul>'
        if len(items) > NAV_OPEN_FILES:
            nav = f"<details><summary>{counted(len(items), 'file')}</summary>{nav}</details>"
        return "".join(blocks), nav

    # -- steps --------------------------------------------------------------------------------

    def prompt_open(self, step: Step, has_turns: bool) -> None:
        self.close_prompt()
        self.counts["prompts"] += 1
        number = self.counts["prompts"]
        totals = self.review.diff(step, with_patch=not has_turns)
        totals_text = totals.summary().strip() if totals is not None else "no diff"
        ident = html.escape(step.entry_id)
        self.main.append(
            f'<section class="prompt" id="e-{ident}"><h2>Prompt {number} '
            f'<span class="meta">{ident}</span>{_tags(step)}</h2>'
            f'<div class="meta">{html.escape(step.timestamp or "")} · {html.escape(step.session_id)}</div>'
            f'<pre class="text">{html.escape(step.text)}</pre>'
            + (f'<p class="summary">→ {html.escape(step.summary)}</p>' if step.summary else "")
            + f'<div class="totals">{html.escape(totals_text)}</div>'
        )
        self.nav.append(
            f'<li class="np" data-q="{_query(step.text, step.summary)}">'
            f'<a href="{_href("e-", step.entry_id)}">{number}. '
            f"{html.escape(_short(step.text) or '(empty prompt)')}</a>"
            f'<span class="count">{html.escape(totals_text)}</span><ol>'
        )
        self._open = True
        if not has_turns:
            block, nav = self.files(totals)
            self.main.append(block)
            self.nav.append(f'</ol><div class="pf">{nav}</div>')
            self._open_ol = False
        else:
            self._open_ol = True

    _open = False
    _open_ol = False

    def close_prompt(self) -> None:
        if self._open:
            self.main.append("</section>")
            self.nav.append("</ol></li>" if self._open_ol else "</li>")
        self._open = False

    def turn(self, step: Step) -> None:
        if not self._open:
            # Its own id (not the header's "top"): the filter hides a link's target with it.
            self.main.append('<section class="prompt" id="before"><h2>Before the first prompt</h2>')
            self.nav.append(
                '<li class="np" data-q=""><a href="#before">Before the first prompt</a><ol>'
            )
            self._open = self._open_ol = True
        self.counts["turns"] += 1
        number = self.counts["turns"]
        block, nav = self.files(self.review.diff(step))
        ident = html.escape(step.entry_id)
        tools = "".join(f"<li>{text_html(t)}</li>" for t in step.tools)
        said = step.summary or ("" if step.tools else "(no text)")
        self.main.append(
            f'<div class="turn" id="e-{ident}"><h3>Turn {number} <span class="meta">{ident}'
            f"{' · ' + html.escape(step.timestamp) if step.timestamp else ''}</span>{_tags(step)}</h3>"
            + (f'<p class="summary">{html.escape(said)}</p>' if said else "")
            + (f'<ul class="tools">{tools}</ul>' if tools else "")
            + f"{block}</div>"
        )
        label = step.tools[0] if step.tools else _short(step.summary) or "(no text)"
        more = f" +{len(step.tools) - 1}" if len(step.tools) > 1 else ""
        self.nav.append(
            f'<li class="nt" data-q="{_query(step.summary, *step.tools)}">'
            f'<a href="{_href("e-", step.entry_id)}">Turn {number}: {text_html(_short(label, 60))}'
            f"{more}</a>{nav}</li>"
        )


def gutter_css() -> str:
    """A width for the number columns of a ``table.diff gN`` (N digits, set from the diff's
    largest line number): ``N`` characters of the table's monospace font plus the padding."""
    return "".join(
        f"table.g{n} col.nc{{width:calc({n}ch + 14px)}}" for n in range(3, MAX_GUTTER_DIGITS + 1)
    )


def _tags(step: Step) -> str:
    tags = ""
    if step.label:
        tags += f'<span class="tag label">label: {html.escape(step.label)}</span>'
    if step.fork_children > 1:
        tags += f'<span class="tag fork">fork: {step.fork_children} branches</span>'
    return tags


def render_report(
    review: Review, *, side_by_side: bool = False, title: str | None = None
) -> tuple[str, dict[str, int]]:
    """The page's HTML and its counts (prompts, turns, files)."""
    session = review.session
    page = _Page(review)
    turns_of: dict[str, int] = {}
    for step in review.steps:
        if step.kind == "turn":
            turns_of[step.prompt_id] = turns_of.get(step.prompt_id, 0) + 1
    for step in review.steps:
        if step.kind == "prompt":
            page.prompt_open(step, bool(turns_of.get(step.entry_id)))
        else:
            page.turn(step)
    page.close_prompt()
    counts = page.counts
    name = title or session.name or session.id
    header = (
        f'<header id="top"><h1>Session {html.escape(name)}</h1><p>{header_counts(counts)}'
        f" · cwd {html.escape(session.cwd or '?')}"
        + (
            f" · forked from {html.escape(os.path.basename(session.parent_session))}"
            if session.parent_session
            else ""
        )
        + "</p></header>"
    )
    nav = (
        '<nav aria-label="Timeline"><div class="bar">'
        '<input type="search" id="q" placeholder="Filter files, tools, prompts…" aria-label="Filter">'
        '<button type="button" id="open">Expand all</button>'
        '<button type="button" id="close">Collapse all</button>'
        '<label><input type="checkbox" id="hdr"> git headers</label>'
        '<span class="views" role="group" aria-label="Diff view">'
        f'<button type="button" id="unified" aria-pressed="{str(not side_by_side).lower()}">Unified</button>'
        f'<button type="button" id="split" aria-pressed="{str(side_by_side).lower()}">Side by side</button>'
        '</span><span id="seen" class="count"></span></div>'
        '<p id="none" class="note" hidden></p>'
        f'<ol class="tl">{"".join(page.nav)}</ol></nav>'
    )
    css = CSS + gutter_css() + FORMATTER.get_style_defs("td.c")
    body_class = ' class="sbs"' if side_by_side else ""
    body_class += f' data-s="{_attr(session.id)}"'
    html_page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>rewind report · {html.escape(name)}</title><style>{css}</style></head>"
        f"<body{body_class}>{header}{nav}<main>"
        + '<p id="nomatch" class="note" hidden></p>'
        + ("".join(page.main) or '<p class="note">no prompts on this branch</p>')
        + "</main>"
        + (
            f'<script type="application/octet-stream" id="patches">{pack_patches(page.lazy)}</script>'
            if page.lazy
            else ""
        )
        + f"<script>{SCRIPT}</script></body></html>\n"
    )
    return html_page, counts


def write_report(
    repo: GitRepo,
    path: Path,
    output: Path,
    *,
    side_by_side: bool = False,
    find_renames: bool = False,
) -> ReportResult:
    review = open_review(repo, path, find_renames=find_renames)
    page, counts = render_report(review, side_by_side=side_by_side)
    data = page.encode("utf-8", "replace")
    temp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    try:
        temp.write_bytes(data)
        os.replace(temp, output)
    finally:
        temp.unlink(missing_ok=True)
    return ReportResult(
        output, counts["prompts"], counts["turns"], counts["files"], len(data), review.warnings
    )


__all__ = ["ReportResult", "counted", "header_counts", "render_report", "write_report"]
