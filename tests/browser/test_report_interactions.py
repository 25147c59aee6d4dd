"""``rewind report`` used in a real headless Chromium, as a reviewer uses GitHub's "Files changed":

- the gutter fits any line number: rows past line 9,999 (a 20,000-line file) are one line tall,
  in the rows written by Python and in those the page's script draws, unified and side by side;
- the navigation pane follows the scroll: the prompt, turn and file at the top of the main
  column are marked current in the pane, and the pane scrolls to keep them in sight;
- a unified / side-by-side switch in the page redraws every diff, and back, line for line;
- a "viewed" mark per file collapses it and survives a reload (the browser's storage);
- a filter that matches nothing says so (the text shown as text, never as HTML);
- a filter naming a file shows just that file's diff, even when a tool call of its turn names it.

Screenshots are written to ``$REWIND_REPORT_SHOTS`` when it is set (to look at them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ledger.git.repo import GitRepo
from ledger.review.show import open_review
from tests.browser.conftest import Cdp
from tests.browser.test_report_browser import ROWS, _long_session
from tests.cli.helpers import run_process
from tests.enginekit import Agent
from tests.integration.test_report_lines import visible


def _page(agent: Agent, repo: Path, tmp_path: Path, *extra: str) -> Path:
    page = tmp_path / "report.html"
    made = run_process(
        "report", agent.session_file, "-o", page, "--agent-dir", agent.agent_dir, *extra, cwd=repo
    )
    assert made.code == 0, made.err
    return page


def _shot(cdp: Cdp, name: str) -> None:
    where = os.environ.get("REWIND_REPORT_SHOTS")
    if where:
        cdp.screenshot(Path(where) / f"{name}.png")


def _settle(cdp: Cdp, ms: int = 300) -> None:
    cdp.evaluate(f"new Promise(r => setTimeout(r, {ms}))")


def _patches(repo: Path, agent: Agent) -> dict[str, list[str]]:
    review = open_review(GitRepo.discover(repo), agent.session_file)
    out: dict[str, list[str]] = {}
    for step in review.steps:
        diff = review.diff(step) if step.kind == "turn" else None
        for f in diff.files if diff else []:
            out.setdefault(f.path, []).append(f.patch)
    return out


# -- the gutter --------------------------------------------------------------------------------

LINES = 20_000


def _numbered(changed: dict[int, str]) -> str:
    return "".join(changed.get(i, f"line {i}") + "\n" for i in range(1, LINES + 1))


GUTTER = """(() => [...document.querySelectorAll('main table.diff')].map(t => {
  const rows = [...t.rows].filter(r => r.cells.length > 1);
  const nums = rows.flatMap(r => [...r.cells].filter(c => c.classList.contains('n')));
  return {cls: t.className, id: t.closest('details').id, cols: t.querySelectorAll('col').length,
    top: Math.max(0, ...nums.map(c => +c.textContent || 0)),
    heights: rows.map(r => r.getBoundingClientRect().height),
    overflow: nums.filter(c => c.scrollWidth > c.clientWidth).map(c => c.textContent)};
}))()"""


def _one_line_rows(tables: list[dict[str, Any]]) -> None:
    big = [t for t in tables if t["top"] >= 10_000]
    assert big, "no diff shows a line number past 9,999"
    line = min(h for t in tables for h in t["heights"])
    assert 14 < line < 20, line
    for t in tables:
        assert max(t["heights"]) < line + 1, (t["id"], t["cls"], max(t["heights"]), line)
        assert not t["overflow"], (t["id"], t["overflow"][:5])


def test_gutter_fits_five_digit_line_numbers_and_every_row_is_one_line_tall(
    chromium: str, repo: Path, tmp_path: Path
) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    agent.prompt("A 20,000-line file", lambda r: (r / "big.txt").write_text(_numbered({})))
    # A small change around line 10,000 (drawn by Python) and a long one near the end (over the
    # eager limit: drawn by the page's script when opened).
    near = {i: f"changed {i}" for i in (9_998, 9_999, 10_000, 10_001)}
    far = {i: f"rewritten {i}" for i in range(19_900, 19_990)}
    agent.prompt("Edit around line 10,000", lambda r: (r / "big.txt").write_text(_numbered(near)))
    agent.prompt(
        "Rewrite near the end", lambda r: (r / "big.txt").write_text(_numbered(far | near))
    )
    page = _page(agent, repo, tmp_path)
    cdp = Cdp(chromium, tmp_path / "profile")
    try:
        cdp.open(page.resolve().as_uri())
        cdp.evaluate("document.getElementById('open').click()")
        _settle(cdp, 600)
        tables = cdp.evaluate(GUTTER)
        assert len(tables) == 3 and 19_989 <= max(t["top"] for t in tables) < 20_000
        _one_line_rows(tables)
        edit = next(t["id"] for t in tables if 10_001 <= t["top"] < 10_010)
        cdp.evaluate(
            f"(() => {{ const m = document.querySelector('main');"
            f" const d = document.getElementById('{edit}');"
            f" m.scrollTop += d.getBoundingClientRect().top - m.getBoundingClientRect().top - 40; }})()"
        )
        _settle(cdp)
        _shot(cdp, "gutter-unified")
        cdp.evaluate("document.getElementById('split').click()")
        _settle(cdp)
        tables = cdp.evaluate(GUTTER)
        assert all(t["cols"] == 4 for t in tables), tables
        _one_line_rows(tables)
        _shot(cdp, "gutter-split")
        assert not cdp.problems(), cdp.problems()
    finally:
        cdp.close()


# -- the navigation pane follows the scroll ---------------------------------------------------

CURRENT = "[...document.querySelectorAll('nav a.cur')].map(a => a.getAttribute('href'))"


def _scroll_to(cdp: Cdp, element_id: str, below: int = 20) -> None:
    cdp.evaluate(
        f"(() => {{ const m = document.querySelector('main');"
        f" const d = document.getElementById({json.dumps(element_id)});"
        f" m.scrollTop += d.getBoundingClientRect().top - m.getBoundingClientRect().top + {below}; }})()"
    )
    _settle(cdp, 200)


def test_navigation_pane_marks_the_prompt_turn_and_file_in_view_as_you_scroll(
    chromium: str, repo: Path, tmp_path: Path
) -> None:
    agent = _long_session(repo, tmp_path / "agent")
    page = _page(agent, repo, tmp_path)
    cdp = Cdp(chromium, tmp_path / "profile", height=700)
    try:
        cdp.open(page.resolve().as_uri())
        _settle(cdp)
        first = cdp.evaluate(CURRENT)
        assert first and first[0].startswith("#e-"), first
        for ordinal in (40, 70, 12):
            where: dict[str, str] = cdp.evaluate(f"""(() => {{
              const d = document.querySelectorAll('main details.file:not(.lazy)')[{ordinal}];
              return {{file: d.id, turn: d.closest('div.turn').id,
                       prompt: d.closest('section.prompt').id}}; }})()""")
            _scroll_to(cdp, where["file"])
            current = cdp.evaluate(CURRENT)
            assert current == [
                "#" + where["prompt"],
                "#" + where["turn"],
                "#" + where["file"],
            ], (where, current)
            sight = cdp.evaluate("""(() => { const nav = document.querySelector('nav').getBoundingClientRect();
              return [...document.querySelectorAll('nav a.cur')].slice(-1).map(a => {
                const r = a.getBoundingClientRect(); return r.top >= nav.top && r.bottom <= nav.bottom; })[0]; })()""")
            assert sight, "the current file's entry is scrolled into the pane"
            assert (
                cdp.evaluate("document.querySelectorAll('nav [aria-current=location]').length") == 3
            )
            if ordinal == 70:
                _shot(cdp, "nav-follows")
        # Between two turns' headers (no file at the top): the turn is current, no file.
        turn = cdp.evaluate("document.querySelectorAll('main div.turn')[30].id")
        _scroll_to(cdp, turn, 2)
        current = cdp.evaluate(CURRENT)
        assert current[1:] == ["#" + turn], current
        assert not cdp.problems(), cdp.problems()
    finally:
        cdp.close()


# -- unified / side by side --------------------------------------------------------------------


def _pairs(patch: str) -> list[list[str]]:
    """Side by side rows as the page shows them: [old n, old text, new n, new text] for each
    body line (a run of deletions beside the run of additions after it); headers as one cell."""
    out: list[list[str]] = []
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []
    old = new = 0
    in_hunk = False

    def flush() -> None:
        for i in range(max(len(left), len(right))):
            a = list(left[i]) if i < len(left) else ["", ""]
            b = list(right[i]) if i < len(right) else ["", ""]
            out.append(a + b)
        left.clear()
        right.clear()

    for line in patch.split("\n")[:-1]:
        mark = line[:1]
        if line.startswith("@@"):
            flush()
            parts = line.split()
            old, new = int(parts[1][1:].split(",")[0]), int(parts[2][1:].split(",")[0])
            in_hunk = True
            out.append([visible(line)])
        elif in_hunk and mark == "-":
            left.append((str(old), visible(line)))
            old += 1
        elif in_hunk and mark == "+":
            right.append((str(new), visible(line)))
            new += 1
        elif in_hunk and mark == " ":
            flush()
            out.append([str(old), visible(line), str(new), visible(line)])
            old += 1
            new += 1
        else:
            flush()
            out.append([visible(line)])
    flush()
    return out


CELLS = """(id => [...document.getElementById(id).querySelector('table.diff').rows]
  .map(tr => [...tr.cells].map(c => c.textContent)))"""


def test_unified_and_side_by_side_switch_in_the_page_line_for_line(
    chromium: str, repo: Path, tmp_path: Path
) -> None:
    agent = _long_session(repo, tmp_path / "agent", prompts=12)
    patches = _patches(repo, agent)
    page = _page(agent, repo, tmp_path)
    cdp = Cdp(chromium, tmp_path / "profile")
    try:
        cdp.open(page.resolve().as_uri())
        ids = cdp.evaluate(
            "Object.fromEntries(['cr.txt', 'big.txt'].map(p => [p,"
            " [...document.querySelectorAll(`main details.file[data-p='${p}']`)].map(d => d.id)]))"
        )
        cr, big = (
            ids["cr.txt"][1],
            ids["big.txt"][0],
        )  # cr.txt's edit (drawn by Python); big.txt lazy
        assert cdp.evaluate("document.body.classList.contains('sbs')") is False
        cdp.evaluate("document.getElementById('split').click()")
        _settle(cdp)
        assert cdp.evaluate(f"{CELLS}('{cr}')") == _pairs(patches["cr.txt"][1])
        assert cdp.evaluate(
            "[document.getElementById('split').getAttribute('aria-pressed'),"
            " document.querySelectorAll('main table.diff col').length"
            " / document.querySelectorAll('main table.diff').length]"
        ) == ["true", 4]
        # A collapsed diff opened in this view is drawn side by side too.
        cdp.evaluate(f"document.querySelector('nav a[href=\"#{big}\"]').click()")
        _settle(cdp, 500)
        assert cdp.evaluate(f"{CELLS}('{big}')") == _pairs(patches["big.txt"][0])
        _scroll_to(cdp, cr, -60)
        _shot(cdp, "split")
        cdp.evaluate("document.getElementById('unified').click()")
        _settle(cdp)
        for fid, patch in ((cr, patches["cr.txt"][1]), (big, patches["big.txt"][0])):
            assert cdp.evaluate(f"{ROWS}('{fid}')") == [visible(x) for x in patch.split("\n")[:-1]]
        _shot(cdp, "unified")
        assert not cdp.problems(), cdp.problems()
    finally:
        cdp.close()

    # --side-by-side writes a page that opens side by side and switches back.
    page = _page(agent, repo, tmp_path, "--side-by-side")
    cdp = Cdp(chromium, tmp_path / "profile2")
    try:
        cdp.open(page.resolve().as_uri())
        assert cdp.evaluate(f"{CELLS}('{cr}')") == _pairs(patches["cr.txt"][1])
        cdp.evaluate("document.getElementById('unified').click()")
        assert cdp.evaluate(f"{ROWS}('{cr}')") == [
            visible(x) for x in patches["cr.txt"][1].split("\n")[:-1]
        ]
    finally:
        cdp.close()


# -- viewed marks ------------------------------------------------------------------------------

VIEWED = """(id => { const d = document.getElementById(id);
  return {open: d.open, checked: d.querySelector('.vw input').checked,
    nav: document.querySelector(`nav a[href="#${id}"]`).parentNode.classList.contains('seen'),
    count: document.getElementById('seen').textContent}; })"""


def _reload(cdp: Cdp) -> None:
    cdp.send("Page.reload", {"ignoreCache": True})
    cdp.wait_event("Page.loadEventFired", 60)
    _settle(cdp, 200)


def test_viewed_mark_collapses_a_file_and_survives_a_reload(
    chromium: str, repo: Path, tmp_path: Path
) -> None:
    agent = _long_session(repo, tmp_path / "agent", prompts=4)
    page = _page(agent, repo, tmp_path)
    cdp = Cdp(chromium, tmp_path / "profile")
    try:
        cdp.open(page.resolve().as_uri())
        files = cdp.evaluate("document.querySelectorAll('main details.file').length")
        fid = cdp.evaluate("document.querySelectorAll('main details.file[open]')[3].id")
        assert cdp.evaluate(f"{VIEWED}('{fid}')") == {
            "open": True,
            "checked": False,
            "nav": False,
            "count": f"0 / {files} viewed",
        }
        cdp.evaluate(f"document.querySelector('#{fid} .vw').click()")  # the label, as a user does
        _settle(cdp)
        marked = {"open": False, "checked": True, "nav": True, "count": f"1 / {files} viewed"}
        assert cdp.evaluate(f"{VIEWED}('{fid}')") == marked
        _shot(cdp, "viewed")
        _reload(cdp)
        assert cdp.evaluate(f"{VIEWED}('{fid}')") == marked
        assert cdp.evaluate("document.querySelectorAll('main details.file.viewed').length") == 1
        # Unmarked: open again, and still unmarked after another reload.
        cdp.evaluate(f"document.querySelector('#{fid} .vw').click()")
        _settle(cdp)
        _reload(cdp)
        assert cdp.evaluate(f"{VIEWED}('{fid}')") == {
            "open": True,
            "checked": False,
            "nav": False,
            "count": f"0 / {files} viewed",
        }
        assert not cdp.problems(), cdp.problems()
    finally:
        cdp.close()


# -- the filter --------------------------------------------------------------------------------

FILTER = """(async q => {
  const box = document.getElementById('q'); box.value = q;
  box.dispatchEvent(new Event('input')); await new Promise(r => setTimeout(r, 400));
  const shown = sel => [...document.querySelectorAll(sel)].filter(e => !e.closest('[hidden]'));
  const text = id => { const el = document.getElementById(id);
    return el && !el.hidden ? el.textContent : null; };
  return {files: shown('main details.file').map(d => d.getAttribute('data-p')),
    navFiles: shown('nav li.nf').map(li => li.firstChild.textContent),
    turns: shown('main div.turn').length, prompts: shown('main section.prompt').length,
    message: text('nomatch'), navMessage: text('none'),
    injected: document.querySelectorAll('main img, nav img').length};
})"""


def _tool_turn(agent: Agent, prompt: str, tools: list[tuple[str, str]], change: Any) -> None:
    """One prompt whose one turn ran ``tools`` (name, path) and made ``change``."""
    e = agent.engine
    e.before_agent_start(prompt)
    e.turn_start(0)
    agent.user(prompt)
    change(agent.repo)
    message = {
        "role": "assistant",
        "content": [
            {"type": "toolCall", "id": f"c{i}", "name": name, "arguments": {"path": path}}
            for i, (name, path) in enumerate(tools)
        ],
        "stopReason": "toolUse",
        "timestamp": 0,
    }
    agent.writer.append_entry({"type": "message", "message": message})
    e.turn_end(0, message=message)
    e.agent_end()


def _write(**files: str) -> Any:
    def change(r: Path) -> None:
        for name, text in files.items():
            (r / name.replace("_", ".", 1)).write_text(text)

    return change


def _filter_session(repo: Path, tmp_path: Path) -> Path:
    agent = Agent.start(repo, tmp_path / "agent")
    _tool_turn(
        agent,
        "Write the greeter and its helper",
        [("write", "hello.py"), ("write", "util.py")],
        _write(hello_py="print('hi')\n", util_py="X = 1\n", notes_md="# notes\n"),
    )
    _tool_turn(
        agent,
        "Tidy up",
        [("edit", "hello.py")],
        _write(hello_py="print('hello')\n", util_py="X = 2\n"),
    )
    agent.prompt("Unrelated", _write(other_txt="other\n"))
    return _page(agent, repo, tmp_path)


def test_filter_naming_a_file_shows_just_that_files_diffs_though_tool_calls_name_it(
    chromium: str, repo: Path, tmp_path: Path
) -> None:
    page = _filter_session(repo, tmp_path)
    cdp = Cdp(chromium, tmp_path / "profile")
    try:
        cdp.open(page.resolve().as_uri())
        one = cdp.evaluate(f"{FILTER}('hello.py')")
        assert one["files"] == ["hello.py", "hello.py"] == one["navFiles"], one
        assert one["turns"] == 2 and one["prompts"] == 2 and one["message"] is None
        _shot(cdp, "file-filter")
        # Words of a prompt (no file is named so): that prompt, all its files.
        words = cdp.evaluate(f"{FILTER}('greeter')")
        assert sorted(words["files"]) == ["hello.py", "notes.md", "util.py"], words
        # A tool's words that name no file: that turn with all its files.
        tool = cdp.evaluate(f"{FILTER}('edit ')")
        assert sorted(tool["files"]) == ["hello.py", "util.py"] and tool["turns"] == 1, tool
        assert len(cdp.evaluate(f"{FILTER}('')")["files"]) == 6
        assert not cdp.problems(), cdp.problems()
    finally:
        cdp.close()


def test_filter_matching_nothing_says_so_as_text(chromium: str, repo: Path, tmp_path: Path) -> None:
    page = _filter_session(repo, tmp_path)
    cdp = Cdp(chromium, tmp_path / "profile")
    try:
        cdp.open(page.resolve().as_uri())
        hostile = "<img src=x onerror=alert(1)>"
        none = cdp.evaluate(f"{FILTER}({json.dumps(hostile)})")
        assert none["files"] == [] and none["prompts"] == 0 and none["injected"] == 0
        assert none["message"] and hostile in none["message"], none
        assert none["navMessage"] == none["message"]
        _shot(cdp, "no-match")
        back = cdp.evaluate(f"{FILTER}('')")
        assert len(back["files"]) == 6 and back["message"] is None and back["navMessage"] is None
        assert not cdp.problems(), cdp.problems()
    finally:
        cdp.close()
