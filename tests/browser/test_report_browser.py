"""``rewind report`` opened in a real headless Chromium: it renders, every prompt is there, the
screenshot is not blank, and the console shows no error."""

from __future__ import annotations

import re
import struct
import subprocess
import zlib
from pathlib import Path

from tests.cli.helpers import run_process
from tests.enginekit import Agent

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


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
    assert "<script" not in text
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
