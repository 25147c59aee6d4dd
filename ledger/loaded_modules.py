"""Modules this process has *finished* importing, looked up without importing them.

Why it exists: a few optional subsystems (the change feed, the watcher delegation) are looked up
rather than imported, so that a one-shot command never pays their imports: "is the feed module
loaded? then ask it". ``sys.modules`` answers too early for that question. A module is placed
there *before* its body runs, so while another thread imports it (a ``pi -p`` bridge loads the
feed in a background thread, ``ledger/cli/serve.py``), a lookup finds a half-built module and
its functions are not there yet: CI once failed a prompt's capture on exactly that
(``AttributeError: partially initialized module 'ledger.git.feed.service' has no attribute
'enabled'``), and the prompt lost its pre-prompt snapshot.

Invariant: :func:`finished` returns a module only once its body has run to the end; a module
still being imported (by any thread) counts as not loaded, which every caller treats as "the
subsystem is not running here" (the capture then scans by itself: exact, only slower). Never
imports, never blocks.
"""

from __future__ import annotations

import sys
from types import ModuleType


def finished(name: str) -> ModuleType | None:
    """The module ``name`` if this process has finished importing it, else ``None``."""
    module = sys.modules.get(name)
    if module is None:
        return None
    # Compatibility: CPython's import machinery (importlib._bootstrap._load_unlocked) sets
    # ``__spec__._initializing`` while the body runs and clears it after, on every supported
    # version (3.11+); the interpreter's own "partially initialized module" message reads it.
    spec = getattr(module, "__spec__", None)
    if spec is not None and getattr(spec, "_initializing", False):
        return None
    return module


__all__ = ["finished"]
