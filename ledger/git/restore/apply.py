"""Carrying out a restore plan: delete, write, check out submodules, verify, roll back.

Why it exists: the plan (:mod:`ledger.git.restore.plan`) says what to change; this module changes
it, remembering every path it touched so that a failure can put exactly those back, and reports
each step it reaches to :class:`Steps`, which names the step a failure happened at and is the one
place a test injects faults (docs/design.md#restore).

What :meth:`Executor.apply` does with one plan:

1. **Delete** the files and symlinks the target does not have (``unlink`` relative to
   directories opened with ``O_NOFOLLOW``, :class:`~ledger.git.restore.safety.SafeFs`), then the
   directories the deletions left empty.
2. **Write** the changed paths only: a throw-away index holding just their target entries, then
   git's own ``checkout-index`` through a staging directory (:mod:`ledger.git.restore.placement`), each
   file renamed into place whole. That is git's checkout code (attributes, filters, modes,
   symlinks as links: the bytes ``git restore`` writes) at a cost that grows with the number of
   changed paths; changed ``.gitattributes`` files are written first so that the other paths are
   converted under the target's attributes. When git could convert nothing (no attribute
   source, filter or ``core.eol`` can apply, regular files and symlinks only:
   :mod:`ledger.git.restore.direct_write`), the blobs' bytes are written into the same staging
   directory in-process instead, as git would create them, and renamed the same way; the
   verification then hashes the written bytes in-process too. Neither the user's index nor the
   private capture index is read or written by this step.
3. **Submodules** whose gitlink changed are checked out detached at the target commit.

:meth:`Executor.verify` then checks the result (:data:`Verify`), and :meth:`Executor.rollback`
puts the touched paths back as the undo snapshot holds them, verified the same way.

Invariants: only paths of the plan are touched; nothing is written through a symlink; the user's
index, HEAD and refs are never written (a submodule's HEAD is moved only to the plan's commit and
put back on rollback).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import pygit2
from pygit2.enums import FileMode

from ledger.errors import LedgerError
from ledger.git.capture.scan import PRIVATE_CONFIG, Capturer, CaptureResult
from ledger.git.private import make_private_dir, private_dir
from ledger.git.repo import GitRepo
from ledger.git.restore.direct_write import (
    blob_id,
    conversion_free,
    read_file,
    stage_plan,
    write_staged,
)
from ledger.git.restore.journal import STAGING_PREFIX
from ledger.git.restore.placement import Placer
from ledger.git.restore.plan import RestorePlan, Write, build_plan, unsafe_error
from ledger.git.restore.safety import SafeFs, WorktreeGuard, parents
from ledger.git.runner import GitRunner, chunks
from ledger.git.tree_names import Problem
from ledger.git.trees import tree_changes, tree_without
from ledger.quoting import display_name, display_names
from ledger.settings import SnapshotSettings

STEPS = (
    "before-delete",
    "mid-delete",
    "after-delete",
    "after-write",
    "after-submodules",
    "after-verify",
)
"""Names the fault hook is called with, in order (prefixed ``rollback:`` during a rollback).
``mid-delete`` comes after the first deletion, when there is one."""

FaultHook = Callable[[str], None]
"""A test-only hook called with each step name of :data:`STEPS` as a restore reaches it;
raising from it injects a failure there."""

Verify = Literal["paths", "capture"]
"""How a restore is verified: ``paths`` (default) checks every path it deleted or wrote against
the target (type, exec bit, link target, and the blob id through git's clean filters, as a capture
hashes it), at a cost that grows with the changed paths; ``capture`` takes a whole new capture and
compares it with the target tree (also sees concurrent changes elsewhere and the capture's
exclusion rules, at the cost of a full capture)."""

_VERIFY_CONFIG = (*PRIVATE_CONFIG, ("core.safecrlf", "false"))


class Steps:
    """Where a restore is: the phase a failure is reported at (:attr:`current`), and the
    points the fault hook is called at (:meth:`reach`)."""

    def __init__(self, fault: FaultHook | None = None) -> None:
        self.fault = fault
        self.prefix = ""
        """``rollback:`` while a rollback runs."""
        self.current = "plan"

    def enter(self, phase: str) -> None:
        """A phase begins (``delete``, ``write``, ``submodules``, ``verify``)."""
        self.current = self.prefix + phase

    def reach(self, step: str) -> None:
        """A point of :data:`STEPS` is reached: the fault hook runs (and may raise)."""
        self.current = self.prefix + step
        if self.fault is not None:
            self.fault(self.current)


class VerifyError(Exception):
    """The work tree does not hold what a restore wrote or deleted."""


class Executor:
    """Applies plans; remembers what it touched so that a rollback can put it back. Runs under
    the private index's lock, held by the caller (the lock is re-entrant for its captures)."""

    def __init__(self, repo: GitRepo, settings: SnapshotSettings, steps: Steps) -> None:
        self.repo = repo
        self.settings = settings
        self.steps = steps
        self.git = GitRunner(repo.root, repo.git_dir)
        self.fs = SafeFs(repo.root)
        self.staging = f"{STAGING_PREFIX}{os.getpid()}-{os.urandom(4).hex()}"
        """The staging directory's name (recorded in the journal before anything is written)."""
        self.touched: set[str] = set()
        self.heads: list[tuple[str, str | None, str]] = []
        self.deleted: Sequence[str] = ()
        """The paths the plan being applied deletes (a deleted ``.gitattributes`` sends the
        writes to git's checkout)."""

    def capture(self) -> CaptureResult:
        return Capturer(self.repo, self.settings).capture()

    # --- one plan ---------------------------------------------------------------------

    def apply(self, plan: RestorePlan) -> None:
        steps = self.steps
        steps.reach("before-delete")
        steps.enter("delete")
        writes = {w[0] for w in plan.writes}
        for i, path in enumerate(plan.deleted):
            self.touched.add(path)
            self.fs.unlink(path)
            if i == 0:
                steps.reach("mid-delete")
                steps.enter("delete")
        for directory in sorted(plan.replace_dirs, key=lambda d: -d.count("/")):
            self.touched.add(directory)
            self.fs.remove_empty_tree(directory)
        needed = {p for w in writes for p in parents(w)} | {s for s, _ in plan.submodules}
        emptied = {p for d in plan.deleted for p in parents(d)} - needed
        for directory in sorted(emptied, key=lambda d: (-d.count("/"), d)):
            self.fs.rmdir_if_empty(directory)
        steps.reach("after-delete")
        steps.enter("write")
        if plan.writes:
            self.touched.update(writes)
            self._recheck(plan)
            self.deleted = plan.deleted
            self._checkout(plan.writes)
        steps.reach("after-write")
        steps.enter("submodules")
        for path, sha in plan.submodules:
            self.touched.add(path)
            self._checkout_submodule(path, sha)
        steps.reach("after-submodules")

    def _recheck(self, plan: RestorePlan) -> None:
        """Right before git writes: nothing may have appeared in the way since the plan (git
        would remove a directory standing where a file goes, with whatever is in it)."""
        problems: list[Problem] = []
        WorktreeGuard(self.repo.root).check([], [w[0] for w in plan.writes], problems)
        if problems:
            raise unsafe_error(problems)

    def _checkout(self, writes: Sequence[Write]) -> None:
        """Write ``writes`` through a staging directory (:mod:`ledger.git.restore.placement`): each file
        is renamed into place whole. Changed ``.gitattributes`` files go first, so the other
        paths are converted under the target's attributes."""
        placer = Placer(self.repo.root, self.git, self.staging)
        staged = stage_plan(self.repo, writes, self.deleted)
        if not isinstance(staged, str):
            # Nothing git could convert (direct_write.conversion_free): the blobs' bytes are
            # what checkout-index would write; the same staging directory and renames.
            try:
                placer.create_staging()
                names = write_staged(self.repo.root, self.staging, staged)
                placer.place_all([item.path for item in staged], names)
            finally:
                with contextlib.suppress(OSError):
                    placer.remove_staging()
            return
        name = f"restore-{os.getpid()}-{os.urandom(4).hex()}.index"
        index = private_dir(self.repo.git_dir) / name
        make_private_dir(self.repo.git_dir)
        try:
            info = b"".join(
                b"%o %s\t%s\0" % (mode, oid.encode("ascii"), os.fsencode(path))
                for path, mode, oid in writes
            )
            self.git.run(
                ["update-index", "-z", "--index-info"],
                input=info,
                index=index,
                config=PRIVATE_CONFIG,
                operation="git update-index (restore index)",
            )
            paths = [w[0] for w in writes]
            first = [p for p in paths if p.rsplit("/", 1)[-1] == ".gitattributes"]
            rest = [p for p in paths if p not in set(first)] if first else paths
            placer.create_staging()
            for group in (first, rest):
                placer.write(group, index=index, config=PRIVATE_CONFIG)
        finally:
            for leftover in (index, index.with_name(index.name + ".lock")):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)
            with contextlib.suppress(OSError):
                placer.remove_staging()

    def _submodule_git(self, path: str) -> GitRunner:
        nested = pygit2.Repository(str(self.repo.root / path))
        return GitRunner(self.repo.root / path, Path(nested.path))

    def _checkout_submodule(self, path: str, sha: str) -> None:
        nested = pygit2.Repository(str(self.repo.root / path))
        ref = None if nested.head_is_detached else nested.head.name
        self.heads.append((path, ref, str(nested.head.target)))
        self._submodule_git(path).run(
            ["checkout", "-q", "--detach", sha], operation=f"git checkout ({display_name(path)})"
        )

    def revert_submodules(self) -> None:
        for path, ref, sha in reversed(self.heads):
            git = self._submodule_git(path)
            where = display_name(path)
            git.run(["checkout", "-q", "--detach", sha], operation=f"git checkout ({where})")
            if ref is not None:
                tip = git.run(
                    ["rev-parse", "-q", "--verify", ref + "^{commit}"],
                    operation=f"git rev-parse ({where})",
                    check=False,
                ).text.strip()
                if tip == sha:
                    git.run(["symbolic-ref", "HEAD", ref], operation=f"git symbolic-ref ({where})")
        self.heads.clear()

    # --- verification -----------------------------------------------------------------

    def verify(self, plan: RestorePlan, mode: Verify, *, only: frozenset[str] | None = None) -> str:
        """Check the result (see :data:`Verify`); return the tree the work tree now holds."""
        if mode == "capture":
            return self.verify_capture(plan, only=only).tree
        self.verify_paths(plan)
        return tree_without(self.repo.pygit2, plan.target_tree, plan.skipped)

    def verify_paths(self, plan: RestorePlan) -> None:
        """Every path the plan deleted is gone (or a directory the target needs), every path it
        wrote holds the target entry, every submodule is at the target commit."""
        root = os.fsencode(self.repo.root)
        wrong: list[str] = []

        def lstat(rel: str) -> os.stat_result | None:
            try:
                return os.lstat(root + b"/" + os.fsencode(rel))
            except (FileNotFoundError, NotADirectoryError):
                return None

        needed = {p for w in plan.writes for p in parents(w[0])}
        for path in plan.deleted:
            st = lstat(path)
            if st is not None and not (stat.S_ISDIR(st.st_mode) and path in needed):
                wrong.append(path)
        regular: list[tuple[str, str]] = []
        for path, mode, oid in plan.writes:
            st = lstat(path)
            if st is None:
                wrong.append(path)
            elif mode == FileMode.LINK:
                target = (
                    os.readlink(root + b"/" + os.fsencode(path))
                    if stat.S_ISLNK(st.st_mode)
                    else None
                )
                if target is None or str(pygit2.hash(target)) != oid:
                    wrong.append(path)
            elif not stat.S_ISREG(st.st_mode) or bool(st.st_mode & 0o100) != (
                mode == FileMode.BLOB_EXECUTABLE
            ):
                wrong.append(path)
            else:
                regular.append((path, oid))
        if regular and conversion_free(self.repo, [p for p, _ in regular]) is None:
            # No attribute or filter applies: git's hash of a file is the hash of its bytes.
            by_git: list[tuple[str, str]] = []
            for path, oid in regular:
                data = read_file(self.repo.root, path)
                if data is None:
                    by_git.append((path, oid))  # too large (or changed): git hashes it
                elif blob_id(data) != oid:
                    wrong.append(path)
            regular = by_git
        for chunk in chunks(regular):
            result = self.git.run(
                ["hash-object", "--", *[p for p, _ in chunk]],
                config=_VERIFY_CONFIG,
                operation="git hash-object (verify)",
            )
            hashes = result.text.split()
            wrong += [p for (p, oid), got in zip(chunk, hashes) if got != oid]
            if len(hashes) != len(chunk):
                wrong += [p for p, _ in chunk[len(hashes) :]]
        for path, sha in plan.submodules:
            try:
                head = str(pygit2.Repository(str(self.repo.root / path)).head.target)
            except (pygit2.GitError, OSError, ValueError, KeyError):
                head = None
            if head != sha:
                wrong.append(path)
        if wrong:
            raise VerifyError(mismatch(sorted(set(wrong))))

    def verify_capture(
        self, plan: RestorePlan, *, only: frozenset[str] | None = None
    ) -> CaptureResult:
        """A capture must equal the target tree, less the paths the capture skips (and those
        the plan left alone); with ``only``, just on those paths."""
        captured = self.capture()
        r = self.repo.pygit2
        expected = tree_without(
            r, plan.target_tree, [s.path for s in captured.skipped] + list(plan.skipped)
        )
        if captured.tree == expected:
            return captured
        wrong = [
            c.path
            for c in tree_changes(r, captured.tree, expected)
            if only is None or c.path in only
        ]
        if wrong:
            raise VerifyError(mismatch(wrong))
        return captured

    # --- rollback ---------------------------------------------------------------------

    def rollback(self, undo: pygit2.Commit, mode: Verify) -> None:
        """Put every path touched so far back as it is in ``undo`` (nothing else)."""
        self.steps.prefix = "rollback:"
        self.revert_submodules()
        captured = self.capture()
        only = frozenset(self.touched)
        plan = build_plan(self.repo, undo, captured, only=only)
        if not plan.noop:
            self.apply(plan)
        self.heads.clear()
        self.steps.enter("verify")
        self.verify(plan, mode, only=only)
        self.steps.reach("after-verify")


def mismatch(paths: Sequence[str]) -> str:
    """The verification failure's message, names as git quotes them where needed."""
    return f"the work tree does not match the snapshot after writing: {display_names(paths)}"


def describe_failure(exc: BaseException) -> str:
    """A failure as one line for a :class:`~ledger.errors.RestoreFailedError` message."""
    if isinstance(exc, (LedgerError, VerifyError)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


__all__ = ["STEPS", "Executor", "FaultHook", "Steps", "Verify", "VerifyError", "describe_failure"]
