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
- Plain frozen values (:mod:`ledger.plain`), not pydantic models nor dataclasses: every capture
  reads settings, and importing pydantic and building models cost more than the capture itself
  when nothing changed (docs/capture.md#start-up). Validation is the small table below, one key
  and one rule per field.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from ledger.plain import FrozenPlain, Plain
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


class SnapshotSettings(FrozenPlain):
    __slots__ = (
        "auto_watch_seconds",
        "first_capture_max_bytes",
        "first_capture_max_files",
        "max_untracked_file_bytes",
        "protected_dirs",
        "shadow_excludes",
        "shadow_max_file_bytes",
        "shadow_repositories",
    )
    max_untracked_file_bytes: int
    """Untracked files larger than this are not captured; 0 disables the limit."""
    protected_dirs: tuple[str, ...]
    """Untracked, non-ignored directories with one of these names are not captured."""
    shadow_repositories: bool
    """Outside any git repository, keep snapshots in a shadow repository (docs/shadow.md)."""
    shadow_excludes: tuple[str, ...]
    """gitignore patterns a shadow repository's capture leaves out (its ``info/exclude``)."""
    shadow_max_file_bytes: int
    """In a shadow repository, files larger than this are not captured; 0 disables the limit."""
    first_capture_max_files: int
    """A first capture (no private index yet) that would add more untracked files than this is
    refused before writing anything; files the user's index tracks never count; 0 = no limit."""
    first_capture_max_bytes: int
    """The same refusal by the total size of those untracked files; 0 = no limit."""
    auto_watch_seconds: int
    """After ``rewind snapshot`` captured by itself (no running ``rewind serve`` answered), and
    when Pi's bridge starts with no watcher serving the repository, start ``rewind serve --watch
    --idle-exit N`` in the background so the next snapshots and the bridges' captures are served
    from its change feed (docs/capture.md#served-snapshots, #shared-watcher); default
    :data:`DEFAULT_AUTO_WATCH_SECONDS` (or ``$REWIND_AUTO_WATCH``, read per construction);
    0 never starts one."""

    def __init__(
        self,
        max_untracked_file_bytes: int = DEFAULT_MAX_UNTRACKED_FILE_BYTES,
        protected_dirs: tuple[str, ...] = DEFAULT_PROTECTED_DIRS,
        shadow_repositories: bool = True,
        shadow_excludes: tuple[str, ...] = DEFAULT_SHADOW_EXCLUDES,
        shadow_max_file_bytes: int = DEFAULT_SHADOW_MAX_FILE_BYTES,
        first_capture_max_files: int = DEFAULT_FIRST_CAPTURE_MAX_FILES,
        first_capture_max_bytes: int = DEFAULT_FIRST_CAPTURE_MAX_BYTES,
        auto_watch_seconds: int | None = None,
    ) -> None:
        self._init(
            max_untracked_file_bytes=max_untracked_file_bytes,
            protected_dirs=protected_dirs,
            shadow_repositories=shadow_repositories,
            shadow_excludes=shadow_excludes,
            shadow_max_file_bytes=shadow_max_file_bytes,
            first_capture_max_files=first_capture_max_files,
            first_capture_max_bytes=first_capture_max_bytes,
            auto_watch_seconds=(
                _auto_watch_default() if auto_watch_seconds is None else auto_watch_seconds
            ),
        )

    def replace(
        self,
        *,
        max_untracked_file_bytes: int | None = None,
        protected_dirs: tuple[str, ...] | None = None,
        shadow_repositories: bool | None = None,
        shadow_excludes: tuple[str, ...] | None = None,
        shadow_max_file_bytes: int | None = None,
        first_capture_max_files: int | None = None,
        first_capture_max_bytes: int | None = None,
        auto_watch_seconds: int | None = None,
    ) -> SnapshotSettings:
        """These settings with the given fields changed (``None``, never a valid value of
        theirs: unchanged), as ``dataclasses.replace``."""
        return SnapshotSettings(
            _or(max_untracked_file_bytes, self.max_untracked_file_bytes),
            _or(protected_dirs, self.protected_dirs),
            _or(shadow_repositories, self.shadow_repositories),
            _or(shadow_excludes, self.shadow_excludes),
            _or(shadow_max_file_bytes, self.shadow_max_file_bytes),
            _or(first_capture_max_files, self.first_capture_max_files),
            _or(first_capture_max_bytes, self.first_capture_max_bytes),
            _or(auto_watch_seconds, self.auto_watch_seconds),
        )


_T = TypeVar("_T")


def _or(given: _T | None, now: _T) -> _T:
    return now if given is None else given


class RetentionSettings(FrozenPlain):
    """Retention is on: ``rewind.retention`` is an object (these field defaults, the
    reference's), or absent (:data:`DEFAULT_RETENTION`)."""

    __slots__ = (
        "implicit",
        "max_age_days",
        "max_snapshots",
        "pin_labeled_entries",
        "scan_mode",
        "startup_budget_ms",
    )
    max_snapshots: int | None
    """None = unlimited."""
    max_age_days: float | None
    """None = unlimited."""
    pin_labeled_entries: bool
    scan_mode: ScanMode
    startup_budget_ms: float | None
    """None = no budget (startup sweeps only)."""
    implicit: bool
    """Not a key: True for :data:`DEFAULT_RETENTION` (``rewind.retention`` absent). Such a sweep
    also keeps a snapshot no session names while its commit is younger than ``maxAgeDays`` (not
    one day): a manual ``rewind snapshot`` or a session kept under another agent dir must not
    lose its points to a policy nobody chose."""

    def __init__(
        self,
        max_snapshots: int | None = None,
        max_age_days: float | None = None,
        pin_labeled_entries: bool = False,
        scan_mode: ScanMode = "ancestor-only",
        startup_budget_ms: float | None = None,
        implicit: bool = False,
    ) -> None:
        self._init(
            max_snapshots=max_snapshots,
            max_age_days=max_age_days,
            pin_labeled_entries=pin_labeled_entries,
            scan_mode=scan_mode,
            startup_budget_ms=startup_budget_ms,
            implicit=implicit,
        )


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


class Settings(FrozenPlain):
    __slots__ = ("retention", "silent_checkpoints", "snapshot")
    silent_checkpoints: bool
    snapshot: SnapshotSettings
    retention: RetentionSettings | None
    """None: ``rewind.retention`` is ``false`` (off)."""

    def __init__(
        self,
        silent_checkpoints: bool = False,
        snapshot: SnapshotSettings | None = None,
        retention: RetentionSettings | None = DEFAULT_RETENTION,
    ) -> None:
        self._init(
            silent_checkpoints=silent_checkpoints,
            snapshot=SnapshotSettings() if snapshot is None else snapshot,
            retention=retention,
        )


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
    floored = RetentionSettings(
        update.get("max_snapshots", retention.max_snapshots),
        update.get("max_age_days", retention.max_age_days),
        retention.pin_labeled_entries,
        retention.scan_mode,
        retention.startup_budget_ms,
        retention.implicit,
    )
    return Settings(settings.silent_checkpoints, settings.snapshot, floored)


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
    for name, (key, _rule) in _RULES.items():  # the model's fields in its constructor's order
        if name in model.__slots__ and key in data:
            values[name] = _field(model, name, data[key], prefix, warnings)
    return model(**values)


def _field(
    model: _Section | type[Settings], name: str, value: Any, prefix: str, warnings: list[str]
) -> Any:
    alias, rule = _RULES[name]
    key = f"{prefix}.{alias}"
    default = getattr(model(), name)
    checked = rule(value)
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


_RULES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    # field → (its key in the section, its rule); each section's fields in constructor order
    "silent_checkpoints": ("silentCheckpoints", _boolean),
    "max_untracked_file_bytes": ("maxUntrackedFileBytes", _byte_count),
    "protected_dirs": ("protectedDirs", _dir_names),
    "shadow_repositories": ("shadowRepositories", _boolean),
    "shadow_excludes": ("shadowExcludes", _patterns),
    "shadow_max_file_bytes": ("shadowMaxFileBytes", _byte_count),
    # a whole, non-negative count; 0 = no limit
    "first_capture_max_files": ("firstCaptureMaxFiles", _byte_count),
    "first_capture_max_bytes": ("firstCaptureMaxBytes", _byte_count),
    # a whole, non-negative number of seconds
    "auto_watch_seconds": ("autoWatchSeconds", _byte_count),
    "max_snapshots": ("maxSnapshots", _optional_count),
    "max_age_days": ("maxAgeDays", _optional_amount),
    "pin_labeled_entries": ("pinLabeledEntries", _boolean),
    "scan_mode": ("scanMode", _scan_mode),
    "startup_budget_ms": ("startupBudgetMs", _optional_amount),
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
