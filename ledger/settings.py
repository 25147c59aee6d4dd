"""The ``rewind`` settings from the agent dir's ``settings.json`` and the project's override.

Why it exists: snapshot capture (protected paths, size limits) and retention read their knobs
from the same file Pi and the reference extension use (``<agent-dir>/settings.json``, key
``rewind``). A settings file is edited by hand, so a bad value must never stop a capture.

Invariants:
- :func:`load_settings` never raises. A missing, unreadable or non-JSON file, or a ``rewind``
  value that is not an object, gives the defaults (with a warning when the file exists but is
  broken).
- Each field is validated on its own: an invalid value produces one warning naming the key
  (``rewind.snapshot.maxUntrackedFileBytes``) and *that field's* default; the other fields keep
  their valid values.
- Unknown keys are ignored (newer versions may add some).
- ``<repo>/.pi/settings.json`` (its ``rewind`` key) overrides the global file key by key, inside
  the ``snapshot`` and ``retention`` sections too (beyond the reference, which reads only the
  global file); :class:`EffectiveSettings` remembers which file set each value.
- Defaults follow the reference (``silentCheckpoints`` false) plus our snapshot protections
  (docs/design.md#protected-paths), except retention: **absent** ``rewind.retention`` means
  :data:`DEFAULT_RETENTION` (ours; the reference keeps everything forever), ``false`` turns it
  off (``Settings.retention is None``), and an object keeps the reference's meaning exactly
  (missing keys = unlimited, ``ancestor-only``, no label pins), so a file shared with
  pi-rewind-hook means the same to both. docs/design.md#default-retention
- Plain frozen dataclasses, not pydantic models: every capture reads settings, and importing
  pydantic and building models cost more than the capture itself when nothing changed
  (docs/capture.md#start-up). Validation is the small table below, one rule per field.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, cast

from ledger.plain import Plain
from ledger.safe_read import read_regular_file

MIB = 1024 * 1024
GIB = 1024 * MIB
DEFAULT_MAX_UNTRACKED_FILE_BYTES = 50 * MIB
# A first capture (no private index yet) adding more untracked files or bytes than this is refused
# before anything is written (docs/design.md#first-capture-limits): a home-like directory, a data
# folder, an unignored dependency tree would otherwise fill the disk with objects.
DEFAULT_FIRST_CAPTURE_MAX_FILES = 200_000
DEFAULT_FIRST_CAPTURE_MAX_BYTES = 2 * GIB
DEFAULT_AUTO_WATCH_SECONDS = 600
"""Fast by default (docs/capture.md#shared-watcher): the first bridge or snapshot of a repository
starts its watcher, which ends after ten idle minutes (as git's fsmonitor daemon and Watchman
outlive their command). ``autoWatchSeconds: 0`` turns it off."""
AUTO_WATCH_ENV = "REWIND_AUTO_WATCH"
"""Replaces the built-in default of ``autoWatchSeconds`` (a settings file still wins): for test
suites and scripts that must not leave a watcher behind (``REWIND_AUTO_WATCH=0``)."""


def _auto_watch_default() -> int:
    value = os.environ.get(AUTO_WATCH_ENV, "")
    return int(value) if value.isdigit() else DEFAULT_AUTO_WATCH_SECONDS


DEFAULT_PROTECTED_DIRS: tuple[str, ...] = (
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".tox",
)

# Shadow repositories (docs/shadow.md#default-excludes): no .gitignore says what matters, so
# the protected directories plus common dependency, build and cache directories are left out.
DEFAULT_SHADOW_EXCLUDES: tuple[str, ...] = (
    *(f"{name}/" for name in DEFAULT_PROTECTED_DIRS),
    ".cache/",
    ".git/",
    ".DS_Store",
)
DEFAULT_SHADOW_MAX_FILE_BYTES = 10 * MIB

ScanMode = Literal["ancestor-only", "repo-sessions"]
SCAN_MODES: tuple[ScanMode, ...] = ("ancestor-only", "repo-sessions")


def _key(alias: str) -> dict[str, str]:
    return {"alias": alias}


@dataclass(frozen=True)
class SnapshotSettings:
    max_untracked_file_bytes: int = field(
        default=DEFAULT_MAX_UNTRACKED_FILE_BYTES, metadata=_key("maxUntrackedFileBytes")
    )
    """Untracked files larger than this are not captured; 0 disables the limit."""
    protected_dirs: tuple[str, ...] = field(
        default=DEFAULT_PROTECTED_DIRS, metadata=_key("protectedDirs")
    )
    """Untracked, non-ignored directories with one of these names are not captured."""
    shadow_repositories: bool = field(default=True, metadata=_key("shadowRepositories"))
    """Outside any git repository, keep snapshots in a shadow repository (docs/shadow.md)."""
    shadow_excludes: tuple[str, ...] = field(
        default=DEFAULT_SHADOW_EXCLUDES, metadata=_key("shadowExcludes")
    )
    """gitignore patterns a shadow repository's capture leaves out (its ``info/exclude``)."""
    shadow_max_file_bytes: int = field(
        default=DEFAULT_SHADOW_MAX_FILE_BYTES, metadata=_key("shadowMaxFileBytes")
    )
    """In a shadow repository, files larger than this are not captured; 0 disables the limit."""
    first_capture_max_files: int = field(
        default=DEFAULT_FIRST_CAPTURE_MAX_FILES, metadata=_key("firstCaptureMaxFiles")
    )
    """A first capture (no private index yet) that would add more untracked files than this is
    refused before writing anything; files the user's index tracks never count; 0 = no limit."""
    first_capture_max_bytes: int = field(
        default=DEFAULT_FIRST_CAPTURE_MAX_BYTES, metadata=_key("firstCaptureMaxBytes")
    )
    """The same refusal by the total size of those untracked files; 0 = no limit."""
    auto_watch_seconds: int = field(
        default_factory=_auto_watch_default, metadata=_key("autoWatchSeconds")
    )
    """After ``rewind snapshot`` captured by itself (no running ``rewind serve`` answered), and
    when Pi's bridge starts with no watcher serving the repository, start ``rewind serve --watch
    --idle-exit N`` in the background so the next snapshots and the bridges' captures are served
    from its change feed (docs/capture.md#served-snapshots, #shared-watcher); default
    :data:`DEFAULT_AUTO_WATCH_SECONDS` (or ``$REWIND_AUTO_WATCH``); 0 never starts one."""


@dataclass(frozen=True)
class RetentionSettings:
    """Retention is on: ``rewind.retention`` is an object (these field defaults, the
    reference's), or absent (:data:`DEFAULT_RETENTION`)."""

    max_snapshots: int | None = field(default=None, metadata=_key("maxSnapshots"))
    """None = unlimited."""
    max_age_days: float | None = field(default=None, metadata=_key("maxAgeDays"))
    """None = unlimited."""
    pin_labeled_entries: bool = field(default=False, metadata=_key("pinLabeledEntries"))
    scan_mode: ScanMode = field(default="ancestor-only", metadata=_key("scanMode"))
    startup_budget_ms: float | None = field(default=None, metadata=_key("startupBudgetMs"))
    """None = no budget (startup sweeps only)."""
    implicit: bool = field(default=False, metadata={})
    """Not a key: True for :data:`DEFAULT_RETENTION` (``rewind.retention`` absent). Such a sweep
    also keeps a snapshot no session names while its commit is younger than ``maxAgeDays`` (not
    one day): a manual ``rewind snapshot`` or a session kept under another agent dir must not
    lose its points to a policy nobody chose."""


DEFAULT_MAX_AGE_DAYS = 30.0
DEFAULT_RETENTION = RetentionSettings(
    max_age_days=DEFAULT_MAX_AGE_DAYS,
    pin_labeled_entries=True,
    # Every session of the repository is read: with ``ancestor-only`` a new session would drop
    # the points of an unrelated older one after a day (it names none of them).
    scan_mode="repo-sessions",
    implicit=True,
)
"""Retention when ``rewind.retention`` is absent: keep what sessions referenced in the last 30
days, labeled entries, each ledger's latest current/undo, open restore journals' snapshots and
anything committed in the last 30 days that no session names yet; drop the rest."""


@dataclass(frozen=True)
class Settings:
    silent_checkpoints: bool = field(default=False, metadata=_key("silentCheckpoints"))
    snapshot: SnapshotSettings = field(default_factory=SnapshotSettings)
    retention: RetentionSettings | None = DEFAULT_RETENTION
    """None: ``rewind.retention`` is ``false`` (off)."""


def load_settings(
    agent_dir: Path | str, repo_root: Path | str | None = None
) -> tuple[Settings, list[str]]:
    """``(settings, warnings)`` from ``<agent_dir>/settings.json``, overridden field by field by
    ``<repo_root>/.pi/settings.json`` when a repository is given; never raises."""
    effective = resolve_settings(agent_dir, repo_root)
    return effective.settings, effective.warnings


class EffectiveSettings(Plain):
    """The settings in force, and where each value came from (``rewind config``)."""

    __slots__ = ("files", "settings", "sources", "warnings")
    settings: Settings
    warnings: list[str]
    files: list[Path]
    sources: dict[str, str]
    """``rewind.retention.maxSnapshots`` → the file that set it; missing keys are defaults."""

    def __init__(
        self, settings: Settings, warnings: list[str], files: list[Path], sources: dict[str, str]
    ) -> None:
        self.settings = settings
        self.warnings = warnings
        self.files = files
        self.sources = sources

    def rows(self) -> list[tuple[str, Any, str]]:
        """``(key, effective value, source)`` for every setting, in a stable order."""
        s = self.settings
        values: list[tuple[str, Any]] = [
            ("rewind.silentCheckpoints", s.silent_checkpoints),
            ("rewind.snapshot.maxUntrackedFileBytes", s.snapshot.max_untracked_file_bytes),
            ("rewind.snapshot.protectedDirs", list(s.snapshot.protected_dirs)),
            ("rewind.snapshot.shadowRepositories", s.snapshot.shadow_repositories),
            ("rewind.snapshot.shadowExcludes", list(s.snapshot.shadow_excludes)),
            ("rewind.snapshot.shadowMaxFileBytes", s.snapshot.shadow_max_file_bytes),
            ("rewind.snapshot.firstCaptureMaxFiles", s.snapshot.first_capture_max_files),
            ("rewind.snapshot.firstCaptureMaxBytes", s.snapshot.first_capture_max_bytes),
            ("rewind.snapshot.autoWatchSeconds", s.snapshot.auto_watch_seconds),
            ("rewind.retention", s.retention is not None),
        ]
        retention = s.retention or RetentionSettings()
        values += [
            ("rewind.retention.maxSnapshots", retention.max_snapshots),
            ("rewind.retention.maxAgeDays", retention.max_age_days),
            ("rewind.retention.pinLabeledEntries", retention.pin_labeled_entries),
            ("rewind.retention.scanMode", retention.scan_mode),
            ("rewind.retention.startupBudgetMs", retention.startup_budget_ms),
        ]
        rows = []
        for key, value in values:
            source = self.sources.get(key, "default")
            if source != "default" and any(w.startswith(f"{key}:") for w in self.warnings):
                source = f"default (invalid value in {source})"
            rows.append((key, value, source))
        return rows


MAX_SETTINGS_BYTES = 1 << 20
"""A settings file larger than this is ignored (with a warning), never read whole."""

# A repository's own settings (a cloned project's .pi/settings.json) may not make sweeps drop
# rewind points below these; the user's own settings file or a command-line flag may.
# docs/design.md#settings-floor
PROJECT_FLOOR_MAX_SNAPSHOTS = 20
PROJECT_FLOOR_MAX_AGE_DAYS = 7.0


def _read_layer(path: Path, warnings: list[str]) -> Any:
    try:
        raw = read_regular_file(path, MAX_SETTINGS_BYTES)
    except OSError as exc:
        warnings.append(f"{path}: cannot read settings ({exc.strerror or exc}); ignoring it")
        return None
    if raw is None:
        return None
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        warnings.append(f"{path}: not valid JSON ({exc}); ignoring it")
        return None
    if not isinstance(document, dict):
        warnings.append(f"{path}: top level is not an object; ignoring it")
        return None
    value = document.get("rewind")
    if value is not None and not isinstance(value, dict):
        warnings.append(f"{path}: rewind is not an object; ignoring it")
        return None
    return value


def resolve_settings(
    agent_dir: Path | str, repo_root: Path | str | None = None
) -> EffectiveSettings:
    """Global settings, then the project's, merged key by key (sections ``snapshot`` and
    ``retention`` merged inside too); validated once, field by field; never raises."""
    warnings: list[str] = []
    files = [Path(agent_dir) / "settings.json"]
    if repo_root is not None:
        files.append(Path(repo_root) / ".pi" / "settings.json")
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for path in files:
        layer = _read_layer(path, warnings)
        if not layer:
            continue
        for key, value in layer.items():
            if key in ("snapshot", "retention") and isinstance(value, dict):
                earlier = merged.get(key)
                base: dict[str, Any] = earlier if isinstance(earlier, dict) else {}
                merged[key] = {**base, **value}
                sources[f"rewind.{key}"] = str(path)
                for inner in value:
                    sources[f"rewind.{key}.{inner}"] = str(path)
            else:
                merged[key] = value
                sources[f"rewind.{key}"] = str(path)
    settings = settings_from_mapping(merged or None, warnings, source="rewind")
    if len(files) > 1:
        settings = _apply_project_floor(settings, str(files[1]), files[0], sources, warnings)
    return EffectiveSettings(settings, warnings, files, sources)


def _apply_project_floor(
    settings: Settings, project: str, user_file: Path, sources: dict[str, str], warnings: list[str]
) -> Settings:
    """Raise retention limits that only the project file set below the floor (see the constants)."""
    retention = settings.retention
    if retention is None:
        return settings
    update: dict[str, Any] = {}
    for key, name, floor in (
        ("maxSnapshots", "max_snapshots", PROJECT_FLOOR_MAX_SNAPSHOTS),
        ("maxAgeDays", "max_age_days", PROJECT_FLOOR_MAX_AGE_DAYS),
    ):
        value = getattr(retention, name)
        if (
            sources.get(f"rewind.retention.{key}") == project
            and value is not None
            and value < floor
        ):
            update[name] = floor
            warnings.append(
                f"rewind.retention.{key}: {value:g} in {project} is below what a repository's own "
                f"settings may set ({floor:g}); using {floor:g} (set it in {user_file} or pass "
                f"--{'max-snapshots' if key == 'maxSnapshots' else 'max-age-days'} to go lower)"
            )
    if not update:
        return settings
    return replace(settings, retention=replace(retention, **update))


def settings_from_mapping(value: Any, warnings: list[str], *, source: str = "settings") -> Settings:
    """Validate a ``rewind`` value field by field (see the module invariants)."""
    if value is None:
        return Settings()
    if not isinstance(value, dict):
        warnings.append(f"{source}: rewind is not an object; using defaults")
        return Settings()
    fields: dict[str, Any] = {}
    if "silentCheckpoints" in value:
        fields["silent_checkpoints"] = _field(
            Settings, "silent_checkpoints", value["silentCheckpoints"], "rewind", warnings
        )
    snapshot = value.get("snapshot")
    if snapshot is not None:
        fields["snapshot"] = _section(SnapshotSettings, snapshot, "rewind.snapshot", warnings)
    retention = value.get("retention")
    if retention is False:
        fields["retention"] = None
    elif isinstance(retention, dict):
        fields["retention"] = _section(RetentionSettings, retention, "rewind.retention", warnings)
    elif retention is not None:
        warnings.append(
            f"rewind.retention: invalid value {retention!r} (an object, or false for none); "
            "using the default retention"
        )
    return Settings(**fields)


_Section = type[SnapshotSettings] | type[RetentionSettings]


def _section(model: _Section, data: Any, prefix: str, warnings: list[str]) -> Any:
    if not isinstance(data, dict):
        warnings.append(f"{prefix}: expected an object; using its defaults")
        return model()
    values: dict[str, Any] = {}
    for info in fields(model):
        key = info.metadata.get("alias")
        if key is not None and key in data:
            values[info.name] = _field(model, info.name, data[key], prefix, warnings)
    return model(**values)


def _field(
    model: _Section | type[Settings], name: str, value: Any, prefix: str, warnings: list[str]
) -> Any:
    info = next(f for f in fields(model) if f.name == name)
    key = f"{prefix}.{info.metadata['alias']}"
    default = info.default_factory() if callable(info.default_factory) else info.default
    checked = _RULES[name](value)
    if checked is _INVALID:
        warnings.append(f"{key}: invalid value {value!r}; using the default {_show(default)}")
        return default
    return checked


_INVALID = object()


# One rule per field: the value as JSON gave it → the setting, or _INVALID. Strict at the JSON
# level: "5" is not a number, 1 is not a boolean, a string is not a list of names.
def _boolean(value: Any) -> Any:
    return value if isinstance(value, bool) else _INVALID


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _byte_count(value: Any) -> Any:
    number = _number(value)
    return int(number) if number is not None and number == int(number) else _INVALID


def _optional_count(value: Any) -> Any:
    return None if value is None else _byte_count(value)


def _optional_amount(value: Any) -> Any:
    if value is None:
        return None
    number = _number(value)
    return _INVALID if number is None else float(number)


def _scan_mode(value: Any) -> Any:
    return cast(ScanMode, value) if value in SCAN_MODES else _INVALID


def _patterns(value: Any) -> Any:
    if not isinstance(value, list) or not all(_valid_pattern(v) for v in value):
        return _INVALID
    return tuple(dict.fromkeys(value))


def _dir_names(value: Any) -> Any:
    if not isinstance(value, list) or not all(_valid_dir_name(v) for v in value):
        return _INVALID
    return tuple(dict.fromkeys(value))


_RULES: dict[str, Callable[[Any], Any]] = {
    "silent_checkpoints": _boolean,
    "max_untracked_file_bytes": _byte_count,
    "protected_dirs": _dir_names,
    "max_snapshots": _optional_count,
    "max_age_days": _optional_amount,
    "pin_labeled_entries": _boolean,
    "scan_mode": _scan_mode,
    "startup_budget_ms": _optional_amount,
    "shadow_repositories": _boolean,
    "shadow_excludes": _patterns,
    "shadow_max_file_bytes": _byte_count,
    "first_capture_max_files": _byte_count,  # a whole, non-negative count; 0 = no limit
    "first_capture_max_bytes": _byte_count,
    "auto_watch_seconds": _byte_count,  # a whole, non-negative number of seconds
}


def _valid_dir_name(value: Any) -> bool:
    return (
        isinstance(value, str)
        and value not in {"", ".", ".."}
        and "/" not in value
        and "\0" not in value
    )


def _valid_pattern(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != "" and not (set(value) & {"\n", "\r", "\0"})


def _show(default: Any) -> str:
    if isinstance(default, tuple):
        return json.dumps(list(default))
    return json.dumps(default)


__all__ = [
    "AUTO_WATCH_ENV",
    "DEFAULT_AUTO_WATCH_SECONDS",
    "DEFAULT_FIRST_CAPTURE_MAX_BYTES",
    "DEFAULT_FIRST_CAPTURE_MAX_FILES",
    "DEFAULT_MAX_UNTRACKED_FILE_BYTES",
    "DEFAULT_PROTECTED_DIRS",
    "DEFAULT_RETENTION",
    "DEFAULT_SHADOW_EXCLUDES",
    "DEFAULT_SHADOW_MAX_FILE_BYTES",
    "EffectiveSettings",
    "RetentionSettings",
    "Settings",
    "SnapshotSettings",
    "load_settings",
    "resolve_settings",
    "settings_from_mapping",
]
