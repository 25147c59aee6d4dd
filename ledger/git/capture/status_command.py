"""The private index's git settings and the capture's ``git status`` command line, in a module
that imports nothing heavy.

Why it exists apart from :mod:`ledger.git.capture.scan`: a cold ``rewind restore`` starts that
status before it has loaded pygit2 and the engine (:mod:`ledger.git.capture.prefetch`), and must
build exactly the command the capture would run, from the same values.
"""

from __future__ import annotations

# Our settings for every command that reads or writes the private index. The user's weakened
# stat settings would make a kept index miss changes; autocrlf=false keeps bytes exact (D10).
PRIVATE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.autocrlf", "false"),
    ("core.trustctime", "true"),
    ("core.checkStat", "default"),
    ("core.ignoreStat", "false"),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "true"),
    ("core.splitIndex", "false"),
    ("core.preloadIndex", "true"),
    ("core.sparseCheckout", "false"),
    ("index.version", "2"),
    ("index.sparse", "false"),
    ("index.threads", "true"),
    ("status.showUntrackedFiles", "all"),
    ("status.renames", "false"),
    ("status.submoduleSummary", "false"),
    ("diff.renames", "false"),
    ("submodule.recurse", "false"),
    ("feature.manyFiles", "false"),
    ("advice.addEmbeddedRepo", "false"),
)

STATUS_ARGS: tuple[str, ...] = (
    "status",
    "--porcelain=v2",
    "-z",
    "--untracked-files=all",
    "--ignore-submodules=dirty",
    "--no-renames",
)
"""The capture's status (``Capturer._status``). git (2.39) builds its untracked cache for the mode
``status.showUntrackedFiles`` names and uses it only with that mode: ``all`` in
:data:`PRIVATE_CONFIG` and ``--untracked-files=all`` here must stay together."""

# git reports, on stderr through trace2, what its untracked cache did during status (dir.c,
# emit_traversal_statistics). Nesting: the counters sit three regions deep.
TRACE_ENV = {"GIT_TRACE2_EVENT": "2", "GIT_TRACE2_EVENT_NESTING": "9"}

__all__ = ["PRIVATE_CONFIG", "STATUS_ARGS", "TRACE_ENV"]
