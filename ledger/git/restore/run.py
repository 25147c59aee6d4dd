"""Exact, safe restore of the work tree to a snapshot commit (docs/design.md#restore).

Why it exists: the reference restore (capture, delete what the diff lists, ``git restore
--source=<c> --worktree -- .`` in the session cwd, docs/design.md#the-references-methods) misses
renamed files (D2) and content outside the cwd (D5), deletes an embedded repository's ``.git``
(D6), deletes tracked-but-ignored files through the user's real index (D15), and leaves the user
between two states when a step fails (D13) (docs/defects.md). This module is the restore's entry
point and its orchestration: it plans first and acts only on what differs.

One restore (:func:`restore_commit`), under the private index's lock so that no capture
interleaves:

1. **Plan** (:mod:`ledger.git.restore.plan`): the target commit must exist; capture the work
   tree, or reuse the capture of the plan the caller showed when every path it touches is as it
   was (:mod:`ledger.git.restore.recheck`: one scan per restore); equal trees mean nothing to do; any refusal raises
   :class:`~ledger.errors.UnsafeRestoreError` before anything changed. Enough free space for the
   files to write, or :class:`~ledger.errors.InsufficientSpaceError`.
2. **Undo snapshot** of the current capture (deduplicated against ``last_exact``, kept by the
   store), and a journal (:mod:`ledger.git.restore.journal`) naming it, opened before the first change;
   its liveness lock says "running" until the restore is over (for a caller inside a
   ``restore_intent`` block: until that block, which appends the op record, ends).
3. **Apply** (:mod:`ledger.git.restore.apply`): delete, write, check out submodules.
4. **Verify** (:data:`Verify`): by default every deleted path is gone and every written path
   holds the target entry, hashed through git's clean filters as a capture hashes it; the paths
   not touched were equal in the plan's capture, taken under the same lock. ``verify="capture"``
   takes a whole new capture and compares it with the target tree instead (it also sees
   concurrent edits elsewhere and the capture's exclusion rules, at the cost of a full capture:
   on 100k files one capture is most of a restore, and two would break the restore's speed
   target stated in ``tools/bench_restore.py``).

A failure in steps 3–4 (including one injected through the ``fault`` hook, :data:`STEPS`) rolls
back: the paths touched so far are restored to the undo snapshot the same way, submodule HEADs are
put back, that is verified too, and :class:`~ledger.errors.RestoreFailedError` names the undo
snapshot. When the rollback fails too, the journal stays open so that ``rewind undo`` can finish.

Invariants: the user's index, HEAD, branches and refs other than ``refs/pi-rewind/store`` are
never written; every git command runs at the repository root with a controlled environment
(:mod:`ledger.git.runner`); paths outside the current capture and the target tree are never
touched (D15).
"""

from __future__ import annotations

import contextlib
import time

import pygit2

from ledger.clock import Clock
from ledger.errors import (
    AlreadyRecoveredError,
    InsufficientSpaceError,
    InterruptedRestoreError,
    PlanOutgrownError,
    RestoreFailedError,
    RestoreRunningError,
)
from ledger.git.capture.index import PrivateIndex
from ledger.git.repo import GitRepo
from ledger.git.restore.apply import (
    STEPS,
    Executor,
    FaultHook,
    Steps,
    Verify,
    describe_failure,
)
from ledger.git.restore.journal import Journal, open_journal, open_journals, release_unless_held
from ledger.git.restore.placement import free_space_problem, remove_tree
from ledger.git.restore.plan import RestorePlan, build_plan, plan_restore, resolve_commit
from ledger.git.restore.recheck import still_current
from ledger.git.store.snapshot import (
    PERSISTED,
    LastExact,
    Persisted,
    commit_snapshot,
    load_last_exact,
    save_last_exact,
)
from ledger.plain import FrozenPlain
from ledger.settings import SnapshotSettings


class RestoreOutcome(FrozenPlain):
    __slots__ = ("changed", "current_commit", "ms", "plan", "tree", "undo_commit", "undo_reused")
    plan: RestorePlan
    changed: bool
    undo_commit: str | None
    """The snapshot of the state before the restore (``None`` when nothing changed)."""
    current_commit: str
    """The commit the work tree now matches: the target."""
    ms: float
    tree: str
    """The verified capture after the restore (the target tree unless paths were skipped)."""
    undo_reused: bool
    """The undo snapshot reused the latest exact snapshot (no new commit)."""

    def __init__(
        self,
        plan: RestorePlan,
        changed: bool,
        undo_commit: str | None,
        current_commit: str,
        ms: float,
        tree: str = "",
        undo_reused: bool = False,
    ) -> None:
        self._init(
            plan=plan,
            changed=changed,
            undo_commit=undo_commit,
            current_commit=current_commit,
            ms=ms,
            tree=tree,
            undo_reused=undo_reused,
        )

    @property
    def exact(self) -> bool:
        """The work tree's capture equals the target tree."""
        return self.tree == self.plan.target_tree


def restore_commit(
    repo: GitRepo,
    target_commit: str,
    settings: SnapshotSettings | None = None,
    *,
    last_exact: LastExact | Persisted | None = PERSISTED,
    clock: Clock | None = None,
    fault: FaultHook | None = None,
    verify: Verify = "paths",
    recovering: Journal | None = None,
    planned: RestorePlan | None = None,
) -> RestoreOutcome:
    """Restore the work tree exactly to ``target_commit`` (see the module docstring).

    ``last_exact``: the latest exact snapshot the undo snapshot may reuse (``PERSISTED``: the
    record in the private dir; ``None``: always a new commit). ``fault``: a test-only hook called
    with each step name of :data:`STEPS` (:data:`FaultHook`); raising from it injects a failure
    there. ``verify``:
    see :data:`Verify`. ``recovering``: the interrupted restore's journal this restore undoes
    (closed when it succeeds; any other interrupted one refuses the restore). It was chosen
    before the lock was taken, so it is judged again under the lock:
    :class:`AlreadyRecoveredError` when it is closed by now or a live process is recovering it.
    ``planned``: the plan already shown for this target (:func:`plan_restore`); under the lock
    its scan is re-checked and reused when every path it touches is as it was
    (:mod:`ledger.git.restore.recheck`), else the work tree is captured again.

    Raises :class:`AlreadyRecoveredError` / :class:`MissingCommitError` /
    :class:`UnsafeRestoreError` / :class:`InterruptedRestoreError` / :class:`RestoreRunningError`
    (a live journal still ``writing``: never expected under the lock) /
    :class:`InsufficientSpaceError` (and capture errors) with nothing changed, or
    :class:`RestoreFailedError` after rolling back (or, when the rollback failed too, with the
    journal left open so that ``rewind undo`` can finish the job).
    """
    started = time.perf_counter()
    settings = settings or SnapshotSettings()
    commit = resolve_commit(repo, target_commit)
    with PrivateIndex(repo.git_dir).locked():
        if recovering is not None:
            # ``recovering`` was chosen before this lock was taken: another process may have
            # recovered it since (its own recovery journal maybe still held until its record
            # is appended). Judged again here, under the lock, before anything changes.
            _require_still_interrupted(repo, recovering)
        # Under the lock no other restore writes files: a journal still "writing" is a dead one
        # (a live owner there would be a bug; it is refused as running, never as interrupted).
        _refuse_if_interrupted(repo, recovering)
        if recovering is not None:  # what the interrupted restore (and recoveries of it) had staged
            for dead in [recovering, *_dead_recoveries_of(repo, recovering)]:
                if dead.staging:
                    remove_tree(repo.root, dead.staging)
        steps = Steps(fault)
        executor = Executor(repo, settings, steps)
        plan = _reusable(repo, planned, str(commit.id), settings)
        if plan is None:
            plan = build_plan(repo, commit, executor.capture())
            if planned is not None and planned.bounded:
                _refuse_beyond(planned, plan)
        if plan.noop:
            if plan.current_tree == plan.target_tree:
                save_last_exact(repo, LastExact(plan.target_commit, plan.target_tree))
            if recovering is not None:
                _close_recovery_of(repo, recovering)
            return RestoreOutcome(
                plan,
                False,
                None,
                plan.target_commit,
                (time.perf_counter() - started) * 1000.0,
                tree=plan.current_tree,
            )
        _check_space(repo, plan)
        last = load_last_exact(repo) if isinstance(last_exact, Persisted) else last_exact
        undo = commit_snapshot(repo, plan.current_tree, last_exact=last, clock=clock)
        now_ms = clock.now_ms() if clock is not None else int(time.time() * 1000)
        journal = open_journal(
            repo,
            undo=undo.commit,
            undo_tree=undo.tree,
            target=plan.target_commit,
            target_tree=plan.target_tree,
            staging=executor.staging,
            now_ms=now_ms,
            recovering=recovering.id if recovering is not None else None,
        )
        # The journal's liveness lock: kept by the caller's restore_intent block until its record
        # is appended, released here otherwise (and on every failure path).
        try:
            try:
                executor.apply(plan)
                steps.enter("verify")
                after = executor.verify(plan, verify)
                steps.reach("after-verify")
            except BaseException as exc:
                failed_at = steps.current
                try:
                    undo_commit = repo.commit(undo.commit)
                    if undo_commit is None:  # just written: only a broken object store loses it
                        raise RuntimeError(f"the undo snapshot {undo.commit} cannot be read")
                    executor.rollback(undo_commit, verify)
                except BaseException as rollback_exc:
                    journal.mark_failed(
                        f"{describe_failure(exc)} (at {failed_at}); rollback: {describe_failure(rollback_exc)}"
                    )
                    if not isinstance(exc, Exception):
                        raise
                    session = journal.session or "SESSION"
                    raise RestoreFailedError(
                        f"{describe_failure(exc)} (at {failed_at}); the rollback failed too: "
                        f"{describe_failure(rollback_exc)}",
                        rolled_back_to=None,
                        hint=f"your files before the restore are kept (snapshot {undo.commit[:12]}); once the "
                        f"cause is fixed, 'rewind undo {session}' brings every one of them back",
                    ) from exc
                journal.close()
                save_last_exact(repo, LastExact(undo.commit, undo.tree))
                if not isinstance(exc, Exception):
                    raise
                raise RestoreFailedError(
                    f"{describe_failure(exc)} (at {failed_at})", rolled_back_to=undo.commit
                ) from exc
            if recovering is not None:
                _close_recovery_of(repo, recovering, own=journal)
            if journal.session is not None:
                journal.mark_done()  # closed once the caller's record is found (journal.settle)
            else:
                journal.close()
            if after == plan.target_tree:
                save_last_exact(repo, LastExact(plan.target_commit, plan.target_tree))
            return RestoreOutcome(
                plan,
                True,
                undo.commit,
                plan.target_commit,
                (time.perf_counter() - started) * 1000.0,
                tree=after,
                undo_reused=undo.reused,
            )
        finally:
            release_unless_held(journal)


def _refuse_beyond(planned: RestorePlan, plan: RestorePlan) -> None:
    """A bounded plan (:attr:`RestorePlan.bounded`): the plan made under the lock may change
    only paths the planned one changes, each still holding what it held then (a file changed
    since is someone's new work); anything else refuses, before anything is written."""
    allowed = {*planned.added, *planned.modified, *planned.deleted}
    beyond = {*plan.added, *plan.modified, *plan.deleted} - allowed
    held = {c.path: c.old for c in planned.changes}
    beyond.update(c.path for c in plan.changes if c.path in held and held[c.path] != c.old)
    if beyond:
        raise PlanOutgrownError(sorted(beyond))


def _reusable(
    repo: GitRepo, planned: RestorePlan | None, target: str, settings: SnapshotSettings
) -> RestorePlan | None:
    """``planned``, when its scan may stand for a capture under this lock (one scan per
    restore, :mod:`ledger.git.restore.recheck`): same target, same capture settings, and every
    path it touches as the plan found it."""
    if planned is None or planned.scan is None or planned.target_commit != target:
        return None
    if planned.scan.settings != settings or not still_current(repo, planned.scan):
        return None
    return planned


def _require_still_interrupted(repo: GitRepo, recovering: Journal) -> None:
    """Under the capture lock: ``recovering`` must still be open with its owner gone, and no
    live process may be recovering it; else :class:`AlreadyRecoveredError` (or
    :class:`RestoreRunningError`), with nothing changed."""
    journals = open_journals(repo)[0]
    live = [j for j in journals if j.recovering == recovering.id and j.owner_alive()]
    now = next((j for j in journals if j.id == recovering.id), None)
    if now is None or live:
        by = live[-1].pid if live else None
        raise AlreadyRecoveredError(recovering.target, recovering.started, by_pid=by)
    if now.owner_alive():  # never expected: it was chosen with its owner gone
        raise RestoreRunningError(now.pid, repo.root, target=now.target, started=now.started)


def _dead_recoveries_of(
    repo: GitRepo, recovered: Journal, own: Journal | None = None
) -> list[Journal]:
    """The open, earlier recoveries of ``recovered`` whose owner is gone (interrupted ones).
    A journal whose owner is alive is never among them: it is another process's running (or
    not yet recorded) restore, and ``own`` is this restore's."""
    return [
        j
        for j in open_journals(repo)[0]
        if j.recovering == recovered.id and (own is None or j.id != own.id) and not j.owner_alive()
    ]


def _close_recovery_of(repo: GitRepo, recovered: Journal, own: Journal | None = None) -> None:
    """``recovered`` is undone: close it and any earlier, interrupted recovery of it (never
    ``own``, nor a recovery whose owner is alive)."""
    for journal in _dead_recoveries_of(repo, recovered, own):
        journal.close()
    recovered.close()


def _refuse_if_interrupted(repo: GitRepo, recovering: Journal | None) -> None:
    writing = [
        j
        for j in open_journals(repo)[0]
        if j.state == "writing"
        and (recovering is None or recovering.id not in (j.id, j.recovering))
    ]
    if not writing:
        return
    j = writing[-1]
    if j.owner_alive():
        raise RestoreRunningError(j.pid, repo.root, target=j.target, started=j.started)
    raise InterruptedRestoreError(
        j.undo, j.target, session=j.session, entry=j.entry, started=j.started, state=j.state
    )


def _check_space(repo: GitRepo, plan: RestorePlan) -> None:
    needed = 0
    odb = repo.pygit2.odb
    for _path, _mode, oid in plan.writes:
        with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
            needed += odb.read_header(oid)[1]
    problem = free_space_problem(repo.root, needed)
    if problem is not None:
        raise InsufficientSpaceError(repo.root, *problem)


__all__ = [
    "STEPS",
    "FaultHook",
    "RestoreOutcome",
    "RestorePlan",
    "Verify",
    "plan_restore",
    "restore_commit",
]
