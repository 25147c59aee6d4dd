"""A module another thread is still importing is not "loaded" (ledger/loaded_modules.py).

CI once lost a ``pi -p`` prompt's pre-prompt snapshot: the bridge loads the change feed's module
in a background thread, and the prompt's capture looked it up in ``sys.modules`` while its body
still ran (``AttributeError: partially initialized module 'ledger.git.feed.service' has no
attribute 'enabled'``). These tests build that state for real: a module whose body waits.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import types
import uuid
from pathlib import Path

import pytest

from ledger.git.repo import GitRepo
from ledger.git.store.snapshot import take_snapshot
from ledger.loaded_modules import finished
from ledger.settings import SnapshotSettings
from tests.gitkit import one_commit_repo

PACKAGE = Path(__file__).resolve().parents[2] / "ledger"


def test_a_module_whose_body_still_runs_in_another_thread_is_not_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"slow_module_{uuid.uuid4().hex}"
    gate = types.ModuleType(f"{name}_gate")
    gate.entered = threading.Event()  # type: ignore[attr-defined]
    gate.release = threading.Event()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, gate.__name__, gate)
    (tmp_path / f"{name}.py").write_text(
        f"import {gate.__name__} as gate\n"
        "gate.entered.set()\n"
        "gate.release.wait(30)\n"
        "def ready():\n"
        "    return True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importer = threading.Thread(target=importlib.import_module, args=(name,))
    importer.start()
    try:
        assert gate.entered.wait(30)  # type: ignore[attr-defined]
        # The trap: the module is already in sys.modules, without its functions.
        assert name in sys.modules and not hasattr(sys.modules[name], "ready")
        assert finished(name) is None
    finally:
        gate.release.set()  # type: ignore[attr-defined]
        importer.join(30)
    module = finished(name)
    assert module is not None and module.ready() is True
    monkeypatch.delitem(sys.modules, name)


def test_a_module_never_imported_is_not_finished() -> None:
    assert finished(f"never_imported_{uuid.uuid4().hex}") is None


def _half_imported(name: str) -> types.ModuleType:
    """A module as another thread's import leaves it mid-body: in sys.modules, no functions."""
    spec = importlib.machinery.ModuleSpec(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    spec._initializing = True  # type: ignore[attr-defined]  # what importlib sets while the body runs
    return module


def test_a_snapshot_taken_while_the_feed_and_delegation_are_half_imported_scans_by_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = one_commit_repo(tmp_path / "repo", {"a.txt": "one\n"})
    (root / "a.txt").write_text("two\n")
    repo = GitRepo.discover(root)
    expected = take_snapshot(GitRepo.discover(root), SnapshotSettings(), last_exact=None).tree
    for name in ("ledger.git.feed.service", "ledger.bridge.delegate"):
        monkeypatch.setitem(sys.modules, name, _half_imported(name))
    report = take_snapshot(repo, SnapshotSettings(), last_exact=None)
    assert report.tree == expected


def test_optional_subsystems_are_looked_up_only_through_finished() -> None:
    """``sys.modules.get(...)`` / ``sys.modules[...]`` can hand out a half-imported module; only
    ledger/loaded_modules.py may read ``sys.modules`` for a module's contents (a membership test
    is fine: it asks whether an import started, not what the module holds)."""
    offenders = [
        str(path.relative_to(PACKAGE.parent))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "loaded_modules.py"
        and ("sys.modules.get(" in (text := path.read_text()) or "sys.modules[" in text)
    ]
    assert offenders == []
