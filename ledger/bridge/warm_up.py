"""What the bridge prepares once ``session_start`` is answered, so that the session's first
``/rewind`` costs what a later one does (issue 34, docs/pi.md#rewind).

Why it exists: a fresh bridge paid three things at its first ``/rewind`` list that later lists
never pay: the authorship index read from its file (~200 ms at 100k files), the neighbouring
tree diffs of the branch's points (~450 ms for 200 points, unless a process before kept them:
:mod:`ledger.engine.kept_diffs`), and its change feed's first capture, a full scan (~240 ms),
because the feed had no base yet. Here, right after the answer to ``session_start``:

- in this thread (no host call: the session as the answer's footer mirrored it), the tree
  pairs the list will diff (:func:`~ledger.engine.ownership.neighbour_pairs`, a few ms);
- in a background thread: the feed's base scan is asked for
  (:func:`ledger.git.feed.service.arm`: taken by the feed's verifier, under the capture lock,
  once its watcher is ready), the index is loaded (:meth:`AuthorshipLog.preload`), and each
  pair's diff not kept yet is computed on the thread's own repository handle and kept;
- then, for the first preview (issue 34: any preview ≤ 200 ms, the first one of a fresh bridge
  included): the modules a preview imports are imported; the tree levels the previews of the
  branch's points will check are read and judged ahead on that handle
  (:func:`ledger.git.restore.checked_walks.prefill`, at most :data:`PREFILL_LEVELS` levels);
  and, in a bridge process of its own (not in the watcher that hosts sessions), the objects it
  holds by then (the engine, the index, the feed's state: ~140k at 100k files) are moved out
  of the garbage collector's way (:func:`gc.freeze`): a full collection that scanned them all
  took ~30 ms of the first preview.

Print mode (``hasUI`` false) never lists, and its run ends before this could help: there the
engine only stops keeping the whole authorship index loaded (its first capture then reads one
record instead of all, ~0.2 s at 100k files).

Invariants: only for a session with a UI (print mode: see above); never delays an answer (it
starts after one and never calls the host); nothing it does changes what any event answers: the index is the file as it is (a
rebuild is left to the first use), the diffs are exact (:mod:`ledger.engine.kept_diffs`), and a
base scan is one the feed would have taken anyway; any failure leaves the work to the first
use, as before.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ledger.engine.kept_diffs import kept_for
from ledger.engine.ownership import neighbour_pairs
from ledger.git.private import private_dir
from ledger.loaded_modules import finished

if TYPE_CHECKING:
    from ledger.bridge.state import BridgeState
    from ledger.engine.engine import Engine
    from ledger.git.repo import GitRepo
    from ledger.settings import SnapshotSettings

ARM_IN_BACKGROUND = True
"""Whether the feed's base scan is asked for here (see :func:`_prepare`)."""
MAX_POINTS = 200
"""As many points as the list shows (:data:`ledger.engine.preview.MAX_POINTS`)."""
PREFILL_LEVELS = 20_000
"""Tree levels read ahead at most (~1 s of one core at worst; 100k files and 200 points read
a few thousand)."""
PREVIEW_MODULES = (
    "ledger.bridge.rewind_events",
    "ledger.engine.preview",
    "ledger.engine.preview_lines",
    "ledger.engine.preview_walk",
    "ledger.engine.state_preview",
    "ledger.git.restore.plan",
    "ledger.review.diff",
)
"""What a preview imports at its first use."""
TOOL_MODULES = (
    "ledger.bridge.tool_events",
    "ledger.engine.agent_tool",
    "ledger.git.restore.run",
    "ledger.git.restore.compose",
    "ledger.git.restore.patch_text",
)
"""What the model's ``rewind`` tool imports at its first call (~50 ms at load; issue 36)."""
_frozen = False
"""Whether this process froze its objects already (see :func:`_prepare`)."""


def after_session_start(
    state: BridgeState, *, has_ui: bool, busy: threading.Lock | None = None
) -> threading.Thread | None:
    """Start preparing the first ``/rewind`` (see the module); the thread, or ``None`` when
    there is nothing to prepare. ``busy``: held while the bridge handles an event (the tree
    levels are read between events only)."""
    engine = state.engine
    if engine is None or state.passive:
        return None
    if not has_ui:
        # Print mode never lists (/rewind needs a UI), so its engine does not keep the whole
        # authorship index loaded (dispatch sets that for every bridge): the prompt's first
        # capture then reads only the latest snapshot's record, ~11 ms at 100k files instead of
        # ~0.2 s to load every record (issue 34, the first pi -p of the day), as a one-shot
        # command does. The same answers: anything that needs more loads it on first use.
        engine.authorship.keep_loaded = False
        return None
    session = state.host.mirrored()
    pairs: list[tuple[str, str]] = []
    if session is not None:
        with contextlib.suppress(Exception):  # a hint only: the list computes what is missing
            pairs = neighbour_pairs(engine, session, state.host.known_leaf(), limit=MAX_POINTS)
    thread = threading.Thread(
        target=_prepare,
        args=(engine, pairs, engine.settings.snapshot, busy, state.kind == "bridge"),
        name="rewind-warm-up",
        daemon=True,
    )
    thread.start()
    return thread


def _prepare(
    engine: Engine,
    pairs: list[tuple[str, str]],
    settings: SnapshotSettings,
    busy: threading.Lock | None = None,
    own_process: bool = False,
) -> None:
    started = time.perf_counter()
    # The base scan first: it spares the first capture (and the first /rewind list) a full
    # scan. It made the feed's first verification round run while the first prompt's agent
    # wrote files, which exposed a race in the verifier's check (a change a capture had taken
    # but not yet published looked like no change; a correct feed was switched off, every
    # capture stayed exact). That race is fixed in ledger/git/feed/service.py (try_fed,
    # before_full; tests/integration/test_feed_races.py, docs/capture.md).
    feed = finished("ledger.git.feed.service")  # imported only where a feed may run
    if feed is not None and ARM_IN_BACKGROUND:
        with contextlib.suppress(Exception):
            feed.arm(engine.repo.root, settings)
    with contextlib.suppress(Exception):
        engine.authorship.preload()
    levels = 0
    with contextlib.suppress(Exception):
        levels = ahead_of_previews(engine, pairs, busy)
    # Safety: freezing moves objects to a generation the collector never scans again (they
    # are still freed when their last reference goes; a reference cycle among them that is
    # dropped later stays in memory). So only in a bridge process of its own (its objects live
    # as long as it does), never in the watcher that hosts sessions one after another for
    # days; and once per process (a later session of the same bridge, /new or /resume, would
    # freeze the previous session's objects too). No collection first: one would hold the
    # interpreter lock for tens of ms, and an event may be arriving.
    global _frozen
    if own_process and not _frozen:
        _frozen = True
        gc.freeze()
    _trace(started, len(pairs), levels)


def _trace(started: float, pairs: int, levels: int) -> None:
    """One line in ``REWIND_TRACE``'s file (:mod:`ledger.bridge.server`): how long this took."""
    path = os.environ.get("REWIND_TRACE")
    if not path:
        return
    ms = (time.perf_counter() - started) * 1000
    line = {"event": "warm-up", "ms": round(ms, 3), "pairs": pairs, "levels": levels}
    with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as trace:
        trace.write(json.dumps(line) + "\n")


def ahead_of_previews(
    engine: Engine, pairs: list[tuple[str, str]], busy: threading.Lock | None = None
) -> int:
    """What the list and the first previews need, done ahead: each pair's diff kept, the
    preview's modules imported, and the tree levels its checks read judged (see the module);
    how many levels were read. With ``busy``, a level is read only while no event is handled
    (so an event shares the interpreter with at most one level's reading, ~0.1 ms)."""
    repo = _keep_diffs(engine, pairs)
    for name in (*PREVIEW_MODULES, *TOOL_MODULES):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    if repo is None:
        return 0

    def between_events() -> None:
        # Never holds ``busy``: only waits while someone else does (holding it here could
        # make an event wait on this thread).
        while busy is not None and busy.locked():
            time.sleep(0.005)

    return _prefill(engine, repo, pairs, between_events)


def _keep_diffs(engine: Engine, pairs: list[tuple[str, str]]) -> GitRepo | None:
    """Keep each pair's diff; the thread's own repository handle (``None``: no pairs)."""
    from ledger.git.shadow.layout import reopen
    from ledger.git.trees import leaf_changes

    if not pairs:
        return None
    repo = reopen(engine.repo.root, engine.repo.git_dir)  # the engine's is not for threads
    kept = kept_for(private_dir(engine.repo.git_dir))
    missing = [pair for pair in pairs if kept.get(*pair) is None]
    for old, new in missing:
        changes = leaf_changes(repo, old, new)
        if changes is not None:
            kept.put(old, new, changes)
    return repo


def _prefill(
    engine: Engine,
    repo: GitRepo,
    pairs: list[tuple[str, str]],
    before_read: Callable[[], None],
) -> int:
    """The levels the branch's previews will check, read and judged ahead (see the module)."""
    from ledger.git.restore import checked_walks

    kept = kept_for(private_dir(engine.repo.git_dir))
    found = ((old, new, kept.get(old, new)) for old, new in pairs)
    return checked_walks.prefill(
        repo.pygit2,
        ((old, new, changes) for old, new, changes in found if changes is not None),
        repo.config_bool("core.ignorecase", False),
        limit=PREFILL_LEVELS,
        before_read=before_read,
    )


__all__ = ["after_session_start", "ahead_of_previews"]
