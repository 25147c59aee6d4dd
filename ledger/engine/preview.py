"""What a rewind would do, before the user chooses it: the ``/rewind`` list, a point's preview, a
file's diff, and the ``/tree`` / ``/fork`` menu titles (docs/pi.md#rewind).

Why it exists: the moment a user decides — which point, and what will happen to my files — must
not be blind. Every answer here compares the work tree *now* (one capture, shared by everything a
call computes) with a recorded point, and names the user's own work among the files it would
change (:mod:`ledger.engine.attribution`).

- :func:`list_points`: the rewind points of the branch the user is on, newest first: each
  prompt's point (the files before it ran) with its text, time and how many files differ from
  now, marked when restoring it would overwrite the user's own work; the undo at the top, and
  the states before past file rewinds (each labelled with the state it leads to and what of the
  agent's work since the last file rewind it takes back: :mod:`ledger.engine.past_states`).
  One capture and one tree diff per point (cost grows with what changed, not with the tree).
- :func:`preview`: one point: the restore plan (the same plan a restore would run, with its
  refusals; :func:`fill_plan`, shared with a state's preview, :mod:`ledger.engine.state_preview`),
  each file with its line counts and whether it holds the user's own work, and which actions
  are offered (and why the others are not).
- :func:`file_diff`: the unified diff of one file, as the restore would change it, bounded.
- :func:`menu_title`: the ``Restore Options`` title of ``/tree`` and ``/fork``: what each file
  choice would restore, what is not offered and why, and the user's own work it would overwrite.

The values and their JSON are :mod:`ledger.engine.preview_model`'s.

- :func:`pi_fork_refusal`: why Pi 0.73.1 would refuse a fork at an entry (it forks only from a
  prompt, i.e. a user message, unless asked to copy the session "at" an entry), so that no fork
  is offered, prepared or restored for there (docs/design.md#the-fork-hand-off).

Invariants: read-only (captures write only git objects and the private index; the list's
neighbouring diffs are kept in the private dir, :mod:`ledger.engine.kept_diffs`); appends nothing;
a prompt without a restorable point is listed with the reason, never an error: either no
snapshot was ever taken for it (no binding: rewind was off, or its bridge was stopped, while it
ran) or its snapshot was pruned by retention (bound, but the commit is gone).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ledger.engine import messages as M
from ledger.engine.attribution import Attribution
from ledger.engine.changes_since import MENU_UNDO, authors_of, latest_point
from ledger.engine.neighbours import Neighbour, WrittenByOther
from ledger.engine.ownership import branch_prompts, recorded_changes
from ledger.engine.past_states import (
    agent_since,
    last_rewind_tree,
    past_states,
    paths_of,
    since_note,
    undo_words,
)
from ledger.engine.preview_model import (
    FORK_LABEL,
    NEVER_TAKEN,
    PRUNED,
    Action,
    Counts,
    Point,
    PointList,
    Preview,
    PreviewFile,
    StatePoint,
    UndoPoint,
)
from ledger.engine.undo_target import find_undo
from ledger.errors import LedgerError, NoRewindPointError
from ledger.git.trees import Change, Entry, entry_at, leaf_changes, split_changes
from ledger.outside_rules import (
    ChangeKind,
    OutsideChange,
    others_warning,
    plan_warning,
    short_list,
)
from ledger.session.model import entry_text, is_restorable, kind_of
from ledger.session_names import session_label

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext
    from ledger.git.capture.scan import CaptureResult

MAX_POINTS = 200
"""Points listed at most (newest first): a list a person can scroll, bounded work."""
MAX_FILES = 500
"""Files a preview lists with line counts (the counts cover every file)."""
MAX_DIFF_BYTES = 256 << 10
"""A file's diff is cut beyond this (a preview is read, not applied)."""
TEXT_CHARS = 80


# --- the list ---------------------------------------------------------------------------------


def _capture(engine: EngineContext) -> CaptureResult:
    from ledger.git.capture.scan import capture_tree

    return capture_tree(engine.repo, engine.settings.snapshot)


def prompt_text(entry_text_value: str) -> str:
    text = " ".join(entry_text_value.split())
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def list_points(engine: EngineContext, *, limit: int = MAX_POINTS) -> PointList:
    """The rewind points of the branch the user is on, newest first (see the module).

    One capture, then one walk from now back through the points: each point differs from the
    next newer one by the few files of one prompt and its hand edits, and those diffs (between
    recorded, immutable trees) are memoised on the engine and kept on disk for later
    processes (:mod:`ledger.engine.kept_diffs`), so a list costs the changes since
    the newest point plus what is new in the session, not one full comparison per point (at
    100k files and 200 points that was ~25 s; docs/pi.md#rewind). Whose work a file holds
    depends only on its state now, so it is decided once per path."""
    started = time.perf_counter()
    session = engine.session()
    captured = _capture(engine)
    now = captured.tree
    bare = [s.path.rstrip("/") for s in captured.skipped]
    attribution = Attribution.of(engine)
    point = latest_point(engine)
    lineage = engine.reader.lineage(session)
    result = PointList(shadow=_shadow(engine))
    users = branch_prompts(session, engine.host.leaf_id())
    result.more = max(0, len(users) - limit)
    walk = _Walk(engine, now, bare, attribution, point.tree if point is not None else None)
    for entry in reversed(users[-limit:] if limit else users):
        found = lineage.resolve(entry.id, engine.repo.commit_exists)
        text = prompt_text(entry_text(entry))
        stamp = entry.timestamp if isinstance(entry.timestamp, str) else None
        tree = engine.repo.tree_of(found[0]) if found is not None else None
        if found is None or tree is None:
            # Bound to a commit that is gone: retention pruned it. Never bound: no snapshot was
            # taken while this prompt ran (rewind off, or its bridge stopped mid-prompt).
            bound = lineage.resolve(entry.id, lambda _sha: True) is not None
            result.points.append(
                Point(entry.id, text, stamp, None, missing=PRUNED if bound else NEVER_TAKEN)
            )
            continue
        counts, own, theirs = walk.back_to(tree)
        result.points.append(Point(entry.id, text, stamp, found[0], counts, own, theirs))
    undoing = find_undo(engine)  # an interrupted restore first (ledger.engine.undo_target)
    since = last_rewind_tree(engine)
    if undoing is not None:
        undo = undoing.snapshot
        counts, own, others_wrote = compare_point(engine, now, undo, bare, point, attribution)
        theirs = tuple(sorted(paths_of(others_wrote)))
        words = undo_words(engine, undoing)
        # Finishing an interrupted restore takes back that restore, not the agent's work.
        mine = [*(c.path for c in own), *theirs]
        extra = 0 if words.kind == "interrupted" else agent_since(engine, now, since, counts, mine)
        label = words.label + since_note(extra, top=True)
        result.undo = UndoPoint(undo, words.kind, label, words.state, counts, own, theirs, extra)
    # Not the files now (restoring them changes nothing), nor the undo row's state again.
    skip = {now}
    if undoing is not None:
        skip.add(engine.repo.tree_of(undoing.snapshot) or now)
    for state in past_states(engine, skip=skip):
        counts, own, others_wrote = compare_point(
            engine, now, state.snapshot, bare, point, attribution
        )
        theirs = tuple(sorted(paths_of(others_wrote)))
        extra = agent_since(engine, now, since, counts, [*(c.path for c in own), *theirs])
        op = state.operation
        result.states.append(
            StatePoint(
                op.record,
                op.kind,
                state.label + since_note(extra, top=False),
                op.timestamp,
                state.snapshot,
                counts,
                own,
                theirs,
                extra,
            )
        )
    result.ms = (time.perf_counter() - started) * 1000
    return result


class _Walk:
    """The work tree now compared with ever older points, one neighbouring diff at a time:
    ``now[p]`` is a path's entry in the work tree, ``at[p]`` its entry at the point reached,
    and the three sets what a restore to that point would add, modify and delete."""

    def __init__(
        self,
        engine: EngineContext,
        now: str,
        skipped: Sequence[str],
        attribution: Attribution,
        latest: str | None,
    ) -> None:
        self.engine, self.newer, self.skipped = engine, now, skipped
        self.attribution, self.latest = attribution, latest
        self.first = True
        self.now: dict[str, Entry | None] = {}
        self.at: dict[str, Entry | None] = {}
        self.kinds: dict[str, set[str]] = {"added": set(), "modified": set(), "deleted": set()}
        self.mine: dict[str, bool] = {}
        self.own: set[str] = set()
        self.theirs: dict[str, bool] = {}
        self.by_others: set[str] = set()

    def _kind(self, path: str) -> str | None:
        before, after = self.now[path], self.at[path]
        if before == after:
            return None
        return "added" if before is None else "deleted" if after is None else "modified"

    def _is_mine(self, path: str) -> bool:
        """The path's state now is the user's own work (an absence only when a capture saw
        the user delete it, or the latest point still holds it)."""
        found = self.mine.get(path)
        if found is None:
            now = self.now[path]
            whose = self.attribution.whose(Change(path, now, self.at[path]))
            found = whose.attribution == "user" and (
                now is not None
                or whose.producer is not None
                or (
                    self.latest is not None
                    and entry_at(self.engine.repo, self.latest, path) is not None
                )
            )
            self.mine[path] = found
        return found

    def _is_theirs(self, path: str) -> bool:
        """Another session's agent wrote the path's state now (and this one's did not)."""
        found = self.theirs.get(path)
        if found is None:
            change = Change(path, self.now[path], self.at[path])
            found = self.attribution.whose(change).attribution == "other-session"
            self.theirs[path] = found
        return found

    def back_to(self, tree: str) -> tuple[Counts, tuple[OutsideChange, ...], tuple[str, ...]]:
        # The first pair holds the capture now (new at every list): not memoised.
        changes = (
            leaf_changes(self.engine.repo, tree, self.newer) or []
            if self.first
            else recorded_changes(self.engine, tree, self.newer)
        )
        self.first, self.newer = False, tree
        for change in changes:
            path = change.path
            if any(path == p or path.startswith(p + "/") for p in self.skipped):
                continue
            if path not in self.now:
                self.now[path] = change.new  # unchanged between now and the newer point
            else:
                kind = self._kind(path)
                if kind is not None:
                    self.kinds[kind].discard(path)
            self.at[path] = change.old
            kind = self._kind(path)
            if kind is None:
                self.own.discard(path)
                self.by_others.discard(path)
                continue
            self.kinds[kind].add(path)
            if self._is_mine(path):
                self.own.add(path)
            elif self._is_theirs(path):
                self.by_others.add(path)
        k = self.kinds
        counts = Counts(
            tuple(heapq.nsmallest(4, k["added"])),
            tuple(heapq.nsmallest(4, k["modified"])),
            tuple(heapq.nsmallest(4, k["deleted"])),
            sizes=(len(k["added"]), len(k["modified"]), len(k["deleted"])),
        )
        kinds: dict[str, ChangeKind] = {"added": "deleted", "deleted": "added"}
        own = tuple(
            OutsideChange(path, kinds.get(self._kind(path) or "", "modified"))
            for path in sorted(self.own)
        )
        return counts, own, tuple(sorted(self.by_others))


def compare_point(
    engine: EngineContext,
    now: str,
    commit: str,
    skipped: Sequence[str],
    point: Any,
    attribution: Attribution | None = None,
) -> tuple[Counts, tuple[OutsideChange, ...], tuple[WrittenByOther, ...]]:
    """What restoring ``commit`` would change (by tree: the plan proper is the preview's), the
    user's own work among it, and what other sessions' agents wrote among it."""
    tree = engine.repo.tree_of(commit)
    if tree is None:
        return Counts(), (), ()
    changes = leaf_changes(engine.repo, now, tree) or []
    bare = [p.rstrip("/") for p in skipped]
    changes = [
        c for c in changes if not any(c.path == p or c.path.startswith(p + "/") for p in bare)
    ]
    added, modified, deleted = split_changes(changes)
    authors = authors_of(engine, now, tree, point=point, changes=changes, attribution=attribution)
    return Counts(added, modified, deleted), authors.own, authors.others


def _shadow(engine: EngineContext) -> str | None:
    from ledger.git.shadow.layout import ShadowRepo

    return str(engine.repo.git_dir) if isinstance(engine.repo, ShadowRepo) else None


# --- one point --------------------------------------------------------------------------------


def preview(engine: EngineContext, entry_id: str) -> Preview:
    """What restoring ``entry_id``'s point would change, file by file, and what can be done."""
    session = engine.session()
    entry = session.get(entry_id)
    if entry is None:
        raise NoRewindPointError(entry_id, reason="no such entry")
    target = engine.resolve_point(entry_id)
    text = prompt_text(entry_text(entry))
    result = Preview(entry_id, text, target, title=f'Rewind to before "{text}"')
    if target is None:
        result.actions = _actions(engine, entry_id, has_files=False, refused=None)
        if is_restorable(entry):
            result.missing = (PRUNED if engine.pruned_point(entry_id) else NEVER_TAKEN).line
        return result
    refused = fill_plan(engine, result, target)
    result.actions = _actions(engine, entry_id, has_files=refused is None, refused=refused)
    return result


def fill_plan(engine: EngineContext, result: Preview, target: str) -> str | None:
    """Fill ``result`` with the restore plan to ``target``: counts, warnings, each file with its
    line counts and whose work it holds; the reason when the plan refuses (then nothing else)."""
    from ledger.engine.preview_lines import Counting, blob_sizes
    from ledger.engine.preview_walk import composed_changes
    from ledger.git.restore.plan import build_plan, resolve_commit

    # The plan a restore would make, from one capture, but never handed to a restore (issue 34:
    # a preview ≤ 200 ms): no re-check stamp (only a restore reuses its scan), and the checked
    # tree walk of an earlier preview of the same two trees is reused, or the changes are
    # composed from the list's neighbouring diffs (:mod:`ledger.engine.preview_walk`) and the
    # target's side checked as the walk would (:mod:`ledger.git.restore.checked_walks`); every
    # other check runs as for a restore, so the refusals shown are the restore's. git counts the lines meanwhile (its own numbers:
    # :mod:`ledger.engine.preview_lines`).
    try:
        commit = resolve_commit(engine.repo, target)
        captured = _capture(engine)
        target_tree = str(commit.tree_id)
        counting = Counting(engine.repo, captured.tree, target_tree)
        plan = build_plan(
            engine.repo,
            commit,
            captured,
            for_preview=True,
            known=(
                (lambda: composed_changes(engine, captured.tree, target_tree, result.entry))
                if result.operation is None
                else None
            ),
        )
    except LedgerError as exc:
        result.refused = exc.message
        return exc.message
    result.current_tree = plan.current_tree
    result.counts = Counts(plan.added, plan.modified, plan.deleted)
    result.warnings = list(plan.warnings)
    touched = {*plan.added, *plan.modified, *plan.deleted}
    authors = authors_of(
        engine,
        plan.current_tree,
        plan.target_tree,
        touched,
        changes=plan.changes
        or leaf_changes(engine.repo, plan.current_tree, plan.target_tree)
        or [],
    )
    result.own, result.others = authors.own, authors.others
    mine = {c.path for c in result.own}
    by = {p: g.neighbour for g in result.others for p in g.paths}
    change = {**dict.fromkeys(plan.added, "A"), **dict.fromkeys(plan.modified, "M")}
    change.update(dict.fromkeys(plan.deleted, "D"))
    lines = counting.wait()
    for path in [*plan.added, *plan.modified, *plan.deleted][:MAX_FILES]:
        f = lines.get(path)
        result.files.append(
            PreviewFile(
                path,
                change[path],
                f.additions if f else 0,
                f.deletions if f else 0,
                bool(f and f.binary),
                path in mine,
                by[path].session_id if path in by else None,
                session_label(by[path].session_id, by[path].title) if path in by else None,
                # A binary file's sizes stand for its line counts (issue 35).
                blob_sizes(engine.repo, plan.current_tree, plan.target_tree, path)
                if f and f.binary
                else None,
            )
        )
    return None


def _actions(
    engine: EngineContext, entry_id: str, *, has_files: bool, refused: str | None
) -> list[Action]:
    why = refused or (None if has_files else _why_no_point(engine, entry_id))
    if has_files and why is None:
        why = busy_elsewhere(engine)
        has_files = why is None
    # Pi forks only from a prompt: offering a fork anywhere else would restore the files and
    # then have Pi refuse the fork (issue 32, item 3).
    no_fork = pi_fork_refusal(engine, entry_id)
    return [
        Action("files", "Restore files only (keep the conversation)", has_files, why),
        Action("both", "Restore files and conversation", has_files, why),
        Action("conversation", "Conversation only (keep the files)", True),
        Action("fork", FORK_LABEL, has_files and no_fork is None, no_fork or why),
        Action("cancel", "Cancel", True),
    ]


def pi_fork_refusal(
    engine: EngineContext, entry_id: str, position: str | None = "before"
) -> str | None:
    """Why Pi 0.73.1 would refuse to fork at ``entry_id``, or ``None`` when it forks there.

    Pi's ``AgentSessionRuntime.fork`` fires ``session_before_fork`` first and checks the entry
    only afterwards: any entry of the session for ``position: "at"`` (``/clone``), else only a
    user message (the new session holds the conversation before that prompt, and the prompt
    goes back to the editor). Anything else throws ``Invalid entry ID for forking``, which
    interactive Pi treats as fatal. So a fork it will refuse must change nothing here: no
    restore, no ``rewind-fork-pending``, no menu."""
    entry = engine.session().get(entry_id)
    if entry is None:
        return f"entry {entry_id} is not in this session"
    if position == "at" or (entry.type == "message" and entry.role == "user"):
        return None
    kind = kind_of(entry)
    return (
        f"Pi forks only from a prompt (a user message), and {entry_id} is {_article(kind)} "
        f"{kind}: fork from the prompt it answers instead"
    )


def _article(word: str) -> str:
    return "an" if word[:1] in ("a", "e", "i", "o", "u") else "a"


def busy_elsewhere(engine: EngineContext) -> str | None:
    """Why no file restore is offered now: another session's turn is running (the registry's
    word; the restore itself is refused by the turn gate, docs/design.md#never-mid-turn)."""
    from ledger.turngate import busy_here, named

    busy = busy_here(engine.repo.git_dir, engine.session().id)
    if not busy:
        return None
    return f"a turn of {named(busy)} is running here; choose again once it has ended"


def _why_no_point(engine: EngineContext, entry_id: str) -> str:
    entry = engine.session().get(entry_id)
    if entry is None or not is_restorable(entry):
        return "that entry is not a prompt, reply or summary: it has no rewind point"
    if engine.pruned_point(entry_id):
        return PRUNED.why
    if entry.type == "message" and entry.role == "user":
        return NEVER_TAKEN.why
    return (
        "no snapshot was taken for it (rewind was off, or its bridge was stopped or killed, then)"
    )


def file_diff(
    engine: EngineContext, entry_id: str, path: str, *, operation: str | None = None
) -> tuple[str, bool]:
    """The diff of ``path`` from the work tree now to ``entry_id``'s point, or with
    ``operation`` to the files before that operation (what the restore would do to it), cut at
    :data:`MAX_DIFF_BYTES`; ``(text, cut)``."""
    from ledger.engine.history import find_operation
    from ledger.git.trees import patch

    if operation is not None:
        target = find_operation(engine, operation).before
    else:
        target = engine.resolve_point(entry_id)
    if target is None:
        raise NoRewindPointError(entry_id)
    tree = engine.repo.tree_of(target)
    if tree is None:
        raise NoRewindPointError(entry_id, reason="its snapshot was pruned")
    now = _capture(engine).tree
    text = patch(engine.repo, now, tree, paths=[path])
    encoded = text.encode("utf-8", "surrogateescape")
    if len(encoded) <= MAX_DIFF_BYTES:
        return text, False
    return encoded[:MAX_DIFF_BYTES].decode("utf-8", "replace"), True


# --- the /tree and /fork menu title --------------------------------------------------------------


def _restores(counts: Counts) -> str:
    """``restores 3 files (1 added, 2 modified): a.txt, b.txt (+1 more)``."""
    paths = [*counts.added, *counts.modified, *counts.deleted]
    if not paths:
        return "no file would change"
    return f"restores {len(paths)} file{'s' if len(paths) != 1 else ''} ({counts.words}): {short_list(paths, 2)}"


def menu_title(
    engine: EngineContext,
    offered: Sequence[tuple[str, str]],
    missing: Sequence[tuple[str, str]],
) -> str:
    """``Restore Options``, then a line per offered file choice (``label``, target commit): what
    it restores (``restores 3 files: A a.txt  M b.txt (+1 more)``), the user's own work it would
    overwrite, and a line naming the choices not offered and why. One capture, only when a file
    choice is offered; any failure leaves the explanation of missing choices only."""
    lines = [M.MENU_TITLE]
    if offered:
        try:
            captured = _capture(engine)
            skipped = [s.path for s in captured.skipped]
            point = latest_point(engine)
            attribution = Attribution.of(engine)
            for label, commit in offered:
                counts, own, wrote = compare_point(
                    engine, captured.tree, commit, skipped, point, attribution
                )
                lines.append(f"{label}: {_restores(counts)}")
                # Each warning under the choice it is about (issue 35). The way back from a
                # restore is "Undo last file rewind"; from that undo itself, choosing it again.
                undo = f"choosing {MENU_UNDO} again" if label == M.UNDO else MENU_UNDO
                theirs: dict[str, tuple[Neighbour, set[str]]] = {}
                for group in wrote:
                    entry = theirs.setdefault(group.neighbour.session_id, (group.neighbour, set()))
                    entry[1].update(group.paths)
                for neighbour, paths in theirs.values():
                    warned = others_warning(neighbour.label, sorted(paths), undo=undo)
                    lines.append(f"  ⚠ {warned}")
                mine = {change.path: change for change in own}
                warning = plan_warning([mine[p] for p in sorted(mine)], undo=undo)
                if warning:
                    lines.append(f"  ⚠ {warning}")
        except (LedgerError, OSError):
            pass
    if missing:
        lines.append("Not offered: " + "; ".join(f'"{label}" ({why})' for label, why in missing))
    return "\n".join(lines)


def choice_title(
    engine: EngineContext, entry_id: str, target: str | None, undo: str | None, *, fork: bool
) -> str:
    """The ``Restore Options`` title of ``/tree`` (``fork=False``) or ``/fork`` for ``entry_id``
    with its point ``target`` and the branch's ``undo`` (:func:`menu_title`)."""
    restore = f"{M.FORK_RESTORE_ALL} / {M.FORK_CODE_ONLY}" if fork else M.TREE_RESTORE
    offered: list[tuple[str, str]] = []
    missing: list[tuple[str, str]] = []
    if target is not None:
        offered.append((restore, target))
    else:
        missing.append((restore, _why_no_point(engine, entry_id)))
    if undo is not None:
        offered.append((M.UNDO, undo))
    else:
        missing.append((M.UNDO, "no file rewind to undo on this branch"))
    return menu_title(engine, offered, missing)


__all__ = [
    "MAX_POINTS",
    "Action",
    "Counts",
    "Point",
    "PointList",
    "Preview",
    "PreviewFile",
    "StatePoint",
    "UndoPoint",
    "busy_elsewhere",
    "choice_title",
    "compare_point",
    "file_diff",
    "fill_plan",
    "list_points",
    "menu_title",
    "pi_fork_refusal",
    "preview",
]
