"""``rewind diff``, ``show`` and ``log`` print what git prints, with the user's settings.

Every comparison is against the real git, byte for byte, between the same two trees: the
patch of ``rewind diff --patch`` against ``git diff <now> <target>``, the names of its list
against ``git diff --name-status`` (``core.quotePath`` on and off), ``diff.orderFile``,
``diff.relative`` (from a subdirectory) and ``diff.colorMoved``; the pager a command runs against
the pager git itself runs for the same settings (a pty makes both think they write to a
terminal); ENTRY ``@`` after a prompt; SESSION ``@`` as the default of ``log``, ``report``
and ``tree``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.enginekit import Agent, fresh_index_tree
from tests.gitkit import ROOT, git

NAMES = [
    "café.txt",
    "tab\there.txt",
    "new\nline.txt",
    'quo"te.txt',
    "back\\slash.txt",
    "plain.txt",
    os.fsdecode(b"latin\xe9.txt"),  # not UTF-8
    "sub/inner.txt",
]


@pytest.fixture
def agent(repo: Path, tmp_path: Path) -> Agent:
    agent = Agent.start(repo, tmp_path / "agent")
    (repo / "sub").mkdir()

    def first(r: Path) -> None:
        for name in NAMES:
            (r / name).write_text("one\ntwo\nthree\n")

    def second(r: Path) -> None:
        for name in NAMES:
            (r / name).write_text("one\nTWO\nthree\n")

    agent.prompt("first", first)
    agent.prompt("second", second)
    return agent


def rewind(agent: Agent, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """A real ``rewind`` process (bytes out: names that are not UTF-8 stay as they are)."""
    return subprocess.run(
        [sys.executable, "-m", "ledger", *args, "--agent-dir", str(agent.agent_dir)],
        cwd=cwd or agent.repo,
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "REWIND_SERVED": "0"},
    )


def git_bytes(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True).stdout


def first_prompt(agent: Agent) -> str:
    return next(e.id for e in agent.session().branch() if e.role == "user")


def target_tree(agent: Agent, entry: str) -> str:
    import json

    out = rewind(agent, "diff", "@", entry, "--json")
    assert out.returncode == 0, out.stderr
    target = json.loads(out.stdout)["target"]
    return git(agent.repo, "rev-parse", f"{target}^{{tree}}").strip()


@pytest.mark.parametrize("quote_path", ["true", "false"])
def test_diff_patch_and_list_quote_names_as_git_diff_does(agent: Agent, quote_path: str) -> None:
    git(agent.repo, "config", "core.quotePath", quote_path)
    entry = first_prompt(agent)  # restoring it deletes every file
    now, target = fresh_index_tree(agent.repo), target_tree(agent, entry)

    patch = rewind(agent, "diff", "@", entry, "--patch")
    assert patch.returncode == 0, patch.stderr
    assert patch.stdout == git_bytes(agent.repo, "diff", "--no-renames", now, target)

    listed = rewind(agent, "diff", "@", entry)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.split(b"\n")[1:-1]
    ours = sorted(line.strip().replace(b" ", b"\t", 1) for line in lines)
    expected = git_bytes(agent.repo, "diff", "--no-renames", "--name-status", now, target)
    assert ours == sorted(expected.splitlines())


def test_diff_with_no_differences_prints_nothing_as_git_diff(agent: Agent) -> None:
    last_turn = [e.id for e in agent.session().branch() if e.role == "assistant"][-1]
    now, target = fresh_index_tree(agent.repo), target_tree(agent, last_turn)
    assert now == target
    result = rewind(agent, "diff", "@", last_turn, "--patch")
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"" == git_bytes(agent.repo, "diff", now, target)


def test_diff_order_file_and_relative_are_gits(agent: Agent, tmp_path: Path) -> None:
    entry = first_prompt(agent)
    order = agent.repo / "order.txt"  # relative: from the top of the work tree, as git reads it
    order.write_text("sub/*\nplain.txt\n*\n")
    now, target = fresh_index_tree(agent.repo), target_tree(agent, entry)
    git(agent.repo, "config", "diff.orderFile", "order.txt")
    ordered = rewind(agent, "diff", "@", entry, "--patch").stdout
    assert ordered == git_bytes(agent.repo, "diff", "--no-renames", now, target)
    assert ordered.startswith(b"diff --git a/sub/inner.txt")

    git(agent.repo, "config", "diff.relative", "true")
    sub = agent.repo / "sub"
    relative = rewind(agent, "diff", "@", entry, "--patch", cwd=sub).stdout
    assert relative == git_bytes(sub, "diff", "--no-renames", now, target)
    assert relative.startswith(b"diff --git a/inner.txt b/inner.txt") and b"plain" not in relative
    # The list is what a restore would change: all of the tree, whatever diff.relative says.
    listed = rewind(agent, "diff", "@", entry, cwd=sub).stdout
    assert b"  D plain.txt\n" in listed and b"  D sub/inner.txt\n" in listed


def test_show_and_log_follow_order_file_relative_and_color_moved(agent: Agent) -> None:
    import json

    second = [e.id for e in agent.session().branch() if e.role == "user"][-1]
    data = json.loads(rewind(agent, "show", "@", second, "--json").stdout)
    before, after = data["before"], data["after"]
    (agent.repo / "order.txt").write_text("sub/*\n*\n")
    git(agent.repo, "config", "diff.orderFile", "order.txt")
    git(agent.repo, "config", "diff.relative", "true")
    git(agent.repo, "config", "diff.colorMoved", "zebra")
    sub = agent.repo / "sub"
    for cwd in (agent.repo, sub):
        for option in ("--patch", "--name-status", "--stat"):
            out = rewind(agent, "show", "@", second, option, cwd=cwd).stdout
            expected = git_bytes(cwd, "diff", option, "--no-renames", before, after)
            assert out.endswith(b"\n" + expected + b"\n"), (cwd, option)
        logged = rewind(agent, "log", "--patch", cwd=cwd).stdout
        assert git_bytes(cwd, "diff", "--no-renames", before, after) in logged
    coloured = rewind(agent, "show", "@", second, "--color=always").stdout
    expected = git_bytes(agent.repo, "diff", "--color=always", "--no-renames", before, after)
    assert coloured.endswith(b"\n" + expected + b"\n")


def test_entry_at_is_the_latest_prompt_for_diff_restore_and_show(agent: Agent) -> None:
    import json

    assert agent.session().branch()[-1].role is None  # the leaf: one of rewind's records
    latest = [e.id for e in agent.session().branch() if e.role == "user"][-1]
    at = rewind(agent, "diff", "@", "@", "--json")
    assert at.returncode == 0, at.stderr
    named = rewind(agent, "diff", "@", latest, "--json")
    assert json.loads(at.stdout) == json.loads(named.stdout)
    assert json.loads(at.stdout)["entry"] == latest
    patch = rewind(agent, "diff", "@", "@", "--patch")
    assert (
        patch.returncode == 0
        and patch.stdout == rewind(agent, "diff", "@", latest, "--patch").stdout
    )
    plan = rewind(agent, "restore", "@", "@", "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["entry"] == latest
    shown = json.loads(rewind(agent, "show", "@", "@", "--json").stdout)
    assert shown["entryId"] == latest


def test_log_report_and_tree_default_to_the_newest_session(agent: Agent, tmp_path: Path) -> None:
    for args in (("log",), ("log", "--stat"), ("tree",)):
        default, explicit = rewind(agent, *args), rewind(agent, args[0], "@", *args[1:])
        assert default.returncode == 0, default.stderr
        assert default.stdout == explicit.stdout and default.stdout
    report = rewind(agent, "report", "-o", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "r.html").read_bytes().startswith(b"<!")
    helped = b" ".join(rewind(agent, "report", "--help").stdout.split())
    assert b"@ (newest; the default)" in helped


# --- the pager: the one git itself runs ----------------------------------------------------------


def _paged(argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    """Run ``argv`` with its stdout on a pty (a terminal: git and rewind page there)."""
    import pty

    leader, follower = pty.openpty()
    try:
        subprocess.run(
            argv, cwd=cwd, stdout=follower, stderr=subprocess.PIPE, timeout=60, env=env, check=True
        )
    finally:
        os.close(follower)
        os.close(leader)


@pytest.mark.parametrize(
    ("environment", "config", "pager"),
    [
        (
            {"GIT_PAGER": "git_pager", "PAGER": "pager"},
            {"core.pager": "core", "pager.show": "cmd"},
            "git_pager",
        ),
        ({"PAGER": "pager"}, {"core.pager": "core", "pager.show": "cmd"}, "cmd"),
        ({"PAGER": "pager"}, {"core.pager": "core", "pager.log": "cmd"}, "core"),
        ({"PAGER": "pager"}, {"core.pager": "core", "pager.show": "true"}, "core"),
        ({"PAGER": "pager"}, {}, "pager"),
        ({}, {}, "less"),
        ({"GIT_PAGER": "git_pager"}, {"pager.show": "false"}, ""),
        ({"GIT_PAGER": "", "PAGER": "pager"}, {"core.pager": "core"}, ""),
    ],
)
def test_show_runs_the_pager_git_show_runs(
    agent: Agent,
    tmp_path: Path,
    environment: dict[str, str],
    config: dict[str, str],
    pager: str,
) -> None:
    seen = tmp_path / "seen.txt"
    scripts = tmp_path / "pagers"
    scripts.mkdir()
    for name in ("git_pager", "pager", "core", "cmd", "less"):
        script = scripts / name
        script.write_text(f'#!/bin/sh\necho {name} >> "{seen}"\ncat > /dev/null\n')
        script.chmod(0o755)
    for key, value in config.items():
        git(agent.repo, "config", key, value)
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_PAGER", "PAGER")}
    env.update(environment, PATH=f"{scripts}{os.pathsep}{env['PATH']}", TERM="xterm")

    if pager != "less":  # git's own last resort is a build setting (Debian's git: `pager`)
        _paged(["git", "show", "HEAD"], agent.repo, env)
        by_git = seen.read_text() if seen.exists() else ""
        seen.unlink(missing_ok=True)
        assert by_git == (pager + "\n" if pager else "")  # the oracle says what the case means
    rewind_env = {**env, "PYTHONPATH": str(ROOT), "REWIND_SERVED": "0"}
    argv = [sys.executable, "-m", "ledger", "show", "--agent-dir", str(agent.agent_dir)]
    _paged(argv, agent.repo, rewind_env)
    by_rewind = seen.read_text() if seen.exists() else ""
    assert by_rewind == (pager + "\n" if pager else ""), (environment, config)
