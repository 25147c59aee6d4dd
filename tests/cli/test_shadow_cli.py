"""The CLI in a directory that is not a git repository (docs/shadow.md): ``--repo`` on it,
``rewind config`` listing the shadow settings, ``rewind doctor`` listing orphaned shadows,
``rewind sweep --remove-orphaned-shadows``, and the refusals."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ledger.session.agent_dir import resolve_agent_dir
from tests.cli.helpers import run_cli, run_process


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "notes.txt").write_text("notes\n")
    return d


def all_paths(directory: Path) -> set[str]:
    return {
        str(Path(root, name).relative_to(directory))
        for root, dirs, files in os.walk(directory)
        for name in dirs + files
    }


def test_snapshot_with_repo_option_on_a_plain_directory(
    plain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = run_cli(capsys, "--repo", plain, "snapshot", "--json", cwd=tmp_path)
    assert first.code == 0, first.err
    assert "shadow repository" in first.err, "said once, when the shadow is created"
    again = run_cli(capsys, "--repo", plain, "snapshot", "--json", cwd=tmp_path)
    assert again.code == 0 and "shadow repository" not in again.err
    assert json.loads(again.out)["reused"] is True
    assert all_paths(plain) == {"notes.txt"}


def test_read_only_commands_create_no_shadow(
    plain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (("sessions",), ("doctor",)):
        result = run_cli(capsys, "--repo", plain, *args, cwd=tmp_path)
        assert result.code == 1
        assert "has no rewind snapshots yet" in result.err and "hint: " in result.err
    assert not (resolve_agent_dir() / "rewind").exists()


def test_sessions_and_doctor_in_a_plain_directory(
    plain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(capsys, "snapshot", cwd=plain).code == 0
    sessions = run_cli(capsys, "sessions", cwd=plain)
    assert sessions.code == 0 and "no sessions for" in sessions.out
    doctor = run_cli(capsys, "doctor", "--json", cwd=plain)
    assert doctor.code == 0, doctor.err
    payload = json.loads(doctor.out)
    assert (
        payload["shadow"]
        and payload["store"]["snapshots"] == 1
        and payload["orphanedShadows"] == []
    )


def test_config_lists_the_shadow_settings(plain: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = resolve_agent_dir() / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"rewind": {"snapshot": {"shadowMaxFileBytes": 1000}}}))
    result = run_cli(capsys, "config", "--json", cwd=plain)
    assert result.code == 0, result.err
    rows = json.loads(result.out)["settings"]
    assert rows["rewind.snapshot.shadowMaxFileBytes"] == {"value": 1000, "source": str(settings)}
    assert rows["rewind.snapshot.shadowRepositories"]["value"] is True
    assert "node_modules/" in rows["rewind.snapshot.shadowExcludes"]["value"]
    text = run_cli(capsys, "config", cwd=plain).out
    assert "rewind.snapshot.shadowExcludes" in text


def test_doctor_lists_orphaned_shadows_and_sweep_removes_them(
    plain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(capsys, "snapshot", cwd=plain).code == 0
    moved = tmp_path / "moved-docs"
    plain.rename(moved)
    assert run_cli(capsys, "snapshot", cwd=moved).code == 0
    doctor = run_cli(capsys, "doctor", cwd=moved)
    assert doctor.code == 0, doctor.err
    assert "1 orphaned shadow repositories hold" in doctor.out
    assert "gone" in doctor.out and str(plain) in doctor.out
    listed = run_cli(capsys, "sweep", "--remove-orphaned-shadows", "--dry-run", "--json", cwd=moved)
    (would,) = json.loads(listed.out)["removed"]
    assert Path(would["home"]).is_dir() and would["directory"] == str(plain)
    removed = run_process("sweep", "--remove-orphaned-shadows", cwd=moved)
    assert removed.code == 0, removed.err
    assert "removed 1 shadow repositories" in removed.out
    assert not Path(would["home"]).exists()
    assert run_cli(capsys, "doctor", "--json", cwd=moved).code == 0
    assert all_paths(moved) == {"notes.txt"}


def test_home_directory_is_refused_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_process("snapshot", cwd=Path.home())
    assert result.code == 1
    assert "your home directory" in result.err and "hint: " in result.err
    assert "Traceback" not in result.err
