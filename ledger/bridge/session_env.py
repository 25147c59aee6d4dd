"""The part of an environment a bridge's or a command's behaviour depends on.

Why it exists: the repository's watcher runs Pi sessions (:mod:`ledger.bridge.hosted`) and
one-shot commands (:mod:`ledger.bridge.served_commands`) for other processes, and must do
exactly what that process would have done. It does so only when the other process's
environment equals its own on everything our code, git and Pi read (:func:`bridge_env`).

Invariants: standard library only (the command line's client, :mod:`ledger.cli.served`, runs
it before anything else is imported); the extension computes the same set in TypeScript
(``bridgeEnv`` in tools/pi-extension/rewind-ledger.ts): change both together.
"""

from __future__ import annotations

from collections.abc import Mapping

_ENV_PREFIXES = ("GIT_", "REWIND_", "PI_", "XDG_", "LC_", "PYTHON")
_ENV_KEYS = frozenset({"HOME", "EMAIL", "PATH", "LANG", "LANGUAGE", "TZ", "USER"})
# Compatibility: Pi 0.73.1 sets these in its own process for its children (so a watcher started
# from a shell never had them); nothing of ours reads them.
_ENV_IGNORED = frozenset({"PI_CODING_AGENT", "PI_SKIP_VERSION_CHECK"})


def bridge_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of an environment a bridge's behaviour depends on (the extension computes the
    same in TypeScript, ``bridgeEnv`` in tools/pi-extension/rewind-ledger.ts): git's variables
    (what git captures, who commits), ours (``REWIND_*``: feed, trace, settings), Pi's
    (``PI_CODING_AGENT_DIR``: settings, sessions), where configuration and programs are found
    (``HOME``, ``XDG_*``, ``PATH``, ``PYTHON*``), the locale and time zone; not the two markers
    Pi sets for its children (``PI_CODING_AGENT``, ``PI_SKIP_VERSION_CHECK``)."""
    return {
        key: value
        for key, value in env.items()
        if (key.startswith(_ENV_PREFIXES) or key in _ENV_KEYS) and key not in _ENV_IGNORED
    }


__all__ = ["bridge_env"]
