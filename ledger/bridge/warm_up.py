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
  pair's diff not kept yet is computed on the thread's own repository handle and kept.

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
import sys
import threading
from typing import TYPE_CHECKING

from ledger.engine.kept_diffs import kept_for
from ledger.engine.ownership import neighbour_pairs
from ledger.git.private import private_dir

if TYPE_CHECKING:
    from ledger.bridge.state import BridgeState
    from ledger.engine.engine import Engine
    from ledger.settings import SnapshotSettings

ARM_IN_BACKGROUND = True
"""Whether the feed's base scan is asked for here (see :func:`_prepare`)."""
MAX_POINTS = 200
"""As many points as the list shows (:data:`ledger.engine.preview.MAX_POINTS`)."""


def after_session_start(state: BridgeState, *, has_ui: bool) -> threading.Thread | None:
    """Start preparing the first ``/rewind`` (see the module); the thread, or ``None`` when
    there is nothing to prepare."""
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
        args=(engine, pairs, engine.settings.snapshot),
        name="rewind-warm-up",
        daemon=True,
    )
    thread.start()
    return thread


def _prepare(engine: Engine, pairs: list[tuple[str, str]], settings: SnapshotSettings) -> None:
    # The base scan first: it spares the first capture (and the first /rewind list) a full
    # scan. It made the feed's first verification round run while the first prompt's agent
    # wrote files, which exposed a race in the verifier's check (a change a capture had taken
    # but not yet published looked like no change; a correct feed was switched off, every
    # capture stayed exact). That race is fixed in ledger/git/feed/service.py (try_fed,
    # before_full; tests/integration/test_feed_races.py, docs/capture.md).
    feed = sys.modules.get("ledger.git.feed.service")  # imported only where a feed may run
    if feed is not None and ARM_IN_BACKGROUND:
        with contextlib.suppress(Exception):
            feed.arm(engine.repo.root, settings)
    with contextlib.suppress(Exception):
        engine.authorship.preload()
    with contextlib.suppress(Exception):
        _keep_diffs(engine, pairs)


def _keep_diffs(engine: Engine, pairs: list[tuple[str, str]]) -> None:
    from ledger.git.shadow.layout import reopen
    from ledger.git.trees import leaf_changes

    if not pairs:
        return
    kept = kept_for(private_dir(engine.repo.git_dir))
    missing = [pair for pair in pairs if kept.get(*pair) is None]
    if not missing:
        return
    repo = reopen(engine.repo.root, engine.repo.git_dir)  # the engine's is not for threads
    for old, new in missing:
        changes = leaf_changes(repo, old, new)
        if changes is not None:
            kept.put(old, new, changes)


__all__ = ["after_session_start"]
