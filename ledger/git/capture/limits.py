"""What a capture refuses, before it writes anything: a dirty submodule, an absurd first capture.

Why it exists: the capture (:mod:`ledger.git.capture.scan`) applies a classified plan
(:mod:`ledger.git.capture.plan`); some plans must not be applied at all. Both checks here only
read, and run after ``git status`` and before any ``update-index``.

- :func:`check_dirty`: a submodule or embedded repository with uncommitted changes cannot be
  recorded as a gitlink at its HEAD without losing those changes on a restore
  (docs/design.md#submodules-and-embedded-repositories, defect D6):
  :class:`~ledger.errors.DirtySubmoduleError`.
- :func:`check_first_capture`: a first capture hashes every file it records into the object database. Pointed
at a home-like directory, a data folder or a dependency tree that is neither ignored nor
protected, that fills the disk (other agents' checkpoints reached 40 GB in minutes, 112 GB from
a home directory) and takes minutes. Rewind refuses such a capture with
:class:`~ledger.errors.CaptureTooLargeError`, naming the directories that hold most of it and
how to leave them out (docs/design.md#first-capture-limits).

Invariants of the first-capture check:
- Only a *first* capture is checked: one with no completed capture state (the private index is
  built from nothing and nothing was accepted before). Later captures add what changed since and
  never pay for this check; :class:`~ledger.git.capture.scan.Capturer` decides which capture is first.
- It runs on the classified plan (:mod:`ledger.git.capture.plan`), after ``git status`` and
  before any ``update-index``: a refusal has written no object and no capture state.
- What counts: paths the plan adds that the user's own index does not track (tracked files are
  the user's content, already in their repository: a big monorepo is never refused), less
  gitlinks (no content hashed). Protected directories, ignored paths, git directories and files
  over the per-file limit are already out of the plan and never count.
- No extra walk: counts and sizes come from the status listing; sizes that :func:`classify`
  already read are reused, the others cost one ``lstat`` each, for untracked paths only. The
  user's index is listed at most once (reused from :func:`classify` when it listed it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import pygit2

from ledger.errors import CaptureTooLargeError, DirtySubmoduleError
from ledger.git.capture.plan import MANY_UNTRACKED, CapturePlan
from ledger.git.runner import GitRunner, chunks, decode_path
from ledger.settings import SnapshotSettings

TOP_DIRECTORIES = 5
"""How many directories a refusal names."""
DESCEND_SHARE = 0.8
"""A named directory is replaced by its child holding at least this share of its weight, so that
``app/`` holding ``app/node_modules/`` (most of it) is named as ``app/node_modules/``."""


class SizeProbe(Protocol):
    """What :func:`check_first_capture` reads besides the plan."""

    def regular_size(self, path: str) -> int | None: ...
    def user_tracked(self, paths: Sequence[str]) -> set[str]: ...
    def user_tracked_all(self) -> frozenset[str]: ...


def check_dirty(
    git: GitRunner,
    index_path: Path,
    root: Path,
    gitlinks: Sequence[str],
    plan: CapturePlan,
    config: Sequence[tuple[str, str]],
) -> None:
    """Raise :class:`DirtySubmoduleError` for a known gitlink (``gitlinks``, the previous
    capture's) or a new one of ``plan`` with uncommitted changes (D6). ``config`` is the private
    index's (``PRIVATE_CONFIG``)."""
    known = [g for g in gitlinks if g not in plan.gone_gitlinks]
    for chunk in chunks(known):
        result = git.run(
            [
                "status",
                "--porcelain=v2",
                "-z",
                "--untracked-files=no",
                "--ignore-submodules=untracked",
                "--",
                *chunk,
            ],
            operation="git status (submodules)",
            index=index_path,
            config=tuple(config),
        )
        for record in result.lines_z():
            if record.startswith(b"1 "):
                fields = record.split(b" ", 8)
                if fields[2][:1] == b"S" and fields[2][2:3] == b"M":
                    raise DirtySubmoduleError(decode_path(fields[8]))
    for path in plan.new_gitlinks:
        nested = root / path
        try:
            git_dir = Path(pygit2.Repository(str(nested)).path)
        except (pygit2.GitError, OSError, ValueError):
            continue
        result = GitRunner(nested, git_dir).run(
            ["status", "--porcelain", "-z", "--untracked-files=no", "--ignore-submodules=none"],
            operation=f"git status ({path})",
            check=False,
        )
        if result.returncode == 0 and result.stdout.strip(b"\0"):
            raise DirtySubmoduleError(path)


def check_first_capture(
    plan: CapturePlan,
    settings: SnapshotSettings,
    probe: SizeProbe,
    *,
    root: Path,
    shadow: bool = False,
) -> None:
    """Raise :class:`CaptureTooLargeError` when ``plan`` (a first capture's) adds more untracked
    files or bytes than the settings allow; return quietly otherwise (see the module)."""
    max_files, max_bytes = settings.first_capture_max_files, settings.first_capture_max_bytes
    if not max_files and not max_bytes:
        return
    gitlinks = set(plan.new_gitlinks)
    added = [p for p in plan.add if p not in gitlinks]
    tracked = plan.user_tracked
    if tracked is None and len(added) > MANY_UNTRACKED:
        tracked = probe.user_tracked_all()
    if tracked:
        added = [p for p in added if p not in tracked]
    if not (max_files and len(added) > max_files) and not max_bytes:
        return
    sizes = _sizes(added, plan.sizes, probe)
    total = sum(sizes)
    if not _over(len(added), total, max_files, max_bytes):
        return
    if tracked is None:
        # Few paths, and classify did not list the user's index: ask about these only.
        asked = probe.user_tracked(added)
        if asked:
            kept = [(p, s) for p, s in zip(added, sizes, strict=True) if p not in asked]
            added, sizes = [p for p, _ in kept], [s for _, s in kept]
            total = sum(sizes)
            if not _over(len(added), total, max_files, max_bytes):
                return
    by_files = bool(max_files) and len(added) > max_files
    setting, limit = (
        ("rewind.snapshot.firstCaptureMaxFiles", max_files)
        if by_files
        else ("rewind.snapshot.firstCaptureMaxBytes", max_bytes)
    )
    raise CaptureTooLargeError(
        root,
        files=len(added),
        size=total,
        setting=setting,
        limit=limit,
        biggest=heaviest_directories(added, sizes, by_files=by_files),
        shadow=shadow,
    )


def _over(files: int, size: int, max_files: int, max_bytes: int) -> bool:
    """Whether ``files`` or ``size`` exceeds a limit that is on (0 = off)."""
    return bool(max_files and files > max_files) or bool(max_bytes and size > max_bytes)


def _sizes(paths: Sequence[str], known: dict[str, int], probe: SizeProbe) -> list[int]:
    """The size of each path (0 for what is not a regular file), from ``known`` or ``lstat``."""
    out: list[int] = []
    for path in paths:
        size = known.get(path)
        if size is None:
            size = probe.regular_size(path) or 0
        out.append(size)
    return out


def heaviest_directories(
    paths: Sequence[str], sizes: Sequence[int], *, by_files: bool, top: int = TOP_DIRECTORIES
) -> list[tuple[str, int, int]]:
    """The ``top`` directories holding most of ``paths`` (by file count or by bytes), as
    ``(dir/, files, bytes)``, heaviest first. Each starts as a top-level directory (``./`` for
    the top level's own files) and descends while one child holds :data:`DESCEND_SHARE` of it.
    Files are summed per directory first, then each directory is added to its ancestors once."""
    own: dict[str, list[int]] = {}
    for path, size in zip(paths, sizes, strict=True):
        cut = path.rfind("/")
        directory = path[:cut] if cut >= 0 else "."
        entry = own.get(directory)
        if entry is None:
            own[directory] = [1, size]
        else:
            entry[0] += 1
            entry[1] += size
    totals: dict[str, list[int]] = {}
    children: dict[str, list[str]] = {}
    for start, (files, size) in own.items():
        directory = start
        while directory:
            cut = directory.rfind("/")
            parent = directory[:cut] if cut >= 0 and directory != "." else ""
            entry = totals.get(directory)
            if entry is None:
                totals[directory] = [files, size]
                children.setdefault(parent, []).append(directory)
            else:
                entry[0] += files
                entry[1] += size
            directory = parent
    weight = 0 if by_files else 1

    def narrowed(directory: str) -> str:
        while directory != "." and (kids := children.get(directory)):
            best = max(kids, key=lambda k: totals[k][weight])
            if totals[best][weight] < DESCEND_SHARE * totals[directory][weight]:
                break
            directory = best
        return directory

    named = sorted(
        (narrowed(d) for d in children.get("", [])), key=lambda d: (-totals[d][weight], d)
    )
    return [(f"{d}/", totals[d][0], totals[d][1]) for d in named[:top]]


__all__ = [
    "DESCEND_SHARE",
    "TOP_DIRECTORIES",
    "check_dirty",
    "check_first_capture",
    "heaviest_directories",
]
