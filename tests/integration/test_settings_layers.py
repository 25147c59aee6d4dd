"""Global and project settings: field-by-field override, validation with named keys, provenance."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.settings import DEFAULT_RETENTION, Settings, load_settings, resolve_settings


def _write(path: Path, document: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_the_project_overrides_the_global_settings_field_by_field(tmp_path: Path) -> None:
    agent, project = tmp_path / "agent", tmp_path / "project"
    _write(
        agent / "settings.json",
        {
            "rewind": {
                "silentCheckpoints": True,
                "retention": {"maxSnapshots": 100, "maxAgeDays": 30},
            }
        },
    )
    _write(project / ".pi" / "settings.json", {"rewind": {"retention": {"maxSnapshots": 50}}})
    settings, warnings = load_settings(agent, project)
    assert warnings == []
    assert settings.silent_checkpoints is True
    assert settings.retention is not None
    assert (settings.retention.max_snapshots, settings.retention.max_age_days) == (50, 30)


def test_a_repository_cannot_set_retention_below_the_floor_but_the_user_can(tmp_path: Path) -> None:
    agent, project = tmp_path / "agent", tmp_path / "project"
    _write(
        project / ".pi" / "settings.json",
        {"rewind": {"retention": {"maxSnapshots": 0, "maxAgeDays": 0}}},
    )
    settings, warnings = load_settings(agent, project)
    assert settings.retention is not None
    assert (settings.retention.max_snapshots, settings.retention.max_age_days) == (20, 7)
    assert len(warnings) == 2 and all(
        "below what a repository's own settings may set" in w for w in warnings
    )

    _write(agent / "settings.json", {"rewind": {"retention": {"maxSnapshots": 0, "maxAgeDays": 0}}})
    _write(
        project / ".pi" / "settings.json", {"rewind": {"retention": {"scanMode": "ancestor-only"}}}
    )
    settings, warnings = load_settings(agent, project)
    assert settings.retention is not None
    assert (settings.retention.max_snapshots, settings.retention.max_age_days, warnings) == (
        0,
        0,
        [],
    )


def test_the_project_can_switch_retention_off(tmp_path: Path) -> None:
    agent, project = tmp_path / "agent", tmp_path / "project"
    _write(agent / "settings.json", {"rewind": {"retention": {"maxSnapshots": 100}}})
    _write(project / ".pi" / "settings.json", {"rewind": {"retention": False}})
    assert load_settings(agent, project)[0].retention is None


def test_an_invalid_project_value_names_the_key_and_falls_back(tmp_path: Path) -> None:
    agent, project = tmp_path / "agent", tmp_path / "project"
    _write(agent / "settings.json", {"rewind": {"retention": {"scanMode": "repo-sessions"}}})
    _write(
        project / ".pi" / "settings.json",
        {"rewind": {"retention": {"scanMode": "everything", "maxAgeDays": -1}}},
    )
    settings, warnings = load_settings(agent, project)
    assert settings.retention is not None and settings.retention.scan_mode == "ancestor-only"
    assert any(
        w.startswith("rewind.retention.scanMode: invalid value 'everything'") for w in warnings
    )
    assert any(w.startswith("rewind.retention.maxAgeDays:") for w in warnings)


def test_a_broken_project_file_is_ignored_with_a_warning(tmp_path: Path) -> None:
    agent, project = tmp_path / "agent", tmp_path / "project"
    _write(agent / "settings.json", {"rewind": {"silentCheckpoints": True}})
    _write(project / ".pi" / "settings.json", '{"rewind": ')
    settings, warnings = load_settings(agent, project)
    assert settings.silent_checkpoints is True
    assert len(warnings) == 1 and "not valid JSON" in warnings[0]


def test_a_rewind_value_that_is_not_an_object_is_ignored(tmp_path: Path) -> None:
    _write(tmp_path / "settings.json", {"rewind": ["no"]})
    settings, warnings = load_settings(tmp_path)
    assert settings == Settings() and "rewind is not an object" in warnings[0]
    assert settings.retention == DEFAULT_RETENTION, "the defaults: the default retention"


def test_provenance_names_the_file_each_value_came_from(tmp_path: Path) -> None:
    agent, project = tmp_path / "agent", tmp_path / "project"
    global_file = _write(
        agent / "settings.json",
        {"rewind": {"retention": {"maxSnapshots": 100, "maxAgeDays": "old"}}},
    )
    project_file = _write(
        project / ".pi" / "settings.json", {"rewind": {"retention": {"pinLabeledEntries": True}}}
    )
    rows = {key: (value, source) for key, value, source in resolve_settings(agent, project).rows()}
    assert rows["rewind.retention.maxSnapshots"] == (100, str(global_file))
    assert rows["rewind.retention.pinLabeledEntries"] == (True, str(project_file))
    assert rows["rewind.retention.maxAgeDays"] == (
        None,
        f"default (invalid value in {global_file})",
    )
    assert rows["rewind.silentCheckpoints"] == (False, "default")
