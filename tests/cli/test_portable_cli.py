"""``rewind export`` and ``rewind import`` from the command line."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import run_process
from tests.enginekit import Agent
from tests.gitkit import git


def test_export_then_import_prints_what_it_did_and_twice_is_a_no_op(
    repo: Path, tmp_path: Path
) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    agent.prompt("make a file", lambda r: (r / "new.txt").write_text("x\n"))
    archive = tmp_path / "s.rewind"
    out = run_process(
        "export", agent.session_file, "-o", archive, "--agent-dir", agent.agent_dir, cwd=repo
    )
    assert out.code == 0 and "exported session" in out.out, out.err
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    first = run_process("import", archive, "--agent-dir", tmp_path / "a2", cwd=clone)
    assert (
        first.code == 0
        and "imported session" in first.out
        and "appended to refs/pi-rewind/store" in first.out
    )
    second = run_process("import", archive, "--json", "--agent-dir", tmp_path / "a2", cwd=clone)
    assert second.code == 0 and second.json_lines()[0]["noop"] is True
    tree = run_process(
        "tree", second.json_lines()[0]["file"], "--agent-dir", tmp_path / "a2", cwd=clone
    )
    assert tree.code == 0 and "◆" in tree.out


def test_bad_archives_and_usage_give_errors_without_tracebacks(repo: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.rewind"
    junk.write_bytes(b"not an archive")
    bad = run_process("import", junk, "--agent-dir", tmp_path / "a2", cwd=repo)
    assert (
        bad.code == 1
        and bad.err.startswith("error: archive refused")
        and "hint: nothing was written" in bad.err
    )
    usage = run_process("export", "@", cwd=repo)
    assert usage.code == 2 and "hint:" in usage.err and "Traceback" not in usage.err
