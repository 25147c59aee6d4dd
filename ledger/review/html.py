"""``rewind report``: the session's branch as one self-contained HTML page.

Why it exists: a review to open in a browser or attach to a pull request. The page shows the
branch as a timeline: every prompt (its text, the assistant's summary line, totals), every turn
(the files it changed and each file's diff, syntax-highlighted with pygments, unified or side by
side), labels and forks marked.

Invariants:
- Self-contained: one file, inline CSS only, no script, no network reference (no ``http:``,
  ``https:`` or ``//`` URL anywhere in markup or style); every user-provided string is escaped.
- The diff content is the same :class:`~ledger.review.diff.TreeDiff` that ``rewind show`` prints.
- Written atomically (temporary file next to the target, renamed into place); nothing else is
  written.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pygments import highlight  # type: ignore[import-untyped]
from pygments.formatters import HtmlFormatter  # type: ignore[import-untyped]
from pygments.lexer import Lexer  # type: ignore[import-untyped]
from pygments.lexers import TextLexer, get_lexer_for_filename  # type: ignore[import-untyped]
from pygments.util import ClassNotFound  # type: ignore[import-untyped]

from ledger.git.repo import GitRepo
from ledger.review.diff import FileDiff, TreeDiff
from ledger.review.show import Review, open_review
from ledger.review.steps import Step

_MAX_LINES_PER_FILE = 2000
_FORMATTER = HtmlFormatter(nowrap=True, style="default")
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;background:#f6f8fa;color:#1f2328}
header{background:#24292f;color:#fff;padding:16px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#d0d7de;font-size:13px}main{max-width:1200px;margin:0 auto;padding:16px 24px}
.prompt{background:#fff;border:1px solid #d0d7de;border-left:4px solid #0969da;border-radius:6px;margin:18px 0;
padding:12px 16px}.prompt>h2{font-size:15px;margin:0 0 6px}.prompt pre.text{white-space:pre-wrap;margin:4px 0;
font:inherit}.meta{color:#57606a;font-size:12px}.summary{color:#1a7f37;margin:4px 0}.totals{font-size:12px;
color:#57606a}.tag{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;margin-left:6px}
.label{background:#ddf4ff;color:#0969da}.fork{background:#fff8c5;color:#9a6700}
.turn{border-top:1px dashed #d0d7de;margin-top:10px;padding-top:8px}.turn h3{font-size:13px;margin:0 0 4px}
.file{border:1px solid #d0d7de;border-radius:6px;margin:8px 0;overflow:hidden}
.file>summary{background:#f6f8fa;padding:6px 10px;cursor:pointer;font:12px ui-monospace,monospace}
.add{color:#1a7f37}.del{color:#cf222e}table.diff{border-collapse:collapse;width:100%;font:12px/1.4 ui-monospace,
SFMono-Regular,Menlo,monospace;table-layout:fixed}table.diff td{padding:0 6px;vertical-align:top;white-space:pre-wrap;
word-break:break-all}td.n{width:3.5em;color:#8c959f;text-align:right;user-select:none}tr.a td.c,td.c.a{background:#e6ffec}
tr.d td.c,td.c.d{background:#ffebe9}tr.h td{background:#ddf4ff;color:#57606a}td.e{background:#f6f8fa}
.note{padding:6px 10px;color:#57606a;font-size:12px}col.nc{width:3.5em}
"""


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


def _lexer(path: str) -> Lexer:
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def _highlight_lines(path: str, lines: list[str]) -> list[str]:
    if not lines:
        return []
    out = highlight("\n".join(lines) + "\n", _lexer(path), _FORMATTER).split("\n")
    return (out + [""] * len(lines))[: len(lines)]


def _parse_hunks(patch: str) -> list[tuple[str, list[tuple[str, str]]]]:
    hunks: list[tuple[str, list[tuple[str, str]]]] = []
    for line in patch.split("\n"):
        if line.startswith("@@"):
            hunks.append((line, []))
        elif hunks and line[:1] in (" ", "+", "-"):
            hunks[-1][1].append((line[0], line[1:]))
    return hunks


def _file_html(f: FileDiff, side_by_side: bool) -> str:
    badge = (
        "binary"
        if f.binary
        else f'<span class="add">+{f.additions}</span> <span class="del">-{f.deletions}</span>'
    )
    mode = ""
    if f.old_mode != f.new_mode and f.old_mode and f.new_mode:
        mode = f" mode {f.old_mode:06o} → {f.new_mode:06o}"
    title = f'{html.escape(f.display_path)} <span class="meta">{f.status}{mode}</span> {badge}'
    if f.binary:
        return (
            f'<details class="file" open><summary>{title}</summary><div class="note">Binary file '
            f"({f.old_size} → {f.new_size} bytes)</div></details>"
        )
    hunks = _parse_hunks(f.patch)
    if not hunks:
        return f'<details class="file"><summary>{title}</summary><div class="note">no content change</div></details>'
    rows: list[str] = []
    shown = 0
    for header, body in hunks:
        if shown > _MAX_LINES_PER_FILE:
            rows.append('<tr class="h"><td colspan="4">… (diff cut: too long)</td></tr>')
            break
        shown += len(body)
        rows.append(_hunk_rows(f.path, header, body, side_by_side))
    cols = (
        '<col class="nc"><col><col class="nc"><col>'
        if side_by_side
        else '<col class="nc"><col class="nc"><col>'
    )
    return (
        f'<details class="file" open><summary>{title}</summary><table class="diff"><colgroup>{cols}</colgroup>'
        f"{''.join(rows)}</table></details>"
    )


def _hunk_numbers(header: str) -> tuple[int, int]:
    try:
        old, new = header.split(" ")[1:3]
        return int(old[1:].split(",")[0]), int(new[1:].split(",")[0])
    except (ValueError, IndexError):
        return 0, 0


def _hunk_rows(path: str, header: str, body: list[tuple[str, str]], side_by_side: bool) -> str:
    marks = [m for m, _ in body]
    lit = _highlight_lines(path, [t for _, t in body])
    old_no, new_no = _hunk_numbers(header)
    cols = 4 if side_by_side else 3
    rows = [f'<tr class="h"><td colspan="{cols}">{html.escape(header)}</td></tr>']
    if not side_by_side:
        for mark, code in zip(marks, lit):
            a = b = ""
            if mark != "+":
                a, old_no = str(old_no), old_no + 1
            if mark != "-":
                b, new_no = str(new_no), new_no + 1
            cls = {"+": "a", "-": "d"}.get(mark, "")
            rows.append(
                f'<tr class="{cls}"><td class="n">{a}</td><td class="n">{b}</td>'
                f'<td class="c">{html.escape(mark) if mark != " " else " "}{code}</td></tr>'
            )
        return "".join(rows)
    left: list[tuple[int, str]] = []
    right: list[tuple[int, str]] = []

    def flush() -> None:
        for i in range(max(len(left), len(right))):
            lcell = (
                f'<td class="n">{left[i][0]}</td><td class="c d">{left[i][1]}</td>'
                if i < len(left)
                else '<td class="n"></td><td class="e"></td>'
            )
            rcell = (
                f'<td class="n">{right[i][0]}</td><td class="c a">{right[i][1]}</td>'
                if i < len(right)
                else '<td class="n"></td><td class="e"></td>'
            )
            rows.append(f"<tr>{lcell}{rcell}</tr>")
        left.clear()
        right.clear()

    for mark, code in zip(marks, lit):
        if mark == "-":
            left.append((old_no, code))
            old_no += 1
        elif mark == "+":
            right.append((new_no, code))
            new_no += 1
        else:
            flush()
            rows.append(
                f'<tr><td class="n">{old_no}</td><td class="c">{code}</td>'
                f'<td class="n">{new_no}</td><td class="c">{code}</td></tr>'
            )
            old_no += 1
            new_no += 1
    flush()
    return "".join(rows)


def _tags(step: Step) -> str:
    tags = ""
    if step.label:
        tags += f'<span class="tag label">label: {html.escape(step.label)}</span>'
    if step.fork_children > 1:
        tags += f'<span class="tag fork">fork: {step.fork_children} branches</span>'
    return tags


def _diff_block(diff: TreeDiff | None, side_by_side: bool) -> str:
    if diff is None:
        return '<div class="note">no diff: a rewind point is missing</div>'
    if not diff.files:
        return '<div class="note">no file changes</div>'
    return "".join(_file_html(f, side_by_side) for f in diff.files)


def render_report(
    review: Review, *, side_by_side: bool = False, title: str | None = None
) -> tuple[str, dict[str, int]]:
    """The page's HTML and its counts (prompts, turns, files)."""
    session = review.session
    counts = {"prompts": 0, "turns": 0, "files": 0}
    parts: list[str] = []
    current: list[str] | None = None
    turns_of: dict[str, int] = {}
    for step in review.steps:
        if step.kind == "turn":
            turns_of[step.prompt_id] = turns_of.get(step.prompt_id, 0) + 1
    for step in review.steps:
        if step.kind == "prompt":
            if current is not None:
                parts.append("".join(current) + "</section>")
            counts["prompts"] += 1
            totals = review.diff(step, with_patch=turns_of.get(step.entry_id, 0) == 0)
            totals_text = totals.summary().strip() if totals is not None else "no diff"
            current = [
                f'<section class="prompt" id="e-{html.escape(step.entry_id)}"><h2>Prompt '
                f'{counts["prompts"]} <span class="meta">{html.escape(step.entry_id)}</span>{_tags(step)}</h2>'
                f'<div class="meta">{html.escape(step.timestamp or "")} · {html.escape(step.session_id)}</div>'
                f'<pre class="text">{html.escape(step.text)}</pre>'
                + (f'<p class="summary">→ {html.escape(step.summary)}</p>' if step.summary else "")
                + f'<div class="totals">{html.escape(totals_text)}</div>'
            ]
            if not turns_of.get(step.entry_id):
                counts["files"] += len(totals.files) if totals is not None else 0
                current.append(_diff_block(totals, side_by_side))
        else:
            if current is None:
                current = ['<section class="prompt"><h2>Before the first prompt</h2>']
            counts["turns"] += 1
            diff = review.diff(step)
            counts["files"] += len(diff.files) if diff is not None else 0
            current.append(
                f'<div class="turn" id="e-{html.escape(step.entry_id)}"><h3>Turn '
                f'<span class="meta">{html.escape(step.entry_id)}</span>{_tags(step)}</h3>'
                f'<p class="summary">{html.escape(step.summary or "(no text)")}</p>'
                f"{_diff_block(diff, side_by_side)}</div>"
            )
    if current is not None:
        parts.append("".join(current) + "</section>")
    name = title or session.name or session.id
    header = (
        f"<header><h1>Session {html.escape(name)}</h1><p>{counts['prompts']} prompts · {counts['turns']} turns"
        f" · cwd {html.escape(session.cwd or '?')}"
        + (
            f" · forked from {html.escape(os.path.basename(session.parent_session))}"
            if session.parent_session
            else ""
        )
        + "</p></header>"
    )
    css = _CSS + _FORMATTER.get_style_defs("td.c")
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>rewind report · {html.escape(name)}</title><style>{css}</style></head><body>{header}<main>"
        + ("".join(parts) or '<p class="note">no prompts on this branch</p>')
        + "</main></body></html>\n"
    )
    return page, counts


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


__all__ = ["ReportResult", "render_report", "write_report"]
