"""Exact, safe restore of the work tree to a snapshot commit (rewind-v2.md §8, issue 4).

Why it exists: the reference restore (capture, delete what the diff lists, ``git restore
--source=<c> --worktree -- .`` in the session cwd) misses renamed files (D2) and content outside the
cwd (D5), deletes an embedded repository's ``.git`` (D6), deletes tracked-but-ignored files
through the user's real index (D15), and leaves the user between two states when a step fails
(D13). This module plans first and acts only on what differs.

One restore (:func:`restore_commit`), under the private index's lock so that no capture
interleaves:

1. **Plan** (:func:`plan_restore`): the target commit must exist; capture the work tree; equal
   trees mean nothing to do. Otherwise diff the trees without rename detection, at the root,
   leaf by leaf, validating every target entry read (:mod:`ledger.git.restore_safety`); refuse
   submodule additions and removals; leave paths under the capture's protected or skipped paths
   alone; check the work tree with ``lstat`` (no write or delete through a symlink, no file of
   the user's that the capture does not hold is replaced, nothing inside a nested repository).
   Any refusal raises :class:`~ledger.errors.UnsafeRestoreError` before anything changed.
2. **Undo snapshot** of the current capture (deduplicated against ``last_exact``, kept by the
   store).
3. **Delete** the files and symlinks the target does not have (``unlink`` relative to
   directories opened with ``O_NOFOLLOW``), then the directories the deletions left empty.
4. **Write** the changed paths only: a throw-away index holding just their target entries, then
   ``git -c core.autocrlf=false checkout-index -f`` on it. That is git's own checkout code
   (attributes, filters, modes, symlinks as links: the bytes ``git restore`` writes) at a cost
   that grows with the number of changed paths; changed ``.gitattributes`` files are written
   first so that the other paths are converted under the target's attributes. Neither the
   user's index nor the private capture index is read or written by this step.
5. **Submodules** whose gitlink changed are checked out detached at the target commit.
6. **Verify** (:data:`Verify`): by default every deleted path is gone and every written path
   holds the target entry, hashed through git's clean filters as a capture hashes it; the paths
   not touched were equal in the plan's capture, taken under the same lock. ``verify="capture"``
   takes a whole new capture and compares it with the target tree instead (it also sees
   concurrent edits elsewhere and the capture's exclusion rules, at the cost of a full capture:
   on 100k files one capture is most of a restore, and two break the speed target of issue 4).

A failure in steps 3–6 (including the test-only ``fault`` hook) rolls back: the paths touched so
far are restored to the undo snapshot the same way, submodule HEADs are put back, that is
verified too, and :class:`~ledger.errors.RestoreFailedError` names the undo snapshot.

Invariants: the user's index, HEAD, branches and refs other than ``refs/pi-rewind/store`` are
never written; every git command runs at the repository root with a controlled environment
(:mod:`ledger.git.runner`); paths outside the current capture and the target tree are never
touched (D15).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pygit2

from ledger.clock import Clock
from ledger.errors import (
    InsufficientSpaceError,
    InterruptedRestoreError,
    LedgerError,
    MissingCommitError,
    RestoreFailedError,
    UnsafeRestoreError,
)
from ledger.git.capture import PRIVATE_CONFIG, Capturer, CaptureResult, capture_tree
from ledger.git.index import PrivateIndex, private_dir
from ledger.git.journal import STAGING_PREFIX, Journal, current_intent, open_journal, open_journals
from ledger.git.placement import Placer, free_space_problem, remove_tree
from ledger.git.repo import GitRepo, is_inside
from ledger.git.restore_safety import (
    EXEC_MODE,
    GITLINK_MODE,
    LINK_MODE,
    Change,
    Problem,
    SafeFs,
    WorktreeGuard,
    parents,
    tree_changes,
    tree_without,
    under,
)
from ledger.git.runner import GitRunner
from ledger.git.snapshot import (
    PERSISTED,
    LastExact,
    _Persisted,
    commit_snapshot,
    load_last_exact,
    save_last_exact,
)
from ledger.settings import SnapshotSettings

STEPS = (
    "before-delete",
    "mid-delete",
    "after-delete",
    "after-write",
    "after-submodules",
    "after-verify",
)
"""Names the ``fault`` hook is called with, in order (prefixed ``rollback:`` during a rollback).
``mid-delete`` comes after the first deletion, when there is one."""

Verify = Literal["paths", "capture"]
"""How a restore is verified: ``paths`` (default) checks every path it deleted or wrote against
the target (type, exec bit, link target, and the blob id through git's clean filters, as a capture
hashes it), at a cost that grows with the changed paths; ``capture`` takes a whole new capture and
compares it with the target tree (also sees concurrent changes elsewhere and the capture's
exclusion rules, at the cost of a full capture)."""

_VERIFY_CONFIG = (*PRIVATE_CONFIG, ("core.safecrlf", "false"))
_ARG_CHUNK = 400

SUBMODULE_HINT = (
    "restore to a point with the same submodules, or add/remove the submodule with git first"
)


# --- results ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestorePlan:
    """What a restore to ``target_commit`` will change. Paths are repository-relative,
    ``/``-separated; a file↔directory change is a deletion plus additions."""

    target_commit: str
    target_tree: str
    current_tree: str
    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    """Changed paths left alone because they lie under a protected or skipped path of the
    current capture (protected directories, too-large files, repositories without commits)."""
    warnings: tuple[str, ...] = ()
    submodules: tuple[tuple[str, str], ...] = ()
    """``(path, commit)`` of submodules to check out detached (also listed in ``modified``)."""
    writes: tuple[tuple[str, int, str], ...] = field(default=(), repr=False, compare=False)
    """``(path, mode, blob)`` written from the target (additions and modifications)."""
    replace_dirs: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """Directories (holding only files being deleted) that a file of the target replaces."""

    @property
    def noop(self) -> bool:
        return not (self.added or self.modified or self.deleted)

    def to_json(self) -> dict[str, list[str]]:
        return {
            "added": list(self.added),
            "modified": list(self.modified),
            "deleted": list(self.deleted),
        }


@dataclass(frozen=True)
class RestoreOutcome:
    plan: RestorePlan
    changed: bool
    undo_commit: str | None
    """The snapshot of the state before the restore (``None`` when nothing changed)."""
    current_commit: str
    """The commit the work tree now matches: the target."""
    ms: float
    tree: str = ""
    """The verified capture after the restore (the target tree unless paths were skipped)."""
    undo_reused: bool = False
    """The undo snapshot reused the latest exact snapshot (no new commit)."""

    @property
    def exact(self) -> bool:
        """The work tree's capture equals the target tree."""
        return self.tree == self.plan.target_tree


class _VerifyError(Exception):
    pass


# --- diffs ---------------------------------------------------------------------------------


def _peel_tree(repo: GitRepo, sha: str) -> str:
    try:
        obj = repo.pygit2.get(sha)
    except (ValueError, TypeError, pygit2.GitError):
        obj = None
    if isinstance(obj, pygit2.Commit):
        if _is_tree(repo, str(obj.tree_id)):
            return str(obj.tree_id)
    elif isinstance(obj, pygit2.Tree):
        return str(obj.id)
    raise MissingCommitError(sha)


def diff_trees(
    repo: GitRepo, from_tree: str, to_tree: str
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(added, modified, deleted)`` leaf paths from ``from_tree`` to ``to_tree`` (trees or
    commits), without rename detection (as ``git diff-tree -r --no-renames``)."""
    changes = tree_changes(repo.pygit2, _peel_tree(repo, from_tree), _peel_tree(repo, to_tree))
    return _split(changes)


def _split(changes: Iterable[Change]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    added, modified, deleted = [], [], []
    for change in changes:
        {"added": added, "modified": modified, "deleted": deleted}[change.kind].append(change.path)
    return tuple(added), tuple(modified), tuple(deleted)


def patch(repo: GitRepo, from_tree: str, to_tree: str) -> str:
    """Unified diff text from ``from_tree`` to ``to_tree`` (trees or commits), no renames."""
    a, b = _peel_tree(repo, from_tree), _peel_tree(repo, to_tree)
    result = GitRunner(repo.root, repo.git_dir).run(
        [
            "diff-tree",
            "-r",
            "-p",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            a,
            b,
        ],
        operation="git diff-tree",
        config=(("diff.noprefix", "false"), ("diff.mnemonicPrefix", "false")),
    )
    return result.text


# --- planning ------------------------------------------------------------------------------


def _resolve_commit(repo: GitRepo, sha: str) -> pygit2.Commit:
    try:
        obj = repo.pygit2.get(sha)
    except (ValueError, TypeError, pygit2.GitError):
        obj = None
    if not isinstance(obj, pygit2.Commit) or not _is_tree(repo, str(obj.tree_id)):
        raise MissingCommitError(sha)
    return obj


def _is_tree(repo: GitRepo, oid: str) -> bool:
    """The object exists and is a tree (its content is checked later, entry by entry)."""
    try:
        kind, _size = repo.pygit2.odb.read_header(oid)
    except (KeyError, ValueError, pygit2.GitError):
        return False
    return kind == pygit2.enums.ObjectType.TREE


def _ignore_case(repo: GitRepo) -> bool:
    try:
        return bool(repo.pygit2.config.get_bool("core.ignorecase"))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def _recorded_on(repo: GitRepo, commit: pygit2.Commit) -> list[str]:
    """Warnings when the snapshot's ``Head:``/``Branch:`` lines differ from HEAD now."""
    head = branch = None
    for line in commit.message.splitlines()[1:]:
        if line.startswith("Head: "):
            head = line[6:].strip()
        elif line.startswith("Branch: "):
            branch = line[8:].strip()
    if head is None and branch is None:
        return []
    r = repo.pygit2
    now_head = now_branch = None
    with contextlib.suppress(pygit2.GitError, KeyError, ValueError):
        if not r.head_is_unborn:
            now_head = str(r.head.target)
            if not r.head_is_detached:
                now_branch = r.head.shorthand

    def where(name: str | None) -> str:
        return f"branch {name}" if name else "a detached HEAD"

    warnings = []
    if branch != now_branch:
        warnings.append(
            f"this rewind point was recorded on {where(branch)}; you are on "
            f"{where(now_branch)} (only files are restored: HEAD and branches stay)"
        )
    if head is not None and head != now_head:
        now = now_head[:12] if now_head else "unborn"
        warnings.append(f"this rewind point was recorded at HEAD {head[:12]}; HEAD is now {now}")
    return warnings


def _unsafe(problems: Sequence[Problem]) -> UnsafeRestoreError:
    """One error for all problems: the first reason, with every path that has it."""
    reason = problems[0].reason
    paths = list(dict.fromkeys(p.path for p in problems if p.reason == reason))
    others = sum(1 for p in problems if p.reason != reason)
    if others:
        reason += f" (and {others} other problem{'s' if others > 1 else ''})"
    return UnsafeRestoreError(reason, paths)


def _build_plan(
    repo: GitRepo,
    commit: pygit2.Commit,
    captured: CaptureResult,
    *,
    only: frozenset[str] | None = None,
) -> RestorePlan:
    """The plan from ``captured`` to ``commit``; ``only`` limits it to those paths (rollback)."""
    r = repo.pygit2
    target_tree = str(commit.tree_id)
    base = {
        "target_commit": str(commit.id),
        "target_tree": target_tree,
        "current_tree": captured.tree,
        "warnings": tuple(_recorded_on(repo, commit)),
    }
    if captured.tree == target_tree:
        return RestorePlan(**base)

    problems: list[Problem] = []
    changes = tree_changes(
        r,
        captured.tree,
        target_tree,
        validate=True,
        ignore_case=_ignore_case(repo),
        problems=problems,
    )
    if problems:
        raise _unsafe(problems)
    if only is not None:
        changes = [c for c in changes if c.path in only]

    submodule_changes = [
        c.path
        for c in changes
        if (c.old is not None and c.old.mode == GITLINK_MODE)
        != (c.new is not None and c.new.mode == GITLINK_MODE)
    ]
    if submodule_changes:
        raise UnsafeRestoreError(
            "adding or removing submodules is not supported", submodule_changes, hint=SUBMODULE_HINT
        )

    skip_prefixes = [s.path for s in captured.skipped]
    kept: list[Change] = []
    skipped: list[str] = []
    for change in changes:
        if skip_prefixes and under(change.path, skip_prefixes):
            skipped.append(change.path)
        else:
            kept.append(change)

    deletes = [c.path for c in kept if c.new is None]
    writes = [
        (c.path, c.new.mode, c.new.oid)
        for c in kept
        if c.new is not None and c.new.mode != GITLINK_MODE
    ]
    submodules = [
        (c.path, c.new.oid) for c in kept if c.new is not None and c.new.mode == GITLINK_MODE
    ]

    missing = []
    for path, _mode, oid in writes:
        try:
            kind, _size = r.odb.read_header(oid)
        except (KeyError, ValueError, pygit2.GitError):
            kind = None
        if kind != pygit2.enums.ObjectType.BLOB:
            missing.append(path)
    if missing:
        raise UnsafeRestoreError(
            "the snapshot's file objects are missing or not files",
            missing,
            hint="the snapshot is incomplete (pruned?); choose another rewind point",
        )

    guard = WorktreeGuard(repo.root)
    problems = []
    replace_dirs = guard.check(deletes, [w[0] for w in writes], problems)
    problems += _submodule_problems(repo, guard, submodules)
    if problems:
        raise _unsafe(problems)
    added_paths = [
        c.path for c in kept if c.old is None and c.new is not None and c.new.mode != GITLINK_MODE
    ]
    uncaptured = _uncaptured(repo, guard, added_paths)
    if uncaptured:
        writes = [w for w in writes if w[0] not in uncaptured]
        kept = [c for c in kept if c.path not in uncaptured]
        skipped += sorted(uncaptured)
    kept_ignored = _ignored_after(repo, target_tree, deletes, kept) if deletes else set()
    if kept_ignored:
        deletes = [d for d in deletes if d not in kept_ignored]
        kept = [c for c in kept if c.path not in kept_ignored]
        skipped += sorted(kept_ignored)
        uncaptured |= kept_ignored
    forbidden = _forbidden_paths(repo, [*deletes, *(w[0] for w in writes), *replace_dirs])
    if forbidden:
        raise UnsafeRestoreError(
            "the restore would change files inside a git directory or Pi's agent dir",
            forbidden,
            hint="nothing was changed; keep the agent dir out of the repository "
            "or ignore it in .gitignore",
        )

    warnings = list(base.pop("warnings"))
    protected_skips = [p for p in skipped if p not in uncaptured]
    if protected_skips:
        shown = ", ".join(protected_skips[:5]) + (
            f" (and {len(protected_skips) - 5} more)" if len(protected_skips) > 5 else ""
        )
        warnings.append(f"left alone (under protected or skipped paths): {shown}")
    if uncaptured:
        names = sorted(uncaptured)
        shown = ", ".join(names[:5]) + (f" (and {len(names) - 5} more)" if len(names) > 5 else "")
        warnings.append(
            f"left alone (ignored or protected now; a restore never writes those): {shown}"
        )
    added, modified, deleted = _split(kept)
    return RestorePlan(
        **base,
        added=added,
        modified=modified,
        deleted=deleted,
        skipped=tuple(skipped),
        warnings=tuple(warnings),
        submodules=tuple(submodules),
        writes=tuple(writes),
        replace_dirs=tuple(replace_dirs),
    )


def _uncaptured(repo: GitRepo, guard: WorktreeGuard, added: Sequence[str]) -> set[str]:
    """Paths the target adds that the work tree's capture does not hold although they exist
    (an ignored ``.env``, a protected or too-large file), or that are ignored now.

    A restore leaves both alone: overwriting them would destroy bytes no undo snapshot holds
    (the capture skips them), and writing an ignored path that is absent would leave a file the
    undo could not see to remove (docs/design.md#ignored-files)."""
    if not added:
        return set()

    def present(
        path: str,
    ) -> bool:  # a file or link at ``path`` itself, reached through real directories
        for parent in parents(path):
            st = guard.lstat(parent)
            if st is None or not stat.S_ISDIR(st.st_mode):
                return False
        st = guard.lstat(path)
        return st is not None and not stat.S_ISDIR(st.st_mode)

    found = {p for p in added if present(p)}
    for path in added:
        if path not in found:
            try:
                if repo.pygit2.path_is_ignored(path):
                    found.add(path)
            except (pygit2.GitError, ValueError) as exc:
                raise UnsafeRestoreError(
                    "cannot tell whether a path is ignored now", [path], hint=str(exc)
                ) from exc
    return found


def _ignored_after(
    repo: GitRepo, target_tree: str, deletes: Sequence[str], changes: Sequence[Change]
) -> set[str]:
    """Paths the plan would delete that the target's own ignore rules ignore: files of the user's
    that a restore had made visible by removing a ``.gitignore`` (an ignored ``.env``). The
    target's snapshot could never have held them, so deleting them would not make the work tree
    more like it; they are left alone (docs/design.md#ignored-files).

    Only needed when the plan changes a ``.gitignore``; the target's rule files along the
    deleted paths are written to a scratch work tree in our private dir, and git's own
    ``check-ignore`` answers there."""
    if not any(c.path.rsplit("/", 1)[-1] == ".gitignore" for c in changes):
        return set()
    r = repo.pygit2
    root_tree = r.get(target_tree)
    directories = {""} | {p for d in deletes for p in parents(d)}
    scratch = private_dir(repo.git_dir) / f"ignore-scratch-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        scratch.mkdir(parents=True)
        for directory in directories:
            path = f"{directory}/.gitignore" if directory else ".gitignore"
            try:
                entry = root_tree[path] if isinstance(root_tree, pygit2.Tree) else None
            except KeyError:
                continue
            blob = (
                r.get(entry.id)
                if entry is not None and entry.filemode in (0o100644, 0o100755)
                else None
            )
            if isinstance(blob, pygit2.Blob):
                target = scratch / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(blob.data)
        result = GitRunner(scratch, repo.git_dir).run(
            ["check-ignore", "--no-index", "-z", "--stdin"],
            input=b"".join(os.fsencode(d) + b"\0" for d in deletes),
            operation="git check-ignore",
            check=False,
            extra_env={"GIT_LITERAL_PATHSPECS": "0"},
        )  # check-ignore refuses pathspec magic; paths are not globs
        if result.returncode not in (0, 1):
            return set()  # cannot tell: delete as the plan says (the undo snapshot holds them)
        return {os.fsdecode(p) for p in result.stdout.split(b"\0") if p}
    finally:
        remove_tree(scratch.parent, scratch.name)


def _forbidden_paths(repo: GitRepo, paths: Sequence[str]) -> list[str]:
    """Paths of a plan inside a git directory or Pi's agent dir (defence in depth: discovery
    already refuses layouts with a git dir in the work tree, and tree validation ``.git``)."""
    intent = current_intent()
    agent = (
        intent.agent_dir
        or os.environ.get("PI_CODING_AGENT_DIR")
        or os.path.expanduser("~/.pi/agent")
    )
    roots = {str(repo.git_dir), str(repo.common_dir), os.path.realpath(agent)}
    inside = [d for d in roots if is_inside(d, repo.root)]
    if not inside:
        return []
    root = str(repo.root)
    bad = []
    for path in paths:
        full = root + "/" + path
        if any(is_inside(full, d) or is_inside(d, full) for d in inside):
            bad.append(path)
    return bad


def _submodule_problems(
    repo: GitRepo, guard: WorktreeGuard, submodules: Sequence[tuple[str, str]]
) -> list[Problem]:
    problems = []
    for path, sha in submodules:
        leading = [guard.lstat(p) for p in parents(path)]
        if any(st is None or not stat.S_ISDIR(st.st_mode) for st in leading):
            problems.append(
                Problem("a submodule's leading directory is missing or a symlink", path)
            )
            continue
        try:
            nested = pygit2.Repository(str(repo.root / path))
            found = nested.get(sha)
        except (pygit2.GitError, OSError, ValueError, KeyError):
            problems.append(Problem("a submodule to update is not checked out", path))
            continue
        if not isinstance(found, pygit2.Commit):
            problems.append(
                Problem(
                    "a submodule commit of the snapshot is not available in "
                    "the submodule (fetch it there first)",
                    path,
                )
            )
    return problems


def plan_restore(
    repo: GitRepo, target_commit: str, settings: SnapshotSettings | None = None
) -> RestorePlan:
    """Capture the work tree and plan a restore to ``target_commit`` without changing anything.

    Raises :class:`MissingCommitError` or :class:`UnsafeRestoreError` (and the capture's own
    errors, e.g. a dirty submodule)."""
    commit = _resolve_commit(repo, target_commit)
    return _build_plan(repo, commit, capture_tree(repo, settings))


# --- acting --------------------------------------------------------------------------------


def _capture_held(repo: GitRepo, settings: SnapshotSettings) -> CaptureResult:
    return Capturer(repo, settings).capture()  # the index lock is re-entrant


class _Executor:
    """Applies plans; remembers what it touched so that a rollback can put it back."""

    def __init__(
        self, repo: GitRepo, settings: SnapshotSettings, fault: Callable[[str], None] | None
    ) -> None:
        self.repo = repo
        self.settings = settings
        self.git = GitRunner(repo.root, repo.git_dir)
        self.fs = SafeFs(repo.root)
        self._fault = fault
        self.staging = f"{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.prefix = ""
        self.step = "plan"
        self.touched: set[str] = set()
        self.heads: list[tuple[str, str | None, str]] = []

    def capture(self) -> CaptureResult:
        return _capture_held(self.repo, self.settings)

    def _at(self, step: str) -> None:
        self.step = self.prefix + step
        if self._fault is not None:
            self._fault(self.step)

    # --- one plan ---------------------------------------------------------------------

    def apply(self, plan: RestorePlan) -> None:
        self._at("before-delete")
        self.step = self.prefix + "delete"
        writes = {w[0] for w in plan.writes}
        for i, path in enumerate(plan.deleted):
            self.touched.add(path)
            self.fs.unlink(path)
            if i == 0:
                self._at("mid-delete")
                self.step = self.prefix + "delete"
        for directory in sorted(plan.replace_dirs, key=lambda d: -d.count("/")):
            self.touched.add(directory)
            self.fs.remove_empty_tree(directory)
        needed = {p for w in writes for p in parents(w)} | {s for s, _ in plan.submodules}
        emptied = {p for d in plan.deleted for p in parents(d)} - needed
        for directory in sorted(emptied, key=lambda d: (-d.count("/"), d)):
            self.fs.rmdir_if_empty(directory)
        self._at("after-delete")
        self.step = self.prefix + "write"
        if plan.writes:
            self.touched.update(writes)
            self._recheck(plan)
            self._checkout(plan.writes)
        self._at("after-write")
        self.step = self.prefix + "submodules"
        for path, sha in plan.submodules:
            self.touched.add(path)
            self._checkout_submodule(path, sha)
        self._at("after-submodules")

    def _recheck(self, plan: RestorePlan) -> None:
        """Right before git writes: nothing may have appeared in the way since the plan (git
        would remove a directory standing where a file goes, with whatever is in it)."""
        problems: list[Problem] = []
        WorktreeGuard(self.repo.root).check([], [w[0] for w in plan.writes], problems)
        if problems:
            raise _unsafe(problems)

    def _checkout(self, writes: Sequence[tuple[str, int, str]]) -> None:
        """Write ``writes`` through a staging directory (:mod:`ledger.git.placement`): each file
        is renamed into place whole. Changed ``.gitattributes`` files go first, so the other
        paths are converted under the target's attributes."""
        name = f"restore-{os.getpid()}-{secrets.token_hex(4)}.index"
        index = private_dir(self.repo.git_dir) / name
        index.parent.mkdir(parents=True, exist_ok=True)
        placer = Placer(self.repo.root, self.git, self.staging)
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
            ["checkout", "-q", "--detach", sha], operation=f"git checkout ({path})"
        )

    def revert_submodules(self) -> None:
        for path, ref, sha in reversed(self.heads):
            git = self._submodule_git(path)
            git.run(["checkout", "-q", "--detach", sha], operation=f"git checkout ({path})")
            if ref is not None:
                tip = git.run(
                    ["rev-parse", "-q", "--verify", ref + "^{commit}"],
                    operation=f"git rev-parse ({path})",
                    check=False,
                ).text.strip()
                if tip == sha:
                    git.run(["symbolic-ref", "HEAD", ref], operation=f"git symbolic-ref ({path})")
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
            elif mode == LINK_MODE:
                target = (
                    os.readlink(root + b"/" + os.fsencode(path))
                    if stat.S_ISLNK(st.st_mode)
                    else None
                )
                if target is None or str(pygit2.hash(target)) != oid:
                    wrong.append(path)
            elif not stat.S_ISREG(st.st_mode) or bool(st.st_mode & 0o100) != (mode == EXEC_MODE):
                wrong.append(path)
            else:
                regular.append((path, oid))
        for i in range(0, len(regular), _ARG_CHUNK):
            chunk = regular[i : i + _ARG_CHUNK]
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
            raise _VerifyError(_mismatch(sorted(set(wrong))))

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
            raise _VerifyError(_mismatch(wrong))
        return captured

    # --- rollback ---------------------------------------------------------------------

    def rollback(self, undo: pygit2.Commit, mode: Verify) -> None:
        """Put every path touched so far back as it is in ``undo`` (nothing else)."""
        self.prefix = "rollback:"
        self.revert_submodules()
        captured = self.capture()
        only = frozenset(self.touched)
        plan = _build_plan(self.repo, undo, captured, only=only)
        if not plan.noop:
            self.apply(plan)
        self.heads.clear()
        self.step = self.prefix + "verify"
        self.verify(plan, mode, only=only)
        self._at("after-verify")


def _mismatch(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:5]) + (f" (and {len(paths) - 5} more)" if len(paths) > 5 else "")
    return f"the work tree does not match the snapshot after writing: {shown}"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, LedgerError):
        return str(exc)
    if isinstance(exc, _VerifyError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def restore_commit(
    repo: GitRepo,
    target_commit: str,
    settings: SnapshotSettings | None = None,
    *,
    last_exact: LastExact | _Persisted | None = PERSISTED,
    clock: Clock | None = None,
    fault: Callable[[str], None] | None = None,
    verify: Verify = "paths",
    recovering: Journal | None = None,
) -> RestoreOutcome:
    """Restore the work tree exactly to ``target_commit`` (see the module docstring).

    ``last_exact``: the latest exact snapshot the undo snapshot may reuse (``PERSISTED``: the
    record in the private dir; ``None``: always a new commit). ``fault``: a test-only hook called
    with each step name of :data:`STEPS`; raising from it injects a failure there. ``verify``:
    see :data:`Verify`. ``recovering``: the interrupted restore's journal this restore undoes
    (closed when it succeeds; any other open journal refuses the restore).

    Raises :class:`MissingCommitError` / :class:`UnsafeRestoreError` /
    :class:`InterruptedRestoreError` / :class:`InsufficientSpaceError` (and capture errors) with
    nothing changed, or :class:`RestoreFailedError` after rolling back (or, when the rollback
    failed too, with the journal left open so that ``rewind undo`` can finish the job).
    """
    started = time.perf_counter()
    settings = settings or SnapshotSettings()
    commit = _resolve_commit(repo, target_commit)
    with PrivateIndex(repo.git_dir).locked():
        # Under the lock no other restore runs: a journal still "writing" is a dead one.
        _refuse_if_interrupted(repo, recovering)
        if recovering is not None:  # what the interrupted restore (and recoveries of it) had staged
            for dead in [
                recovering,
                *(j for j in open_journals(repo)[0] if j.recovering == recovering.id),
            ]:
                if dead.staging:
                    remove_tree(repo.root, dead.staging)
        executor = _Executor(repo, settings, fault)
        captured = executor.capture()
        plan = _build_plan(repo, commit, captured)
        if plan.noop:
            if captured.tree == plan.target_tree:
                save_last_exact(repo, LastExact(plan.target_commit, plan.target_tree))
            if recovering is not None:
                _close_recovery_of(repo, recovering)
            return RestoreOutcome(
                plan,
                False,
                None,
                plan.target_commit,
                (time.perf_counter() - started) * 1000.0,
                tree=captured.tree,
            )
        _check_space(repo, plan)
        last = load_last_exact(repo) if isinstance(last_exact, _Persisted) else last_exact
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
        try:
            executor.apply(plan)
            executor.step = "verify"
            after = executor.verify(plan, verify)
            executor._at("after-verify")
        except BaseException as exc:
            failed_at = executor.step
            undo_commit = repo.pygit2.get(undo.commit)
            try:
                executor.rollback(undo_commit, verify)
            except BaseException as rollback_exc:
                journal.mark_failed(
                    f"{_describe(exc)} (at {failed_at}); rollback: {_describe(rollback_exc)}"
                )
                if not isinstance(exc, Exception):
                    raise
                session = journal.session or "SESSION"
                raise RestoreFailedError(
                    f"{_describe(exc)} (at {failed_at}); the rollback failed too: "
                    f"{_describe(rollback_exc)}",
                    rolled_back_to=None,
                    hint=f"your files before the restore are kept (snapshot {undo.commit[:12]}); once the "
                    f"cause is fixed, 'rewind undo {session}' brings every one of them back",
                ) from exc
            journal.close()
            save_last_exact(repo, LastExact(undo.commit, undo.tree))
            if not isinstance(exc, Exception):
                raise
            raise RestoreFailedError(
                f"{_describe(exc)} (at {failed_at})", rolled_back_to=undo.commit
            ) from exc
        if recovering is not None:
            _close_recovery_of(repo, recovering)
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


def _close_recovery_of(repo: GitRepo, recovered: Journal) -> None:
    """``recovered`` is undone: close it and any earlier, interrupted recovery of it."""
    for journal in open_journals(repo)[0]:
        if journal.recovering == recovered.id:
            journal.close()
    recovered.close()


def _refuse_if_interrupted(repo: GitRepo, recovering: Journal | None) -> None:
    dead = [
        j
        for j in open_journals(repo)[0]
        if j.state == "writing"
        and (recovering is None or recovering.id not in (j.id, j.recovering))
    ]
    if dead:
        j = dead[-1]
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
    "RestoreOutcome",
    "RestorePlan",
    "Verify",
    "diff_trees",
    "patch",
    "plan_restore",
    "restore_commit",
]
