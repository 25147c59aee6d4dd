"""Planning a restore: what differs between the work tree's capture and a snapshot, and whether
it is safe to change (docs/design.md#restore).

Why it exists: a restore must refuse before it changes anything. The plan is the one place that
decides what a restore will delete, write and leave alone, from the capture taken under the
private index's lock and the target tree, validated entry by entry while it is read.

What a plan does (:func:`build_plan`): equal trees mean nothing to do. Otherwise diff the trees
without rename detection, at the root, leaf by leaf, validating every target entry read
(:mod:`ledger.git.trees`, :mod:`ledger.git.restore.safety`); refuse submodule additions and
removals; leave paths under the capture's protected or skipped paths alone; check the work tree
with ``lstat`` (no write or delete through a symlink, no file of the user's that the capture does
not hold is replaced, nothing inside a nested repository); leave alone what the capture does not
hold or git ignores (docs/design.md#ignored-files, :mod:`ledger.git.restore.ignored`); refuse
paths inside a git directory or Pi's agent dir.

Invariants: read-only (the only writes are scratch copies of ``.gitignore`` files in our private
dir, removed before returning). Any refusal raises :class:`~ledger.errors.UnsafeRestoreError` (or
:class:`~ledger.errors.MissingCommitError`). Paths are the exact bytes of the tree names
(``os.fsdecode``, :mod:`ledger.git.trees`) and reach the file system and git as those bytes;
messages name them as git quotes them (:func:`ledger.quoting.display_name`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Sequence

import pygit2
from pygit2.enums import FileMode

from ledger.errors import MissingCommitError, UnsafeRestoreError
from ledger.git.capture.scan import CaptureResult, capture_tree
from ledger.git.repo import GitRepo, is_git_dir, is_inside, object_kind
from ledger.git.restore import checked_walks
from ledger.git.restore.ignored import ignored_by_target, ignored_now
from ledger.git.restore.journal import current_intent
from ledger.git.restore.recheck import PlanScan, scan_clock_ns, stamp_plan
from ledger.git.restore.safety import WorktreeGuard, parents, under
from ledger.git.tree_names import Problem
from ledger.git.trees import Change, split_changes, tree_changes
from ledger.plain import FrozenPlain
from ledger.quoting import display_names
from ledger.settings import SnapshotSettings

SUBMODULE_HINT = (
    "restore to a point with the same submodules, or add/remove the submodule with git first"
)

Write = tuple[str, int, str]
"""``(path, mode, blob)`` a restore writes from the target."""
_COMPARED = (
    *("added", "current_tree", "deleted", "modified", "skipped", "submodules"),
    *("target_commit", "target_tree", "warnings"),
)
""":class:`RestorePlan`'s fields that ``==``, hash and repr use (in ``__slots__`` order)."""


class RestorePlan(FrozenPlain):
    """What a restore to ``target_commit`` will change. Paths are repository-relative,
    ``/``-separated; a file↔directory change is a deletion plus additions."""

    __slots__ = (
        "added",
        "bounded",
        "changes",
        "current_tree",
        "deleted",
        "modified",
        "replace_dirs",
        "scan",
        "skipped",
        "submodules",
        "target_commit",
        "target_tree",
        "warnings",
        "writes",
    )
    target_commit: str
    target_tree: str
    current_tree: str
    added: tuple[str, ...]
    modified: tuple[str, ...]
    deleted: tuple[str, ...]
    skipped: tuple[str, ...]
    """Changed paths left alone because they lie under a protected or skipped path of the
    current capture (protected directories, too-large files, repositories without commits)."""
    warnings: tuple[str, ...]
    submodules: tuple[tuple[str, str], ...]
    """``(path, commit)`` of submodules to check out detached (also listed in ``modified``)."""
    writes: tuple[Write, ...]
    """``(path, mode, blob)`` written from the target (additions and modifications)."""
    replace_dirs: tuple[str, ...]
    """Directories (holding only files being deleted) that a file of the target replaces."""
    changes: tuple[Change, ...]
    """The leaf changes of ``added``, ``modified`` and ``deleted`` (both sides' mode and blob),
    so that whose work they are is asked without diffing the trees again."""
    scan: PlanScan | None
    """The capture this plan was made from, re-checked and reused under the restore's lock
    instead of a second scan (:mod:`ledger.git.restore.recheck`); ``None``: capture again."""
    bounded: bool
    """Given as ``planned``, the restore may touch no path beyond this plan's: when a capture
    under the lock finds more to change, it is refused with nothing written
    (:class:`~ledger.errors.PlanOutgrownError`). The agent's tool restores only the files it
    sorted as its own (docs/pi.md#the-agents-rewind-tool): a file the user changes meanwhile
    must not be written, even one undo away."""

    def __init__(
        self,
        target_commit: str,
        target_tree: str,
        current_tree: str,
        added: tuple[str, ...] = (),
        modified: tuple[str, ...] = (),
        deleted: tuple[str, ...] = (),
        skipped: tuple[str, ...] = (),
        warnings: tuple[str, ...] = (),
        submodules: tuple[tuple[str, str], ...] = (),
        writes: tuple[Write, ...] = (),
        replace_dirs: tuple[str, ...] = (),
        changes: tuple[Change, ...] = (),
        scan: PlanScan | None = None,
        bounded: bool = False,
    ) -> None:
        self._init(
            target_commit=target_commit,
            target_tree=target_tree,
            current_tree=current_tree,
            added=added,
            modified=modified,
            deleted=deleted,
            skipped=skipped,
            warnings=warnings,
            submodules=submodules,
            writes=writes,
            replace_dirs=replace_dirs,
            changes=changes,
            scan=scan,
            bounded=bounded,
        )

    def _names(self) -> tuple[str, ...]:
        # As the dataclass's ``field(repr=False, compare=False)``: what the plan writes and how
        # it was made are neither shown nor compared (nor hashed).
        return _COMPARED

    def with_scan(self, scan: PlanScan | None) -> RestorePlan:
        """The same plan, made from ``scan`` (``None``: the restore captures again)."""
        return self._but(scan, self.bounded)

    def as_bounded(self) -> RestorePlan:
        """The same plan, :attr:`bounded`."""
        return self._but(self.scan, True)

    def _but(self, scan: PlanScan | None, bounded: bool) -> RestorePlan:
        return RestorePlan(
            self.target_commit,
            self.target_tree,
            self.current_tree,
            self.added,
            self.modified,
            self.deleted,
            self.skipped,
            self.warnings,
            self.submodules,
            self.writes,
            self.replace_dirs,
            self.changes,
            scan,
            bounded,
        )

    @property
    def noop(self) -> bool:
        return not (self.added or self.modified or self.deleted)

    def to_json(self) -> dict[str, list[str]]:
        return {
            "added": list(self.added),
            "modified": list(self.modified),
            "deleted": list(self.deleted),
        }


def resolve_commit(repo: GitRepo, sha: str) -> pygit2.Commit:
    """The target commit; its tree must exist (its content is checked later, entry by entry)."""
    commit = repo.commit(sha)
    if commit is None or not repo.has_tree(str(commit.tree_id)):
        raise MissingCommitError(sha)
    return commit


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


def unsafe_error(problems: Sequence[Problem]) -> UnsafeRestoreError:
    """One error for all problems: the first reason, with every path that has it."""
    reason = problems[0].reason
    paths = list(dict.fromkeys(p.path for p in problems if p.reason == reason))
    others = sum(1 for p in problems if p.reason != reason)
    if others:
        reason += f" (and {others} other problem{'s' if others > 1 else ''})"
    return UnsafeRestoreError(reason, paths)


def build_plan(
    repo: GitRepo,
    commit: pygit2.Commit,
    captured: CaptureResult,
    *,
    only: frozenset[str] | None = None,
    for_preview: bool = False,
    known: Callable[[], Sequence[Change] | None] | None = None,
) -> RestorePlan:
    """The plan from ``captured`` to ``commit``; ``only`` limits it to those paths (rollback).

    ``for_preview``: the plan is only shown, never run (``/rewind``'s preview): the checked
    tree walk of an earlier preview of the same two trees is reused, or else what ``known``
    gives (the leaf changes composed from the list's diffs, :mod:`ledger.engine.preview_walk`;
    ``None``: walk) once they are verified against both trees as the walk would check them
    (:mod:`ledger.git.restore.checked_walks`). Every other check runs as for a restore, and a
    restore never passes it: its walk always reads the objects again."""
    r = repo.pygit2
    target_tree = str(commit.tree_id)
    recorded = _recorded_on(repo, commit)
    if captured.tree == target_tree:
        return RestorePlan(str(commit.id), target_tree, captured.tree, warnings=tuple(recorded))

    ignore_case = repo.config_bool("core.ignorecase", False)
    walked = (
        checked_walks.shown(r, captured.tree, target_tree, ignore_case) if for_preview else None
    )
    if walked is None and for_preview and known is not None:
        composed = known()
        if composed is not None and checked_walks.verified(
            r, captured.tree, target_tree, composed, ignore_case
        ):
            walked = tuple(composed)
            checked_walks.keep(r, captured.tree, target_tree, ignore_case, walked)
    if walked is None:
        problems: list[Problem] = []
        changes = tree_changes(
            r,
            captured.tree,
            target_tree,
            validate=True,
            ignore_case=ignore_case,
            problems=problems,
        )
        if problems:
            raise unsafe_error(problems)
        if for_preview:
            checked_walks.keep(r, captured.tree, target_tree, ignore_case, changes)
    else:
        changes = list(walked)
    if only is not None:
        changes = [c for c in changes if c.path in only]

    submodule_changes = [
        c.path
        for c in changes
        if (c.old is not None and c.old.mode == FileMode.COMMIT)
        != (c.new is not None and c.new.mode == FileMode.COMMIT)
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
    writes: list[Write] = [
        (c.path, c.new.mode, c.new.oid)
        for c in kept
        if c.new is not None and c.new.mode != FileMode.COMMIT
    ]
    submodules = [
        (c.path, c.new.oid) for c in kept if c.new is not None and c.new.mode == FileMode.COMMIT
    ]

    missing = [
        path for path, _mode, oid in writes if object_kind(r, oid) != pygit2.enums.ObjectType.BLOB
    ]
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
        raise unsafe_error(problems)
    added_paths = [
        c.path
        for c in kept
        if c.old is None and c.new is not None and c.new.mode != FileMode.COMMIT
    ]
    uncaptured = _uncaptured(repo, guard, added_paths)
    if uncaptured:
        writes = [w for w in writes if w[0] not in uncaptured]
        kept = [c for c in kept if c.path not in uncaptured]
        skipped += sorted(uncaptured)
    kept_ignored = ignored_by_target(repo, target_tree, deletes, kept)
    if kept_ignored:
        deletes = [d for d in deletes if d not in kept_ignored]
        kept = [c for c in kept if c.path not in kept_ignored]
        skipped += sorted(kept_ignored)
        uncaptured |= kept_ignored
    forbidden = _forbidden_paths(repo, [*deletes, *(w[0] for w in writes), *replace_dirs], guard)
    if forbidden:
        raise UnsafeRestoreError(
            "the restore would change files inside a git directory or Pi's agent dir",
            forbidden,
            hint="nothing was changed; keep the agent dir out of the repository "
            "or ignore it in .gitignore",
        )

    warnings = list(recorded)
    protected_skips = [p for p in skipped if p not in uncaptured]
    if protected_skips:
        warnings.append(
            f"left alone (under protected or skipped paths): {display_names(protected_skips)}"
        )
    if uncaptured:
        shown = display_names(sorted(uncaptured))
        warnings.append(
            f"left alone (ignored or protected now; a restore never writes those): {shown}"
        )
    added, modified, deleted = split_changes(kept)
    return RestorePlan(
        str(commit.id),
        target_tree,
        captured.tree,
        added=added,
        modified=modified,
        deleted=deleted,
        skipped=tuple(skipped),
        warnings=tuple(warnings),
        submodules=tuple(submodules),
        writes=tuple(writes),
        replace_dirs=tuple(replace_dirs),
        changes=tuple(kept),
    )


def _uncaptured(repo: GitRepo, guard: WorktreeGuard, added: Sequence[str]) -> set[str]:
    """Paths the target adds that the work tree's capture does not hold although they exist
    (an ignored ``.env``, a protected or too-large file), or that are ignored now.

    A restore leaves both alone: overwriting them would destroy bytes no undo snapshot holds
    (the capture skips them), and writing an ignored path that is absent would leave a file the
    undo could not see to remove (docs/design.md#ignored-files). git answers for the absent
    ones, every path as its bytes (:mod:`ledger.git.restore.ignored`)."""
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
    return found | ignored_now(repo, guard, [p for p in added if p not in found])


def _forbidden_paths(
    repo: GitRepo, paths: Sequence[str], guard: WorktreeGuard | None = None
) -> list[str]:
    """Paths of a plan inside a git directory or Pi's agent dir, or that are one (defence in
    depth: discovery refuses layouts with the repository's git dir in the work tree, shadows
    refuse git directories, captures leave git directories out, and tree validation refuses
    ``.git``).

    Each directory on the way is asked once per plan, and only when it could be one: the
    ``lstat`` of ``guard`` (the plan's own, already taken for most of these paths) says a
    component is missing or a file that is no symlink; then neither it nor anything below it
    is a git directory (:func:`is_git_dir` would answer ``False`` for each of them), so it is
    not asked. A directory or a symlink is always asked, as before (issue 34: at 1,483 paths
    this halves the probes; what is refused is unchanged)."""
    intent = current_intent()
    agent = (
        intent.agent_dir
        or os.environ.get("PI_CODING_AGENT_DIR")
        or os.path.expanduser("~/.pi/agent")
    )
    roots = {str(repo.git_dir), str(repo.common_dir), os.path.realpath(agent)}
    inside = [d for d in roots if is_inside(d, repo.root)]
    root = str(repo.root)
    looks = guard or WorktreeGuard(repo.root)
    # Every other git directory the plan reaches (a bare repository or a --separate-git-dir
    # target inside the tree, the root itself for a shadow an older version made): a write
    # there could move a branch back over a later push. Each directory is asked once, and
    # whether it or a directory above it is one is remembered per directory.
    below_git_dir: dict[str, bool] = {}

    def could_be_one(rel: str) -> bool:
        if not rel:
            return True
        try:
            st = looks.lstat(rel)
        except OSError:  # unreadable: ask, as before (is_git_dir never raises)
            return True
        # Missing, or a file that is no symlink: neither it nor anything below is a git dir.
        return st is not None and (stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode))

    def is_one(rel: str) -> bool:
        return could_be_one(rel) and is_git_dir(os.path.join(root, rel) if rel else root)

    def dir_in_git_dir(rel: str) -> bool:
        """Whether the directory ``rel`` (``""``: the root) or one above it is a git dir."""
        todo = []  # no recursion: a path can have thousands of components
        while rel not in below_git_dir:
            todo.append(rel)
            if not rel:
                break
            rel = rel.rpartition("/")[0] if "/" in rel else ""
        known = below_git_dir.get(rel, False)
        for name in reversed(todo):  # outermost first
            known = below_git_dir[name] = known or is_one(name)
        return known

    def in_git_dir(path: str) -> bool:
        return dir_in_git_dir(path.rpartition("/")[0] if "/" in path else "") or is_one(path)

    bad = []
    for path in paths:
        full = root + "/" + path
        if any(is_inside(full, d) or is_inside(d, full) for d in inside) or in_git_dir(path):
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
    The plan keeps its scan (:attr:`RestorePlan.scan`): handed to
    :func:`~ledger.git.restore.run.restore_commit`, it spares the restore a second one.

    Raises :class:`MissingCommitError` or :class:`UnsafeRestoreError` (and the capture's own
    errors, e.g. a dirty submodule)."""
    commit = resolve_commit(repo, target_commit)
    settings = settings or SnapshotSettings()
    started_ns = scan_clock_ns()  # before the capture reads anything (recheck's rule)
    captured = capture_tree(repo, settings)
    plan = build_plan(repo, commit, captured)
    return plan.with_scan(stamp_plan(repo, plan, captured, settings, started_ns))


__all__ = [
    "SUBMODULE_HINT",
    "RestorePlan",
    "Write",
    "build_plan",
    "plan_restore",
    "resolve_commit",
    "unsafe_error",
]
