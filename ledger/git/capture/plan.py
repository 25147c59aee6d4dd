"""What a capture must record: ``git status`` on the private index, parsed and classified.

Why it exists: between "git status lists what differs from the private index" and "the index
holds the work tree" lie the capture's exclusion rules (docs/design.md#protected-paths,
docs/design.md#submodules-and-embedded-repositories). This module holds them, apart from the
git calls that act on the result (:mod:`ledger.git.capture.scan`):

- :func:`parse_status` reads ``git status --porcelain=v2 -z`` records into typed values;
- :func:`classify` decides, for each, whether it is recorded, removed or skipped on purpose, and
  returns a :class:`CapturePlan`. It reads the work tree and the user's index only through the
  :class:`Probe` it is given, and changes nothing: applying the plan is the capture's job;
- :class:`RuleChanges` holds the directories whose rule files changed before status ran (what
  git's untracked cache reported during it: :mod:`ledger.git.capture.untracked_cache`);
- :class:`CaptureResult` is what the capture returns (beside :class:`SkippedPath`, which it
  lists).

Rules (each one keeps the capture equal to ``git add -A`` into a fresh index, less what we skip):
- A protected directory (settings) or an untracked file larger than the limit is skipped only
  when the user's git tracks nothing there: tracked content is always captured.
- A directory listed as untracked with a trailing ``/`` is an embedded repository: captured as a
  gitlink when it has a commit, else skipped.
- A gitlink whose ``.git`` is gone stops being one.
- A git directory inside the work tree (a bare repository, a ``--separate-git-dir`` target:
  ``HEAD`` + ``objects/`` + ``refs/`` under any name) is git's data, not the user's files: it is
  skipped as a whole like a protected directory, and entries an older capture holds under it
  are removed (docs/design.md#git-directories-are-not-work-trees). It is found through the
  ``HEAD`` file that status lists, so a capture without one pays no extra system call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal, Protocol

from ledger.errors import GitError
from ledger.git.capture.status_command import TRACE_ENV
from ledger.git.runner import decode_path
from ledger.plain import FrozenPlain, Plain
from ledger.settings import SnapshotSettings

_GITLINK = b"160000"  # the mode of a gitlink (pygit2.enums.FileMode.COMMIT), as status prints it
MANY_UNTRACKED = 2000
"""Beyond this many untracked paths, the user's tracked files are listed once instead of one
``lstat`` per untracked path (a first capture, a big checkout)."""


class SkippedPath(FrozenPlain):
    """A path a capture left out on purpose (directories end with ``/``)."""

    __slots__ = ("path", "reason", "size")
    path: str
    reason: str  # "protected-dir" | "too-large" | "embedded-repo-without-commit" | "git-dir"
    size: int | None

    def __init__(self, path: str, reason: str, size: int | None = None) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "size", size)

    def _fields(self) -> tuple[object, ...]:
        return (self.path, self.reason, self.size)

    def fields(self) -> dict[str, object]:
        """Plain values (a snapshot report; a capture answered over the snapshot socket)."""
        return {"path": self.path, "reason": self.reason, "size": self.size}


class CaptureResult(FrozenPlain):
    """What a capture made (:mod:`ledger.git.capture.scan`, which re-exports it)."""

    __slots__ = ("ms", "rebuilt", "skipped", "tree", "updated")
    tree: str
    skipped: tuple[SkippedPath, ...]
    rebuilt: bool
    """The private index was (re)built from nothing in this capture."""
    updated: int
    """Index entries added, re-hashed or removed."""
    ms: float

    def __init__(
        self,
        tree: str,
        skipped: tuple[SkippedPath, ...] = (),
        rebuilt: bool = False,
        updated: int = 0,
        ms: float = 0.0,
    ) -> None:
        self._init(tree=tree, skipped=skipped, rebuilt=rebuilt, updated=updated, ms=ms)

    def timed(self, ms: float) -> CaptureResult:
        """The same result, taking ``ms`` milliseconds."""
        return CaptureResult(self.tree, self.skipped, self.rebuilt, self.updated, ms)


class Changed(FrozenPlain):
    """A path the private index holds whose work-tree state differs (status record ``1``)."""

    __slots__ = ("deleted", "gitlink", "path")
    path: str
    deleted: bool
    gitlink: Literal["gone", "changed"] | None
    """``gone``: a gitlink that is no longer one; ``changed``: a gitlink still."""

    def __init__(
        self, path: str, deleted: bool, gitlink: Literal["gone", "changed"] | None = None
    ) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "deleted", deleted)
        object.__setattr__(self, "gitlink", gitlink)

    def _fields(self) -> tuple[object, ...]:
        return (self.path, self.deleted, self.gitlink)


class Status(FrozenPlain):
    __slots__ = ("changed", "untracked")
    changed: list[Changed]
    untracked: list[str]
    """As git lists them: a directory (an embedded repository) ends with ``/``."""

    def __init__(self, changed: list[Changed], untracked: list[str]) -> None:
        object.__setattr__(self, "changed", changed)
        object.__setattr__(self, "untracked", untracked)

    def _fields(self) -> tuple[object, ...]:
        return (self.changed, self.untracked)


class CapturePlan(Plain):
    __slots__ = (
        "add",
        "force_remove",
        "git_dirs",
        "gitlinks_changed",
        "gone_gitlinks",
        "kept_protected",
        "new_gitlinks",
        "sizes",
        "skipped",
        "update",
        "user_tracked",
    )
    update: list[str]  # update-index --add --remove
    add: list[str]  # new paths (files or gitlinks)
    force_remove: list[str]
    skipped: dict[str, SkippedPath]
    new_gitlinks: list[str]
    gone_gitlinks: set[str]
    gitlinks_changed: list[str]
    kept_protected: list[str]
    """Protected directories captured because the user tracks something there."""
    git_dirs: list[str]
    """Git directories inside the work tree left out of this capture."""
    sizes: dict[str, int]
    """Sizes of the untracked regular files read for the size limit (reused by the first-capture
    check, :mod:`ledger.git.capture.limits`, so that no file is ``lstat``-ed twice)."""
    user_tracked: frozenset[str] | None
    """The user's tracked files, when classify listed them all (many untracked paths)."""

    def __init__(
        self,
        update: list[str] | None = None,
        add: list[str] | None = None,
        force_remove: list[str] | None = None,
        skipped: dict[str, SkippedPath] | None = None,
        new_gitlinks: list[str] | None = None,
        gone_gitlinks: set[str] | None = None,
        gitlinks_changed: list[str] | None = None,
        kept_protected: list[str] | None = None,
        git_dirs: list[str] | None = None,
        sizes: dict[str, int] | None = None,
        user_tracked: frozenset[str] | None = None,
    ) -> None:
        self.update = [] if update is None else update
        self.add = [] if add is None else add
        self.force_remove = [] if force_remove is None else force_remove
        self.skipped = {} if skipped is None else skipped
        self.new_gitlinks = [] if new_gitlinks is None else new_gitlinks
        self.gone_gitlinks = set() if gone_gitlinks is None else gone_gitlinks
        self.gitlinks_changed = [] if gitlinks_changed is None else gitlinks_changed
        self.kept_protected = [] if kept_protected is None else kept_protected
        self.git_dirs = [] if git_dirs is None else git_dirs
        self.sizes = {} if sizes is None else sizes
        self.user_tracked = user_tracked

    @property
    def paths(self) -> list[str]:
        """Every path whose index entry changes."""
        return self.update + self.add + self.force_remove


class Probe(Protocol):
    """What :func:`classify` reads outside the status output."""

    def regular_size(self, path: str) -> int | None: ...
    def user_tracked(self, paths: Sequence[str]) -> set[str]: ...
    def user_tracked_all(self) -> frozenset[str]: ...
    def is_dir(self, path: str) -> bool: ...
    def ls_private(self, dirs: Sequence[str]) -> list[str]: ...
    def repo_has_commit(self, path: str) -> bool: ...
    def has_dotgit(self, path: str) -> bool: ...
    def is_git_dir(self, path: str) -> bool: ...


def parse_status(records: Sequence[bytes]) -> Status:
    """``git status --porcelain=v2 -z --no-renames`` records. Index-only changes are dropped;
    a rename or unmerged record (never produced on our index) is an error."""
    changed: list[Changed] = []
    untracked: list[str] = []
    for record in records:
        kind = record[:2]
        if kind == b"1 ":
            if record[3:4] == b".":  # no work-tree change (index vs HEAD only)
                continue
            fields = record.split(b" ", 8)
            worktree, mode_index, mode_work = fields[1][1:2], fields[4], fields[5]
            path = decode_path(fields[8])
            if _GITLINK in (mode_index, mode_work):
                gitlink: Literal["gone", "changed"] = "changed" if mode_work == _GITLINK else "gone"
                changed.append(Changed(path, worktree == b"D", gitlink))
            else:
                changed.append(Changed(path, worktree == b"D"))
        elif kind == b"? ":
            untracked.append(decode_path(record[2:]))
        elif kind in (b"2 ", b"u "):
            raise GitError("snapshot", f"unexpected status record {record[:60]!r}")
    return Status(changed, untracked)


def protected_prefix(path: str, names: set[str], *, include_last: bool) -> str | None:
    """The first directory prefix of ``path`` named like a protected directory (the last
    component counts only with ``include_last``), or ``None``."""
    parts = path.split("/")
    limit = len(parts) if include_last else len(parts) - 1
    for i in range(limit):
        if parts[i] in names:
            return "/".join(parts[: i + 1])
    return None


def git_dir_candidates(status: Status, probe: Probe) -> list[str]:
    """The git directories inside the work tree that ``status`` shows files of (outermost
    first): a git directory always holds ``HEAD``, so only the parents of listed ``HEAD``
    files are asked (:meth:`Probe.is_git_dir`). The root itself is never one here (a shadow
    for a git directory is refused before any capture)."""
    heads = {
        path[: -len("/HEAD")]
        for path in [*status.untracked, *(c.path for c in status.changed)]
        if path.endswith("/HEAD")
    }
    found = sorted(d for d in heads if probe.is_git_dir(d))
    outermost: list[str] = []
    for d in found:  # sorted: a parent comes before its children
        if not any(d.startswith(o + "/") for o in outermost):
            outermost.append(d)
    return outermost


def git_dir_prefix(path: str, git_dirs: set[str]) -> str | None:
    """The git directory of ``git_dirs`` that ``path`` lies in, or ``None``."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        prefix = "/".join(parts[:i])
        if prefix in git_dirs:
            return prefix
    return None


def covers(tracked: set[str], prefix: str) -> bool:
    """Whether ``tracked`` holds ``prefix`` itself or a path below it."""
    head = prefix + "/"
    return prefix in tracked or any(p.startswith(head) for p in tracked)


def classify(
    status: Status,
    settings: SnapshotSettings,
    probe: Probe,
    *,
    gitlinks: Sequence[str],
    kept_protected: Sequence[str],
    known_git_dirs: Sequence[str] = (),
) -> CapturePlan:
    """The plan for ``status`` (see the module); ``gitlinks``, ``kept_protected`` and
    ``known_git_dirs`` are the previous capture's."""
    plan = CapturePlan()
    git_dirs = git_dir_candidates(status, probe)
    if git_dirs:
        status = _without_git_dirs(status, git_dirs, probe, plan, known_git_dirs)
    limit = settings.max_untracked_file_bytes
    protected = set(settings.protected_dirs)
    big: dict[str, int] = {}
    protected_groups: dict[str, list[str]] = {}
    embedded: list[str] = []
    protected_probe = (
        re.compile("|".join(re.escape(n) for n in sorted(protected))) if protected else None
    )
    listed = bool(limit) and len(status.untracked) > MANY_UNTRACKED
    user_tracked = probe.user_tracked_all() if listed else frozenset()
    plan.user_tracked = user_tracked if listed else None
    sizes = plan.sizes

    for change in status.changed:
        if change.gitlink is not None:
            if change.gitlink == "gone":
                plan.gone_gitlinks.add(change.path)
            else:
                plan.gitlinks_changed.append(change.path)
            plan.update.append(change.path)
            continue
        size = probe.regular_size(change.path) if limit and not change.deleted else None
        if size is not None and size > limit:
            big[change.path] = size
        plan.update.append(change.path)
    for raw in status.untracked:
        is_dir = raw.endswith("/")
        path = raw.rstrip("/")
        prefix = (
            protected_prefix(path, protected, include_last=is_dir)
            if protected_probe is not None and protected_probe.search(path)
            else None
        )
        if prefix is not None:
            protected_groups.setdefault(prefix, []).append(raw)
            continue
        if is_dir:
            embedded.append(path)
            continue
        if limit and path not in user_tracked:
            size = probe.regular_size(path)
            if size is not None:
                sizes[path] = size
                if size > limit:
                    big[path] = size
        plan.add.append(path)

    # Protected directories and large files are skipped only when the user's git does not
    # track anything there: tracked content is always captured.
    candidates = list(protected_groups) + list(big) + list(kept_protected)
    tracked = probe.user_tracked(candidates) if candidates else set()
    kept = []
    for prefix, raws in protected_groups.items():
        if covers(tracked, prefix):
            kept.append(prefix)
            for raw in raws:
                if raw.endswith("/"):
                    embedded.append(raw.rstrip("/"))
                else:
                    plan.add.append(raw)
        else:
            plan.skipped[prefix + "/"] = SkippedPath(prefix + "/", "protected-dir")
    for prefix in kept_protected:
        if prefix in protected_groups:
            continue
        if covers(tracked, prefix):
            kept.append(prefix)
        elif probe.is_dir(prefix):
            plan.force_remove += probe.ls_private([prefix])
            plan.skipped[prefix + "/"] = SkippedPath(prefix + "/", "protected-dir")
    plan.kept_protected = sorted(set(kept))
    for path, size in big.items():
        if path in tracked:
            continue
        plan.skipped[path] = SkippedPath(path, "too-large", size)
        if path in plan.add:
            plan.add.remove(path)
        elif path in plan.update:
            plan.update.remove(path)
            plan.force_remove.append(path)

    for path in embedded:
        if probe.repo_has_commit(path):
            plan.add.append(path)
            plan.new_gitlinks.append(path)
        else:
            plan.skipped[path + "/"] = SkippedPath(path + "/", "embedded-repo-without-commit")
    plan.gone_gitlinks |= {g for g in gitlinks if g in plan.update and not probe.has_dotgit(g)}
    return plan


def _without_git_dirs(
    status: Status,
    git_dirs: list[str],
    probe: Probe,
    plan: CapturePlan,
    known_git_dirs: Sequence[str],
) -> Status:
    """``status`` less the paths inside ``git_dirs`` that the user's index does not track;
    those directories are recorded as skipped in ``plan``, and entries the private index holds
    under a newly seen one are removed."""
    tracked = probe.user_tracked(git_dirs)
    skip = {d for d in git_dirs if not covers(tracked, d)}
    if not skip:
        return status
    known = set(known_git_dirs)
    for d in sorted(skip):
        plan.skipped[d + "/"] = SkippedPath(d + "/", "git-dir")
        if d not in known:
            plan.force_remove += probe.ls_private([d])
    plan.git_dirs = sorted(skip)
    changed = []
    for change in status.changed:
        if git_dir_prefix(change.path, skip) is None:
            changed.append(change)
        elif change.path not in plan.force_remove:
            plan.force_remove.append(change.path)
    untracked = [raw for raw in status.untracked if git_dir_prefix(raw.rstrip("/"), skip) is None]
    return Status(changed, untracked)


class RuleChanges(Plain):
    """Known directories whose rules changed, by kind (compared by the capture before status)."""

    __slots__ = ("attributes", "ignore", "repos")
    ignore: list[str]
    attributes: list[str]
    repos: list[str]
    """Directories that now hold a ``.git``."""

    def __init__(
        self,
        ignore: list[str] | None = None,
        attributes: list[str] | None = None,
        repos: list[str] | None = None,
    ) -> None:
        self.ignore = [] if ignore is None else ignore
        self.attributes = [] if attributes is None else attributes
        self.repos = [] if repos is None else repos

    def __bool__(self) -> bool:
        return bool(self.ignore or self.attributes or self.repos)

    def merge(self, other: RuleChanges) -> None:
        self.ignore += other.ignore
        self.attributes += other.attributes
        self.repos += other.repos


__all__ = [
    "MANY_UNTRACKED",
    "TRACE_ENV",
    "CapturePlan",
    "CaptureResult",
    "Changed",
    "Probe",
    "RuleChanges",
    "SkippedPath",
    "Status",
    "classify",
    "covers",
    "git_dir_candidates",
    "git_dir_prefix",
    "parse_status",
    "protected_prefix",
]
