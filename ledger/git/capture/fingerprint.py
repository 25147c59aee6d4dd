"""What, outside the work tree, shapes a capture: the fingerprint a kept private index is valid for.

Why it exists: some inputs change a capture without changing any file's stat data:
configuration (``core.excludesFile``, ``core.attributesFile``, filters, ``core.fileMode``,
``core.symlinks`` …), the global ignore and attribute files, and our own settings. All of them
are hashed (:func:`global_fingerprint`); when the hash differs from the one the private index was
built under, the index is rebuilt from nothing (docs/design.md#the-private-index). Conservative:
every ``core.*``, ``filter.*``, ``index.*``, ``feature.*`` and ``extensions.*`` key counts, so an
unrelated change costs a rebuild, never a wrong tree.

Invariants:
- Configuration is git's own view (``git config -z --list``: every file git reads, includes,
  ``GIT_CONFIG_GLOBAL``, ``GIT_CONFIG_COUNT`` …), because git itself captures under it. It is
  read through :func:`ledger.git.config_view.config_view`, which a restore asks anyway: one
  ``git config`` process per process while no file it came from changes (its signature: the
  environment and every file's stat data; a view read within one clock tick of a file's change
  is never kept), not one per capture. The
  booleans the capture acts on (:class:`GitFacts`) are parsed by pygit2's parser of git
  booleans (:func:`git_bool`): a key without ``=`` is true, ``key =`` (empty) is false.
- Read-only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pygit2

from ledger.digests import sha256
from ledger.git.capture.state import file_signature
from ledger.git.config_view import config_view
from ledger.git.repo import GitRepo
from ledger.plain import FrozenPlain
from ledger.settings import SnapshotSettings

FORMAT_VERSION = "capture-2"  # 2: git directories in the work tree are left out
_CONFIG_PREFIXES = ("core.", "filter.", "index.", "feature.", "extensions.")
_ENV_KEYS = ("HOME", "XDG_CONFIG_HOME", "GIT_ATTR_NOSYSTEM", "GIT_CONFIG_NOSYSTEM")
_SYSTEM_ATTRIBUTES = Path("/etc/gitattributes")


class GitFacts(FrozenPlain):
    """The few configuration values the capture itself acts on."""

    __slots__ = ("filemode", "ignore_case")
    ignore_case: bool
    filemode: bool

    def __init__(self, ignore_case: bool, filemode: bool) -> None:
        self._init(ignore_case=ignore_case, filemode=filemode)


def git_bool(value: str | None, default: bool) -> bool:
    """A configuration value as git reads a boolean: ``None`` (a key written without ``=``) is
    true, ``""`` false, ``yes``/``on``/``true``/non-zero numbers true; a value git would refuse
    gives ``default``."""
    if value is None:
        return True
    try:
        return bool(pygit2.Config.parse_bool(value))
    except (pygit2.GitError, ValueError):
        return default


def _config_path(value: str | None, default_name: str, root: Path) -> Path | None:
    if value is None:
        xdg = os.environ.get("XDG_CONFIG_HOME")
        home = os.environ.get("HOME")
        if xdg:
            return Path(xdg) / "git" / default_name
        return Path(home) / ".config" / "git" / default_name if home else None
    if not value:
        return None
    if value.startswith("~/") and os.environ.get("HOME"):
        return Path(os.environ["HOME"]) / value[2:]
    path = Path(value)
    return path if path.is_absolute() else root / path


def global_fingerprint(repo: GitRepo, settings: SnapshotSettings) -> tuple[str, GitFacts]:
    """``(hash, facts)`` of everything outside the work tree that shapes a capture."""
    config = config_view(repo).pairs
    relevant = sorted((k, v or "") for k, v in config if k.startswith(_CONFIG_PREFIXES))
    last: dict[str, str | None] = {}
    for key, value in config:
        last[key] = value
    common = repo.common_dir
    files = [
        common / "info" / "exclude",
        common / "info" / "attributes",
        _config_path(_text(last, "core.excludesfile"), "ignore", repo.root),
        _config_path(_text(last, "core.attributesfile"), "attributes", repo.root),
    ]
    if not os.environ.get("GIT_ATTR_NOSYSTEM"):
        files.append(_SYSTEM_ATTRIBUTES)
    signatures = []
    for path in files:
        sig = file_signature(path) if path is not None else None
        signatures.append([str(path), sig.digest if sig else None])
    payload = {
        "format": FORMAT_VERSION,
        "root": str(repo.root),
        "git_dir": str(repo.git_dir),
        "config": relevant,
        "env": [(k, os.environ.get(k)) for k in _ENV_KEYS],
        "files": signatures,
        "settings": [settings.max_untracked_file_bytes, sorted(settings.protected_dirs)],
    }
    digest = sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogateescape"))
    facts = GitFacts(
        ignore_case=git_bool(last["core.ignorecase"], False)
        if "core.ignorecase" in last
        else False,
        filemode=git_bool(last["core.filemode"], True) if "core.filemode" in last else True,
    )
    return digest.hexdigest(), facts


def _text(last: dict[str, str | None], key: str) -> str | None:
    """A path-valued key: ``None`` when unset, ``""`` when set without a value (no file)."""
    if key not in last:
        return None
    return last[key] or ""


__all__ = ["FORMAT_VERSION", "GitFacts", "git_bool", "global_fingerprint"]
