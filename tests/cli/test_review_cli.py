"""``rewind show``, ``rewind log --patch/--stat`` and ``rewind report`` from the command line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli, run_process
from tests.enginekit import Agent
from tests.gitkit import git


@pytest.fixture
def agent(repo: Path, tmp_path: Path) -> Agent:
    agent = Agent.start(repo, tmp_path / "agent")

    def first(r: Path) -> None:
        (r / "a.txt").write_text("one\ntwo\n")

    def second(r: Path) -> None:
        (r / "a.txt").write_text("one\nTWO\n")
        (r / "b.bin").write_bytes(b"\x00bin")

    agent.prompt("Create a.txt", first)
    agent.prompt("Change a.txt\nand add a binary", second, None)
    return agent


def _args(agent: Agent) -> tuple[str, ...]:
    return ("--agent-dir", str(agent.agent_dir))


def test_show_prints_the_header_and_gits_patch(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    user = agent.session().branch()[-4].id  # the second prompt's user entry
    result = run_cli(capsys, "show", "@", user[:6], *_args(agent), cwd=agent.repo)
    assert result.code == 0, result.err
    header, _, patch = result.out.partition("diff --git")
    assert f"prompt {user}" in header and "    Change a.txt\n    and add a binary" in header
    assert "→ turn 1 of Change a.txt" in header
    data = run_cli(capsys, "show", "@", user, "--json", *_args(agent), cwd=agent.repo).json_lines()[
        0
    ]
    expected = git(agent.repo, "diff", "--no-renames", data["before"], data["after"])
    assert "diff --git" + patch == expected + "\n"
    assert "\x1b[" not in result.out
    assert data["kind"] == "prompt" and {f["path"] for f in data["files"]} == {"a.txt", "b.bin"}


def test_show_stat_and_errors(agent: Agent, capsys: pytest.CaptureFixture[str]) -> None:
    user = agent.session().branch()[-4].id
    stat = run_cli(capsys, "show", "@", user, "--stat", *_args(agent), cwd=agent.repo)
    data = run_cli(capsys, "show", "@", user, "--json", *_args(agent), cwd=agent.repo).json_lines()[
        0
    ]
    expected = git(agent.repo, "diff", "--stat", "--no-renames", data["before"], data["after"])
    assert stat.code == 0 and stat.out.endswith("\n" + expected + "\n")
    assert " b.bin | Bin 0 -> 4 bytes" in stat.out
    missing = run_cli(capsys, "show", "@", "m0000001", *_args(agent), cwd=agent.repo)
    assert missing.code == 1 and missing.err.startswith("error: ") and "hint: " in missing.err
    usage = run_cli(capsys, "show", "@", user, "--stat", "--patch", *_args(agent), cwd=agent.repo)
    assert usage.code == 2 and "hint:" in usage.err


def test_log_patch_lists_every_step_and_json_has_one_object_per_step(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "log", "@", "--patch", *_args(agent), cwd=agent.repo)
    assert result.code == 0, result.err
    assert result.out.count("\nprompt ") + result.out.startswith("prompt ") == 2
    assert result.out.count("turn ") >= 3 and "diff --git a/a.txt b/a.txt" in result.out
    rows = run_cli(
        capsys, "log", "@", "--stat", "--json", *_args(agent), cwd=agent.repo
    ).json_lines()
    assert [r["kind"] for r in rows] == ["prompt", "turn", "prompt", "turn", "turn"]
    assert all("patch" not in r for r in rows)
    plain = run_cli(capsys, "log", "@", *_args(agent), cwd=agent.repo)
    assert "diff --git" not in plain.out and " binding " in plain.out


def test_log_patch_pages_through_the_pager_only_on_a_terminal(agent: Agent, tmp_path: Path) -> None:
    seen = tmp_path / "paged.txt"
    pager = tmp_path / "pager.sh"
    pager.write_text(f'#!/bin/sh\necho "LESS=$LESS" > {seen}\ncat >> {seen}\n')
    pager.chmod(0o755)
    os.environ["PAGER"] = str(pager)
    try:
        piped = run_process("log", "@", "--patch", *_args(agent), cwd=agent.repo)
        assert piped.code == 0 and "diff --git" in piped.out and not seen.exists()
        import pty
        import subprocess
        import sys

        from tests.gitkit import ROOT

        leader, follower = pty.openpty()
        proc = subprocess.run(
            [sys.executable, "-m", "ledger", "log", "@", "--patch", *_args(agent)],
            check=False,
            cwd=agent.repo,
            stdout=follower,
            stderr=subprocess.PIPE,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm"},
        )
        os.close(follower)
        os.close(leader)
        assert proc.returncode == 0, proc.stderr
        text = seen.read_text()
        assert text.startswith("LESS=FRX") and "\x1b[32m+" in text and "diff --git" in text
    finally:
        del os.environ["PAGER"]


def test_show_process_never_prints_a_traceback_on_a_bad_entry(agent: Agent) -> None:
    result = run_process("show", "@", "zzzz", *_args(agent), cwd=agent.repo)
    assert result.code == 1 and "Traceback" not in result.err and "no entry matches" in result.err


def test_show_defaults_to_the_latest_prompt_and_every_format_is_gits(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    data = run_cli(capsys, "show", "--json", *_args(agent), cwd=agent.repo).json_lines()[0]
    assert data["kind"] == "prompt" and data["text"].startswith("Change a.txt")
    for option in ("--numstat", "--name-status", "--stat"):
        for renames in ((), ("-M",)):
            out = run_cli(capsys, "show", option, *renames, *_args(agent), cwd=agent.repo).out
            flag = renames or ("--no-renames",)
            expected = git(agent.repo, "diff", option, *flag, data["before"], data["after"])
            assert out.endswith("\n" + expected + "\n"), (option, renames)


def test_colour_follows_the_option_then_gits_color_diff_setting(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    def show(*extra: str) -> str:
        return run_cli(capsys, "show", *extra, *_args(agent), cwd=agent.repo).out

    assert "\x1b[" not in show()  # piped, auto
    assert "\x1b[32m+" in show("--color=always") and "\x1b[" not in show("--color=never")
    git(agent.repo, "config", "color.diff", "always")
    assert "\x1b[32m+" in show() and "\x1b[" not in show("--no-color")
    git(agent.repo, "config", "color.diff", "false")
    assert "\x1b[" not in show() and "\x1b[1m" in show("--color")


def test_report_counts_read_as_english(
    agent: Agent, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from ledger.cli.review import counted

    assert (counted(1, "prompt"), counted(2, "turn"), counted(0, "byte")) == (
        "1 prompt",
        "2 turns",
        "0 bytes",
    )
    out = run_cli(
        capsys, "report", "@", "-o", tmp_path / "r.html", *_args(agent), cwd=agent.repo
    ).out
    assert ": 2 prompts, 3 turns, " in out
