"""``rewind snapshot``: output in text and JSON, settings warnings, errors without tracebacks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli, run_process
from tests.gitkit import git, source_repo


def capsys_agent_dir() -> str:
    """The agent dir the test-wide fixture points PI_CODING_AGENT_DIR at."""
    return os.environ["PI_CODING_AGENT_DIR"]


def test_snapshot_json_reports_commit_tree_reuse_skips_and_time(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "node_modules").mkdir()
    (repo / "node_modules" / "dep.js").write_text("dep\n")
    first = run_cli(capsys, "snapshot", "--json", cwd=repo)
    assert first.code == 0, first.err
    payload = json.loads(first.out)
    assert list(payload) == ["commit", "tree", "reused", "skipped", "ms"]
    assert payload["reused"] is False and payload["skipped"] == ["node_modules/"]
    git(repo, "cat-file", "-e", f"{payload['commit']}^{{commit}}")
    assert git(repo, "rev-parse", f"{payload['commit']}^{{tree}}").strip() == payload["tree"]
    second = json.loads(run_cli(capsys, "--json", "snapshot", cwd=repo).out)
    assert second["reused"] is True and second["commit"] == payload["commit"]


def test_snapshot_text_output_from_a_subdirectory(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "sub").mkdir()
    (repo / "big.bin").write_bytes(b"b" * 4096)
    agent = Path(capsys_agent_dir())
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "settings.json").write_text(
        json.dumps({"rewind": {"snapshot": {"maxUntrackedFileBytes": 1024}}})
    )
    result = run_cli(capsys, "snapshot", cwd=repo / "sub")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("snapshot ") and lines[1].startswith("tree     ")
    assert "skipped  big.bin (too-large, 4.0 KiB)" in lines
    assert lines[-1].startswith("took     ")


def test_snapshot_warns_about_invalid_settings_and_uses_defaults(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = Path(capsys_agent_dir())
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "settings.json").write_text(
        json.dumps(
            {"rewind": {"snapshot": {"maxUntrackedFileBytes": "lots", "protectedDirs": ["keep"]}}}
        )
    )
    (repo / "keep").mkdir()
    (repo / "keep" / "x").write_text("x\n")
    result = run_cli(capsys, "snapshot", "--json", cwd=repo)
    assert result.code == 0
    assert "warning: " in result.err and "rewind.snapshot.maxUntrackedFileBytes" in result.err
    assert "52428800" in result.err
    assert json.loads(result.out)["skipped"] == ["keep/"]


def test_snapshot_outside_a_repository_is_an_error_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Outside git a snapshot goes to a shadow repository (docs/shadow.md); turned off, or in a
    # refused directory (tests/cli/test_shadow_cli.py), it is an error.
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "settings.json").write_text(
        '{"rewind": {"snapshot": {"shadowRepositories": false}}}'
    )
    (tmp_path / "plain").mkdir()
    result = run_cli(capsys, "--agent-dir", agent_dir, "snapshot", cwd=tmp_path / "plain")
    assert result.code == 1
    assert result.err.startswith("error: ") and "Traceback" not in result.err


def test_snapshot_dirty_submodule_error_names_it(repo: Path, tmp_path: Path) -> None:
    src = source_repo(tmp_path, "src", "v1\n")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(src), "nested")
    (repo / "nested" / "file.txt").write_text("dirty\n")
    result = run_process("snapshot", cwd=repo)
    assert result.code == 1
    assert "error: snapshot failed: dirty submodule: nested" in result.err
    assert "hint: " in result.err
