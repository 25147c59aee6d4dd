"""``rewind report`` shows exactly the lines of the patch, whatever the bytes in the files.

The oracle is ``git diff`` of the two snapshots: for every file of a turn, the texts of the
report's rows (the last cell of each row, hidden characters included, read with an HTML parser)
are the lines of git's patch split on ``\\n`` only. Files carry lone CRs, CRLFs, a mix, no final
newline, U+2028, form feeds, vertical tabs, NEL, tabs, a BOM, bytes that are not UTF-8, binary
and empty content; plus a symlink, a type change, a mode change and a name that is not UTF-8.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from ledger.git.repo import GitRepo
from ledger.review.html import render_report
from ledger.review.show import open_review
from tests.enginekit import Agent

CR_BEFORE = b"header\nstep 1\rstep 2\rstep 3\nA\nB\nC\nD\nE\n"
CR_AFTER = b"header\nstep 1\rstep 2\rstep 3\nA\nB\nC changed\nD\nE changed\n"
LATIN1 = b"caf\xe9.txt"

FIRST: dict[bytes, bytes] = {
    b"cr.txt": CR_BEFORE,
    b"crlf.txt": b"one\r\ntwo\r\nthree\r\n",
    b"mixed.py": b"a = 1\r\nb = '''x\ry'''\nc = 3\r\n",
    b"nofinal.txt": b"first\nlast without newline",
    b"seps.txt": "p\u2028q\u2029r\nform\x0cfeed\nv\x0btab\nfs\x1cgs\x1d\nnel\x85x\n".encode(),
    b"tabs.py": b"def f():\n\treturn 1\n\t\t# two\n",
    b"bom.py": b"\xef\xbb\xbfprint('bom')\nx = 1\n",
    b"latin1.txt": b"caf\xe9 au lait\nna\xefve\n",
    b"bin.dat": b"\x00\x01\x02binary\n",
    b"empty.txt": b"",
    b"esc.html": b"<script>alert(1)</script>\n&amp; </td></tr>\n",
    LATIN1: b"latin one name\n",
    b"mode.sh": b"#!/bin/sh\necho hi\n",
}
SECOND: dict[bytes, bytes] = {
    b"cr.txt": CR_AFTER,
    b"crlf.txt": b"one\r\nTWO\r\nthree\r\n",
    b"mixed.py": b"a = 1\r\nb = '''x\ry\rz'''\nc = 4\r\n",
    b"nofinal.txt": b"first\nlast changed, still no newline",
    b"seps.txt": "p\u2028Q\u2029r\nform\x0cfeed\nv\x0bTAB\nfs\x1cgs\x1d\nnel\x85y\n".encode(),
    b"tabs.py": b"def f():\n\treturn 2\n\t\t# two\n",
    b"bom.py": b"\xef\xbb\xbfprint('bom!')\nx = 1\n",
    b"latin1.txt": b"caf\xe9 au lait\nna\xefve \xe0 la\n",
    b"bin.dat": b"\x00\x01\x03binary\n",
    b"empty.txt": b"now\n",
    b"esc.html": b"<script>alert(2)</script>\n&amp; </td></tr>\n",
    LATIN1: b"latin one name, changed\n",
}


def _write_all(files: dict[bytes, bytes]):
    def change(repo: Path) -> None:
        for name, data in files.items():
            (repo / os.fsdecode(name)).write_bytes(data)

    return change


def _second(repo: Path) -> None:
    _write_all(SECOND)(repo)
    os.chmod(repo / "mode.sh", 0o755)
    (repo / "link").unlink()
    (repo / "link").write_text("now a file\n")
    (repo / "newlink").symlink_to("cr.txt")


def _first(repo: Path) -> None:
    _write_all(FIRST)(repo)
    (repo / "link").symlink_to("target/path")


class RowText(HTMLParser):
    """Per ``details.file`` (by id): the text of each table row's last cell, and the lazy data."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.files: dict[str, list[str]] = {}
        self.numbers: dict[str, list[list[str]]] = {}
        self.lazy: dict[str, int] = {}
        """File id → index of its patch in the packed block (a diff rendered on opening)."""
        self.packed = ""
        self.titles: dict[str, str] = {}
        self._file: str | None = None
        self._cells: list[str] | None = None
        self._in_summary = False
        self._in_data = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "details" and "file" in (a.get("class") or "").split():
            self._file = a["id"]
            if a.get("data-i") is not None:
                self.lazy[self._file] = int(a["data-i"] or "")
            self.files[self._file] = []
            self.numbers[self._file] = []
            self.titles[self._file] = ""
        elif self._file and tag == "summary":
            self._in_summary = True
        elif self._file and tag == "tr":
            self._cells = []
        elif self._cells is not None and tag == "td":
            self._cells.append("")
        elif tag == "script" and a.get("id") == "patches":
            self._in_data = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._file and self._cells is not None:
            self.files[self._file].append(self._cells[-1])
            self.numbers[self._file].append(self._cells[:-1])
            self._cells = None
        elif tag == "summary":
            self._in_summary = False
        elif tag == "script":
            self._in_data = False
        elif tag == "details":
            self._file = None

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.packed += data
        elif self._in_summary and self._file:
            self.titles[self._file] += data
        elif self._cells:
            self._cells[-1] += data


def visible(line: str) -> str:
    """What a page can hold of a patch line: bytes that are not UTF-8 become U+FFFD."""
    return re.sub("[\udc80-\udcff]", "\ufffd", line)


def git_patch_lines(repo: Path, before: str, after: str) -> list[str]:
    out = subprocess.run(
        ["git", "diff", "--no-renames", before, after],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8", "surrogateescape")
    lines = out.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def record(repo: Path, agent_dir: Path) -> Agent:
    agent = Agent.start(repo, agent_dir)
    agent.prompt("Write the odd files", _first)
    agent.prompt("Change the odd files", _second)
    return agent


def test_report_rows_are_exactly_the_lines_git_diff_prints(repo: Path, tmp_path: Path) -> None:
    agent = record(repo, tmp_path / "agent")
    review = open_review(GitRepo.discover(repo), agent.session_file)
    page, _counts = render_report(review)
    parsed = RowText()
    parsed.feed(page)
    turns = [s for s in review.steps if s.kind == "turn"]
    assert len(turns) == 2
    start = 1
    for step in turns:
        assert step.before and step.after
        diff = review.diff(step)
        assert diff is not None
        ids = [f"f-{n}" for n in range(start, start + len(diff.files))]
        start += len(diff.files)
        shown: list[str] = []
        for fid, f in zip(ids, diff.files):
            assert fid not in parsed.lazy, f"{f.path} should be rendered into the page"
            shown.extend(parsed.files[fid])
            assert parsed.files[fid] == [visible(x) for x in f.patch.split("\n")[:-1]], f.path
        assert shown == [visible(x) for x in git_patch_lines(repo, step.before, step.after)]


def test_lone_carriage_returns_do_not_shift_the_lines_after_them(
    repo: Path, tmp_path: Path
) -> None:
    agent = record(repo, tmp_path / "agent")
    review = open_review(GitRepo.discover(repo), agent.session_file)
    page, _counts = render_report(review)
    parsed = RowText()
    parsed.feed(page)
    fid = next(k for k, t in parsed.titles.items() if t.startswith("cr.txt") and "modified" in t)
    rows = dict(zip(parsed.files[fid], parsed.numbers[fid]))
    # (old number, new number) of each line: the CR line is one line, so C is still line 5.
    assert rows[" step 1\rstep 2\rstep 3"] == ["2", "2"]
    assert rows["-C"] == ["5", ""] and rows["+C changed"] == ["", "5"]
    assert rows[" D"] == ["6", "6"]
    assert rows["-E"] == ["7", ""] and rows["+E changed"] == ["", "7"]
    assert '<span class="cc" data-g="CR"><i>&#13;</i></span>' in page


def test_report_labels_links_modes_and_names_as_git_quotes_them(repo: Path, tmp_path: Path) -> None:
    agent = record(repo, tmp_path / "agent")
    review = open_review(GitRepo.discover(repo), agent.session_file)
    page, _counts = render_report(review)
    parsed = RowText()
    parsed.feed(page)
    titles = list(parsed.titles.values())
    assert any(t.startswith('"caf\\351.txt" added') for t in titles), titles
    assert any("new symlink → target/path" in t for t in titles)
    assert any("new symlink → cr.txt" in t for t in titles)
    assert any(t.startswith("mode.sh modified") and "mode 100644 → 100755" in t for t in titles)
    assert any(t.startswith("link typechange") and "symlink → file" in t for t in titles)
    # A type change is two patches in one text: the second's headers are headers, not lines.
    link = next(k for k, t in parsed.titles.items() if t.startswith("link typechange"))
    rows = dict(zip(parsed.files[link], parsed.numbers[link]))
    assert rows["+++ b/link"] == [] and rows["+now a file"] == ["", "1"]
    assert "caf?.txt" not in page and "caf\ufffd.txt" not in page


def test_large_diffs_travel_packed_with_the_exact_patch(repo: Path, tmp_path: Path) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    body = "".join(f"line {i} </script><!-- \r & \u2028\n" for i in range(300))
    agent.prompt("A big file", lambda r: (r / "big.txt").write_text(body, newline=""))
    review = open_review(GitRepo.discover(repo), agent.session_file)
    page, _counts = render_report(review)
    parsed = RowText()
    parsed.feed(page)
    (fid,) = parsed.lazy
    diff = review.diff(next(s for s in review.steps if s.kind == "turn"))
    assert diff is not None
    patches = json.loads(gzip.decompress(base64.b64decode(parsed.packed, validate=True)))
    assert patches[parsed.lazy[fid]] == diff.files[0].patch
    assert not parsed.files[fid], "a large diff is rendered only when opened"
    assert "</script><!--" not in page and "line 7 </script>" not in page


def test_turns_name_the_tools_they_ran_instead_of_no_text(repo: Path, tmp_path: Path) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    e = agent.engine
    e.before_agent_start("Add the app")
    e.turn_start(0)
    agent.user("Add the app")
    (repo / "app.py").write_text("x = 1\n")
    message = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "write it, then test"},
            {"type": "toolCall", "id": "c1", "name": "write", "arguments": {"path": "app.py"}},
            {"type": "toolCall", "id": "c2", "name": "edit", "arguments": {"path": "<b>.py"}},
            {
                "type": "toolCall",
                "id": "c3",
                "name": "bash",
                "arguments": {"command": "pytest -q\nls"},
            },
        ],
        "stopReason": "toolUse",
        "timestamp": 0,
    }
    agent.writer.append_entry({"type": "message", "message": message})
    e.turn_end(0, message=message)
    e.agent_end()
    review = open_review(GitRepo.discover(repo), agent.session_file)
    (turn,) = [s for s in review.steps if s.kind == "turn"]
    assert turn.tools == ("write app.py", "edit <b>.py", "bash: pytest -q …")
    page, _counts = render_report(review)
    assert (
        '<ul class="tools"><li>write app.py</li><li>edit &lt;b&gt;.py</li>'
        "<li>bash: pytest -q …</li></ul>" in page
    )
    assert ">Turn 1: write app.py +2</a>" in page
    assert "(no text)" not in page


def test_header_counts_one_prompt_turn_and_file_change_in_the_singular(
    repo: Path, tmp_path: Path
) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    agent.prompt("One change", lambda r: (r / "one.txt").write_text("one\n"))
    review = open_review(GitRepo.discover(repo), agent.session_file)
    page, counts = render_report(review)
    assert counts == {"prompts": 1, "turns": 1, "files": 1}
    assert "<p>1 prompt · 1 turn · 1 file change · cwd " in page
    assert not re.search(r"\b1 (prompts|turns|file changes)\b", page)
