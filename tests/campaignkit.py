"""``tools/fault_campaign.py`` for tests: its worlds (a repository, a session with a point, a work
tree changed since) and its ``rewind`` runner, loaded once per test process.

Why it exists: the tool is a script, not a package module; five test modules loaded it by path
each in their own way (one re-executed it, replacing the module the others' dataclasses named).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.gitkit import ROOT

NAME = "fault_campaign"


def _load() -> ModuleType:
    loaded = sys.modules.get(NAME)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(NAME, ROOT / "tools" / "fault_campaign.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


fault_campaign = _load()

__all__ = ["fault_campaign"]
