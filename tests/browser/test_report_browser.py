"""``rewind report`` opened in a real headless Chromium: it renders, every prompt is there, the
screenshot is not blank, and the console shows no error; on a long session the navigation links
reach every diff, the filter narrows files and turns, a collapsed large diff is rendered when
opened, and every rendered row is exactly a line of the patch (lone CRs and all)."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import zlib
from pathlib import Path

from ledger.git.repo import GitRepo
from ledger.review.show import open_review
from tests.browser.conftest import FLAGS, Cdp
from tests.cli.helpers import run_process
from tests.enginekit import Agent
from tests.integration.test_report_lines import visible


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and unfiltered rows of an 8-bit RGB/RGBA PNG (no PIL needed)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = channels = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and color in (2, 6)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def _session(repo: Path, agent_dir: Path) -> tuple[Agent, list[str]]:
    agent = Agent.start(repo, agent_dir)
    prompts = ["Create hello.py <with> & escaping", "Make it greet by name", "Add a shell script"]
    agent.prompt(
        prompts[0], lambda r: (r / "hello.py").write_text("def hello():\n    print('hello')\n")
    )
    agent.prompt(
        prompts[1],
        lambda r: (r / "hello.py").write_text("def hello(name):\n    print(f'hello {name}')\n"),
        lambda r: (r / "blob.bin").write_bytes(b"\x00\x01"),
    )
    agent.prompt(prompts[2], lambda r: (r / "run.sh").write_text("#!/bin/sh\npython3 hello.py\n"))
    return agent, prompts


def test_report_renders_in_chromium_with_every_prompt_and_no_console_error(
    chromium: str, repo: Path, tmp_path: Path
) -> None:
    agent, prompts = _session(repo, tmp_path / "agent")
    page = tmp_path / "report.html"
    made = run_process(
        "report", agent.session_file, "-o", page, "--agent-dir", agent.agent_dir, cwd=repo
    )
    assert made.code == 0, made.err
    text = page.read_text()
    assert not re.search(r"(https?:)?//[a-z]", text.replace("<!DOCTYPE", "")), (
        "external reference in the page"
    )
    scripts = re.findall(r"<script[^>]*>", text)
    assert scripts.count("<script>") == 1, "one inline script, no src"
    assert all(s == "<script>" or 'type="application/octet-stream"' in s for s in scripts)
    assert " src=" not in text and "@import" not in text
    profile = tmp_path / "profile"
    url = page.resolve().as_uri()
    dom = subprocess.run(
        [
            chromium,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    for prompt in prompts:
        assert prompt.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in dom.stdout
    assert (
        dom.stdout.count('class="prompt"') == 3
        and "hello.py" in dom.stdout
        and "Binary file" in dom.stdout
    )
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console
    shot = tmp_path / "shot.png"
    run = subprocess.run(
        [
            chromium,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={shot}",
            "--window-size=1200,900",
            "--hide-scrollbars",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (1200, 900)
    colours = {row[i : i + 3] for row in rows[::10] for i in range(0, len(row), 30)}
    assert len(colours) > 8, "the screenshot looks blank"
    keep = Path("/tmp/rewind-report-screenshot.png")
    keep.write_bytes(shot.read_bytes())


BIG = "".join(f"line {i}\rhalf {i}\u2028ls\tend </script> & <b>\n" for i in range(150))


def _long_session(repo: Path, agent_dir: Path, prompts: int = 30) -> Agent:
    """``prompts`` prompts of two turns: a file edited and one added per turn; one turn adds 30
    files (collapsed), one adds a 150-line file with lone CRs (a large, collapsed diff), one a
    small file with lone CRs (rendered into the page)."""
    agent = Agent.start(repo, agent_dir)
    (repo / "src").mkdir()
    for p in range(prompts):

        def change(r: Path, p: int = p, t: int = 0) -> None:
            m = r / "src" / f"m{(p * 2 + t) % 7}.py"
            m.write_text((m.read_text() if m.exists() else "") + f"v_{p}_{t} = {p * t}\n")
            (r / "src" / f"n{p}_{t}.py").write_text(f"def f_{p}_{t}():\n    return {t}\n")
            if (p, t) == (10, 0):
                (r / "wide").mkdir()
                for k in range(30):
                    (r / "wide" / f"b{k}.txt").write_text(f"wide {k}\n")
            if (p, t) == (5, 1):
                (r / "big.txt").write_text(BIG, newline="")
            if (p, t) == (1, 0):
                (r / "cr.txt").write_bytes(b"header\nstep 1\rstep 2\rstep 3\nA\nB\nC\nD\nE\n")
            if (p, t) == (2, 0):
                (r / "cr.txt").write_bytes(
                    b"header\nstep 1\rstep 2\rstep 3\nA\nB\nC changed\nD\nE changed\n"
                )

        agent.prompt(f"Prompt {p}: work on part {p}", change, lambda r, p=p: change(r, p, 1))
    return agent


ROWS = """(id => [...document.getElementById(id).querySelectorAll('tr')]
  .map(tr => tr.lastElementChild.textContent))"""
SHOWN = """(sel => [...document.querySelectorAll(sel)].filter(e => !e.closest('[hidden]'))
  .map(e => e.getAttribute('data-p') || e.querySelector('a').textContent))"""


def test_long_report_links_filters_and_renders_collapsed_diffs_exactly(
    chromium: str, repo: Path, tmp_path: Path
) -> None:
    agent = _long_session(repo, tmp_path / "agent")
    page = tmp_path / "report.html"
    made = run_process(
        "report", agent.session_file, "-o", page, "--agent-dir", agent.agent_dir, cwd=repo
    )
    assert made.code == 0, made.err
    review = open_review(GitRepo.discover(repo), agent.session_file)
    patches = {}
    for step in review.steps:
        diff = review.diff(step) if step.kind == "turn" else None
        for f in diff.files if diff else []:
            patches.setdefault(f.path, []).append(f.patch)
    cdp = Cdp(chromium, tmp_path / "profile")
    try:
        cdp.open(page.resolve().as_uri())
        info = cdp.evaluate("""(() => {
          const links = [...document.querySelectorAll('nav a[href^="#"]')];
          const target = a => document.getElementById(decodeURIComponent(a.getAttribute('href').slice(1)));
          return {links: links.length, missing: links.filter(a => !target(a)).length,
            prompts: document.querySelectorAll('main section.prompt').length,
            turns: document.querySelectorAll('main div.turn').length,
            files: document.querySelectorAll('main details.file').length,
            navFiles: document.querySelectorAll('nav li.nf').length,
            lazy: document.querySelectorAll('main details.lazy').length};
        })()""")
        assert info["prompts"] == 30 and info["turns"] == 60 and info["missing"] == 0
        assert info["navFiles"] == info["files"] and info["links"] == 90 + info["files"]
        assert info["lazy"] >= 31, "the 30-file turn and the large diff start collapsed"

        # Rendered into the page by Python: the lone CRs stay inside their line.
        cr = cdp.evaluate(
            "[...document.querySelectorAll('main details.file[data-p=\"cr.txt\"]')].map(d => d.id)"
        )
        assert [cdp.evaluate(f"{ROWS}('{fid}')") for fid in cr] == [
            [visible(x) for x in p.split("\n")[:-1]] for p in patches["cr.txt"]
        ]

        # A nav link opens the collapsed large diff, which the script renders line for line.
        big = cdp.evaluate("document.querySelector('main details.file[data-p=\"big.txt\"]').id")
        assert cdp.evaluate(f"document.getElementById('{big}').querySelector('table') === null")
        cdp.evaluate(f"document.querySelector('nav a[href=\"#{big}\"]').click()")
        cdp.evaluate("new Promise(r => setTimeout(r, 400))")
        state = cdp.evaluate(f"""(() => {{ const d = document.getElementById('{big}');
          return {{open: d.open, hash: location.hash, top: d.getBoundingClientRect().top,
                   rows: {ROWS}('{big}')}}; }})()""")
        assert state["open"] and state["hash"] == f"#{big}"
        assert 0 <= state["top"] < 200, "scrolled to the diff"
        assert state["rows"] == [visible(x) for x in patches["big.txt"][0].split("\n")[:-1]]
        shot = tmp_path / "nav.png"
        cdp.screenshot(shot)
        Path("/tmp/rewind-report-nav.png").write_bytes(shot.read_bytes())
        width, height, rows = png_pixels(shot.read_bytes())
        assert len({row[i : i + 3] for row in rows[::10] for i in range(0, len(row), 30)}) > 8

        # The filter: a file name keeps that file (its turn and prompt) only; a prompt's words
        # keep that prompt with all its files; clearing it shows everything again.
        def filtered(q: str) -> dict[str, list[str]]:
            result: dict[str, list[str]] = cdp.evaluate(f"""(async () => {{
              const q = document.getElementById('q'); q.value = {json.dumps(q)};
              q.dispatchEvent(new Event('input')); await new Promise(r => setTimeout(r, 400));
              return {{main: {SHOWN}('main details.file'), nav: {SHOWN}('nav li.nf'),
                turns: [...document.querySelectorAll('main div.turn')].filter(t => !t.closest('[hidden]')).length}};
            }})()""")
            return result

        one = filtered("wide/b7.")
        assert one["main"] == one["nav"] == ["wide/b7.txt"] and one["turns"] == 1
        part = filtered("work on part 12")
        assert part["turns"] == 2 and sorted(part["main"]) == sorted(part["nav"])
        assert set(part["main"]) == {"src/m3.py", "src/m4.py", "src/n12_0.py", "src/n12_1.py"}
        assert len(filtered("")["main"]) == info["files"]

        # Expand all renders every collapsed diff; collapse all closes them.
        cdp.evaluate("document.getElementById('open').click()")
        cdp.evaluate("new Promise(r => setTimeout(r, 500))")
        assert cdp.evaluate(
            "[document.querySelectorAll('main details.file:not([open])').length,"
            " document.querySelectorAll('main details.lazy').length]"
        ) == [0, 0]
        cdp.evaluate("document.getElementById('close').click()")
        assert cdp.evaluate("document.querySelectorAll('main details.file[open]').length") == 0
        assert not cdp.problems(), cdp.problems()
    finally:
        cdp.close()
