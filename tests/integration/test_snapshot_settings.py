"""``rewind`` settings: defaults, per-field validation with warnings, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.settings import (
    DEFAULT_AUTO_WATCH_SECONDS,
    DEFAULT_MAX_UNTRACKED_FILE_BYTES,
    DEFAULT_PROTECTED_DIRS,
    DEFAULT_RETENTION,
    load_settings,
)


def _write(agent: Path, document: object) -> None:
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "settings.json").write_text(json.dumps(document))


def test_missing_settings_file_gives_defaults_without_warnings(tmp_path: Path) -> None:
    settings, warnings = load_settings(tmp_path / "nowhere")
    assert warnings == []
    assert (
        settings.snapshot.max_untracked_file_bytes == DEFAULT_MAX_UNTRACKED_FILE_BYTES == 50 * 2**20
    )
    assert settings.snapshot.protected_dirs == DEFAULT_PROTECTED_DIRS
    assert settings.silent_checkpoints is False and settings.retention == DEFAULT_RETENTION


def test_broken_json_gives_defaults_and_one_warning(tmp_path: Path) -> None:
    tmp_path.joinpath("settings.json").write_text("{not json")
    settings, warnings = load_settings(tmp_path)
    assert settings.snapshot.protected_dirs == DEFAULT_PROTECTED_DIRS
    assert len(warnings) == 1 and "not valid JSON" in warnings[0]


def test_valid_settings_are_read(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "theme": "dark",
            "rewind": {
                "silentCheckpoints": True,
                "snapshot": {"maxUntrackedFileBytes": 0, "protectedDirs": []},
                "retention": {"maxSnapshots": 10, "scanMode": "repo-sessions"},
            },
        },
    )
    settings, warnings = load_settings(tmp_path)
    assert warnings == []
    assert settings.silent_checkpoints is True
    assert settings.snapshot.max_untracked_file_bytes == 0
    assert settings.snapshot.protected_dirs == ()
    assert settings.retention is not None and settings.retention.max_snapshots == 10
    assert settings.retention.scan_mode == "repo-sessions"
    assert (
        settings.retention.max_age_days is None and settings.retention.pin_labeled_entries is False
    )


def test_an_invalid_field_warns_with_its_own_default_and_keeps_the_others(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "rewind": {
                "snapshot": {"maxUntrackedFileBytes": -5, "protectedDirs": ["vendor"]},
                "silentCheckpoints": "yes",
                "retention": {"maxSnapshots": "many", "maxAgeDays": 7, "scanMode": "everything"},
            }
        },
    )
    settings, warnings = load_settings(tmp_path)
    assert settings.snapshot.max_untracked_file_bytes == DEFAULT_MAX_UNTRACKED_FILE_BYTES
    assert settings.snapshot.protected_dirs == ("vendor",)
    assert settings.silent_checkpoints is False
    assert settings.retention is not None
    assert settings.retention.max_snapshots is None and settings.retention.max_age_days == 7
    assert settings.retention.scan_mode == "ancestor-only"
    joined = "\n".join(warnings)
    assert "rewind.snapshot.maxUntrackedFileBytes" in joined and "52428800" in joined
    assert "rewind.silentCheckpoints" in joined and "false" in joined
    assert "rewind.retention.maxSnapshots" in joined and "rewind.retention.scanMode" in joined
    assert "protectedDirs" not in joined
    assert len(warnings) == 4


def test_wrong_shapes_never_crash(tmp_path: Path) -> None:
    for document in (
        [1, 2],
        {"rewind": 3},
        {"rewind": {"snapshot": "x"}},
        {"rewind": {"snapshot": {"protectedDirs": ["ok", "a/b", 3]}}},
        {"rewind": {"snapshot": {"maxUntrackedFileBytes": True}}},
        {"rewind": {"snapshot": {"maxUntrackedFileBytes": 1e400}}},
    ):
        tmp_path.joinpath("settings.json").write_text(json.dumps(document))
        settings, warnings = load_settings(tmp_path)
        assert (
            settings.snapshot.max_untracked_file_bytes == DEFAULT_MAX_UNTRACKED_FILE_BYTES
            or settings.snapshot.protected_dirs == DEFAULT_PROTECTED_DIRS
        )
        assert warnings, document


def test_auto_watch_seconds_is_ten_minutes_by_default_and_must_be_a_whole_non_negative_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The suite sets REWIND_AUTO_WATCH=0 (tests/conftest.py); without it the default is on.
    assert load_settings(tmp_path)[0].snapshot.auto_watch_seconds == 0
    monkeypatch.delenv("REWIND_AUTO_WATCH")
    assert load_settings(tmp_path)[0].snapshot.auto_watch_seconds == DEFAULT_AUTO_WATCH_SECONDS
    _write(tmp_path, {"rewind": {"snapshot": {"autoWatchSeconds": 0}}})
    assert load_settings(tmp_path)[0].snapshot.auto_watch_seconds == 0, "off with one setting"
    monkeypatch.setenv("REWIND_AUTO_WATCH", "0")
    _write(tmp_path, {"rewind": {"snapshot": {"autoWatchSeconds": 600}}})
    assert load_settings(tmp_path) == (load_settings(tmp_path)[0], [])
    assert load_settings(tmp_path)[0].snapshot.auto_watch_seconds == 600
    for bad in (-1, 1.5, "600", True):
        _write(tmp_path, {"rewind": {"snapshot": {"autoWatchSeconds": bad}}})
        settings, warnings = load_settings(tmp_path)
        assert settings.snapshot.auto_watch_seconds == 0
        assert len(warnings) == 1 and "rewind.snapshot.autoWatchSeconds" in warnings[0]
