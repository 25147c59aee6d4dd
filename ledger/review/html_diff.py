"""One file's diff as HTML for ``rewind report``: exactly the lines of its patch, highlighted.

Why it exists: the report must show what ``rewind show`` prints, line for line. A highlighter
that is handed a whole hunk rewrites it (pygments turns ``\\r`` and ``\\r\\n`` into ``\\n`` and drops
a leading BOM), so every later line shifts; ``str.splitlines`` splits on ``\\r``, ``\\x0b``,
``\\x1c``, ``\\u2028`` and more. Here:

- a patch is split on ``\\n`` only; each patch line becomes one row of a unified table (old
  number, new number, the line; the page's script builds the side-by-side view from these rows)
  whose last cell's text is the line itself (marker included): headers (``diff --git``, ``index``, mode lines: hidden
  until asked for), hunk headers, body lines and ``\\ No newline at end of file``;
- body lines are highlighted by lexing each hunk's text with ``get_tokens_unprocessed`` (no
  newline conversion, no stripping) and cutting the tokens at ``\\n`` only; if the tokens do not
  give back the text exactly, the hunk is shown unhighlighted;
- control characters, ``\\r``, ``\\u2028``/``\\u2029`` and bytes that are not UTF-8 are shown as a
  visible glyph, the character itself kept in a hidden ``<i>`` (so the DOM text is the patch
  line and nothing breaks the line);
- a large diff (or any diff past the page's eager budget) is not rendered here: its patch text
  travels in the page's one packed block (:func:`pack_patches`) and the page's script renders it,
  by the same rules, when it is opened (:mod:`ledger.review.assets`).

Names are shown as git quotes them when they are not UTF-8 or hold control characters, quotes or
backslashes (``"tests/caf\\351.txt"``); symlinks, submodules, type and mode changes are labelled.

Invariants: pure functions of the :class:`FileDiff` values; every string that reaches the page is
escaped here; script data is base64 (no ``</script>`` break-out possible).
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pygments.formatters import HtmlFormatter  # type: ignore[import-untyped]
from pygments.lexer import Lexer  # type: ignore[import-untyped]
from pygments.lexers import TextLexer, get_lexer_for_filename  # type: ignore[import-untyped]
from pygments.token import Token  # type: ignore[import-untyped]
from pygments.util import ClassNotFound  # type: ignore[import-untyped]

from ledger.quoting import quote_c_style
from ledger.review.diff import FileDiff

FORMATTER = HtmlFormatter(nowrap=True, style="default")
EAGER_FILE_LINES = 60
"""A file's patch with more lines than this is collapsed and rendered only when opened."""
MAX_GUTTER_DIGITS = 12
"""The page's style sheet has a gutter width for 3 to this many digits."""
MAX_FILE_LINES = 5000
MAX_FILE_CHARS = 512 * 1024
"""A file's patch is cut after this many lines or characters (the page says so)."""
_SPECIAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_GLYPH = {
    "\r": "CR",
    "\x0b": "VT",
    "\x0c": "FF",
    "\x1c": "FS",
    "\x1d": "GS",
    "\x1e": "RS",
    "\x1f": "US",
    "\x7f": "DEL",
    "\u2028": "LS",
    "\u2029": "PS",
}
"""Glyphs in plain letters (every font has them; the U+240x pictures are often missing)."""
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)")
_HUNK_FULL = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))?")
_SYMLINK, _GITLINK, _EXEC = 0o120000, 0o160000, 0o100755


def _glyph(char: str) -> str:
    code = ord(char)
    if char in _GLYPH:
        return _GLYPH[char]
    if code < 32:
        return "^" + chr(code + 64)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:x}"
    return f"U+{code:04X}"


def _special(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    # A literal CR in HTML source becomes LF when parsed; &#13; keeps it a CR in the DOM.
    inner = "&#13;" if char == "\r" else "\ufffd" if code == 0 or 0xD800 <= code <= 0xDFFF else char
    return f'<span class="cc" data-g="{_glyph(char)}"><i>{inner}</i></span>'


def text_html(text: str) -> str:
    """``text`` escaped for an element's content, special characters made visible."""
    escaped = html.escape(text, quote=False)
    return _SPECIAL.sub(_special, escaped) if _SPECIAL.search(escaped) else escaped


def git_quote(name: str) -> str:
    """A path as git prints it, a UTF-8 name kept readable (:func:`ledger.quoting.quote_c_style`):
    a name that is not UTF-8 is quoted with every byte >= 0x80 in octal (git's default
    ``core.quotepath``); a UTF-8 name only when it holds a control character, ``"`` or ``\\``."""
    return quote_c_style(name, keep_utf8=True)


def display_name(f: FileDiff) -> str:
    if f.old_path != f.new_path:
        return f"{git_quote(f.old_path)} => {git_quote(f.new_path)}"
    return git_quote(f.path)


def patch_lines(patch: str) -> list[str]:
    """The lines of a patch: split on ``\\n`` only (never ``str.splitlines``)."""
    lines = patch.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# ---------------------------------------------------------------- labels


def _kind(mode: int) -> str:
    if mode == _SYMLINK:
        return "symlink"
    if mode == _GITLINK:
        return "submodule"
    return "file"


def _target(f: FileDiff, mark: str) -> str | None:
    """A symlink's target: its one body line on the ``mark`` side of the patch."""
    in_hunk = False
    for line in patch_lines(f.patch):
        if line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line[:1] == mark:
            return line[1:]
    return None


def labels(f: FileDiff, typechange: tuple[int, int] | None = None) -> list[str]:
    """Short labels for the kind of change: ``new symlink → x``, ``mode 100644 → 100755``…"""
    out: list[str] = []
    old, new = f.old_mode, f.new_mode
    if typechange is not None:
        out.append(f"type change: {_kind(typechange[0])} → {_kind(typechange[1])}")
    if f.status == "added":
        if new == _SYMLINK:
            out.append(f"new symlink → {_target(f, '+') or '?'}")
        elif new == _GITLINK:
            out.append("new submodule")
        elif new == _EXEC:
            out.append("new file, mode 100755")
    elif f.status == "deleted":
        if old == _SYMLINK:
            out.append(f"deleted symlink → {_target(f, '-') or '?'}")
        elif old == _GITLINK:
            out.append("deleted submodule")
    else:
        if f.status in ("renamed", "copied"):
            out.append(f.status)
        if old and new and _kind(old) != _kind(new):
            out.append(f"{_kind(old)} → {_kind(new)}")
        elif old == new == _SYMLINK and (f.additions or f.deletions):
            out.append(f"symlink → {_target(f, '+') or '?'} (was {_target(f, '-') or '?'})")
        elif old and new and old != new:
            out.append(f"mode {old:06o} → {new:06o}")
    return out


def typechanges(files: list[FileDiff]) -> dict[int, tuple[int, int]]:
    """git prints a type change (file ↔ symlink) as a deletion and an addition of one path:
    index of each half → (old mode, new mode)."""
    out: dict[int, tuple[int, int]] = {}
    for i in range(len(files) - 1):
        a, b = files[i], files[i + 1]
        pair = a.status == "deleted" and b.status == "added" and a.old_path == b.new_path
        if pair and _kind(a.old_mode) != _kind(b.new_mode):
            out[i] = out[i + 1] = (a.old_mode, b.new_mode)
    return out


# ---------------------------------------------------------------- highlighting


@lru_cache(maxsize=256)
def _lexer(suffix: str) -> Lexer:
    try:
        return get_lexer_for_filename(f"x{suffix}", stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def _suffix(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    return base[dot:] if dot > 0 else base  # "Makefile", "Dockerfile" name their lexer whole


@lru_cache(maxsize=1024)
def _css_class(ttype: Any) -> str:
    """The formatter's class for a token type with a style of its own or inherited, else ''."""
    classes = FORMATTER.ttype2class
    while ttype is not Token and ttype not in classes:
        ttype = ttype.parent
    return str(classes.get(ttype, ""))


def highlight_lines(path: str, lines: list[str]) -> list[str]:
    """HTML for each of ``lines`` (no ``\\n`` inside any), one output per input line, always."""
    if not lines:
        return []
    text = "\n".join(lines)
    try:
        tokens = list(_lexer(_suffix(path)).get_tokens_unprocessed(text))
    except Exception:  # a lexer bug must not cost the page; the text is shown plain instead
        tokens = []
    if "".join(t[2] for t in tokens) != text:
        return [text_html(line) for line in lines]
    out: list[list[str]] = [[]]
    for _, ttype, value in tokens:
        css = _css_class(ttype)
        for i, part in enumerate(value.split("\n")):
            if i:
                out.append([])
            if part:
                body = text_html(part)
                out[-1].append(f"<span class={css}>{body}</span>" if css else body)
    return ["".join(parts) for parts in out]


# ---------------------------------------------------------------- rows


@dataclass
class _Hunk:
    header: str
    old: int
    new: int
    body: list[str]
    """Body lines, marker included; ``\\`` lines (no newline at end of file) too."""


def _split(lines: list[str]) -> list[str | _Hunk]:
    """Header lines and hunks in order. A ``diff `` line starts headers again: a type change is
    printed as two patches (the old entry deleted, the new one added) in one file's text."""
    items: list[str | _Hunk] = []
    current: _Hunk | None = None
    for line in lines:
        if line.startswith("@@"):
            m = _HUNK.match(line)
            current = _Hunk(line, int(m.group(1)) if m else 0, int(m.group(2)) if m else 0, [])
            items.append(current)
        elif current is not None and not line.startswith("diff "):
            current.body.append(line)
        else:
            current = None
            items.append(line)
    return items


def _full_row(cls: str, text: str) -> str:
    return f'<tr class="{cls}"><td colspan="3">{text_html(text)}</td></tr>'


def gutter_digits(lines: list[str]) -> int:
    """Digits of the largest line number a patch's rows show (at least 3): the gutter's width.

    A hunk ``@@ -a,b +c,d @@`` numbers old lines up to ``a + b - 1`` and new ones up to
    ``c + d - 1``; the page sizes its number columns from this so that no number wraps (a row
    past line 9,999 stays one line tall)."""
    top = 0
    for line in lines:
        if line.startswith("@@"):
            m = _HUNK_FULL.match(line)
            if m:
                old = int(m.group(1)) + int(m.group(2) or 1)
                new = int(m.group(3)) + int(m.group(4) or 1)
                top = max(top, old, new)
    return min(MAX_GUTTER_DIGITS, max(3, len(str(top))))


def diff_table(path: str, lines: list[str]) -> str:
    """A unified ``table.diff`` with one row per patch line: old number, new number, the line.

    The page's script builds the side-by-side view from these rows when asked (so the page
    carries one table per diff, whatever the view)."""
    rows: list[str] = []
    for hunk in _split(lines):
        if isinstance(hunk, str):
            rows.append(_full_row("x" if hunk.startswith("Binary files ") else "m", hunk))
            continue
        rows.append(_full_row("h", hunk.header))
        code_lines = [line for line in hunk.body if line[:1] in (" ", "+", "-")]
        lit = iter(highlight_lines(path, [line[1:] for line in code_lines]))
        old, new = hunk.old, hunk.new
        for line in hunk.body:
            mark = line[:1]
            if mark not in (" ", "+", "-"):
                rows.append(_full_row("x", line))
                continue
            code = html.escape(mark) + next(lit)
            a = b = ""
            if mark != "+":
                a, old = str(old), old + 1
            if mark != "-":
                b, new = str(new), new + 1
            cls = {"+": "a", "-": "d"}.get(mark, "")
            rows.append(
                f'<tr class="{cls}"><td class="n">{a}</td><td class="n">{b}</td>'
                f'<td class="c">{code}</td></tr>'
            )
    return (
        f'<table class="diff g{gutter_digits(lines)}"><colgroup><col class="nc"><col class="nc">'
        f"<col></colgroup>{''.join(rows)}</table>"
    )


def script_json(value: object) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``<``/``>``/``&``, no lone surrogate."""
    text = json.dumps(value, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)


def pack_patches(patches: list[str]) -> str:
    """The patch texts as base64 of gzip of a JSON array (what the page's script unpacks).

    Base64 holds no ``<``, ``&`` or quote, so the block cannot end its ``<script>`` early; lone
    surrogates (bytes that are not UTF-8) travel as ``\\udcXX`` escapes.
    """
    data = script_json(patches).encode("utf-8")
    return base64.b64encode(gzip.compress(data, compresslevel=6, mtime=0)).decode("ascii")


def cut(lines: list[str]) -> tuple[list[str], str]:
    """The lines to show (bounded by lines and characters) and a note when some were cut."""
    total = 0
    for i, line in enumerate(lines):
        total += len(line) + 1
        if i >= MAX_FILE_LINES or total > MAX_FILE_CHARS:
            return lines[:i], f"… diff cut: {len(lines) - i} more lines (rewind show has them all)"
    return lines, ""


__all__ = [
    "EAGER_FILE_LINES",
    "FORMATTER",
    "MAX_GUTTER_DIGITS",
    "cut",
    "diff_table",
    "display_name",
    "git_quote",
    "gutter_digits",
    "highlight_lines",
    "labels",
    "pack_patches",
    "patch_lines",
    "script_json",
    "text_html",
    "typechanges",
]
