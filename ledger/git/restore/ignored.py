"""Which paths of a restore plan git ignores, asked of git itself with the paths as bytes
(docs/design.md#ignored-files).

Why it exists: a restore must not create a path that is ignored now (the capture after it would
not see the file, so an undo could not remove it), and must not delete a path the target's own
``.gitignore`` files ignore (the target could never have held it). Both questions are git's
ignore rules, and the capture that a restore must agree with applies git's own rules
(``git add -A``). libgit2's ``path_is_ignored`` takes only UTF-8 ``str`` paths: a path holding
another byte (``caf\\xe9.txt``) could not be asked at all, and every plan recreating one was
refused (issue 32). Here git answers (``git check-ignore --no-index -z --stdin``), each path
sent as its exact bytes.

Invariants:
- Every path is sent as ``./<path>``: git then never reads a leading ``:`` as pathspec magic
  (``:!x`` would end the whole command, ``:x`` would be matched as ``x``), and it echoes what it
  was sent, which maps back to the caller's path exactly. ``--no-index``: a tracked path that
  matches a rule is ignored too, as the capture ignores it.
- git refuses (``beyond a symbolic link``) to answer for a path below a symlink of the work tree.
  Such a path (the plan deletes the symlink first, :class:`~ledger.git.restore.safety.WorktreeGuard`
  refuses any other) is asked in a scratch work tree in our private dir that holds copies of the
  ``.gitignore`` files of the real directories above the symlink: the rules git applies to it
  now, since git never reads a rule file through a symlink. The repository's own git dir serves
  both (``info/exclude``, ``core.excludesFile``).
- Read-only for the work tree; the only writes are the scratch work trees, removed before
  returning. Each is made only once its owner holds ``<name>.lock`` (:mod:`ledger.git.owned`):
  one a kill leaves is removed by the leftovers sweep once that lock is free, never before.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from pygit2.enums import FileMode, ObjectType

from ledger.errors import UnsafeRestoreError
from ledger.git.owned import scratch_dir
from ledger.git.private import make_private_dir
from ledger.git.repo import GitRepo
from ledger.git.restore.nofollow import NotADirectoryOnPath, open_dir
from ledger.git.restore.safety import WorktreeGuard, parents
from ledger.git.runner import GitRunner
from ledger.git.trees import Change, entry_at
from ledger.quoting import display_name

_RULES = b".gitignore"
_RULES_MAX_BYTES = 64 << 20
"""A rule file larger than this is not copied into a scratch tree (the question is refused)."""


class IgnoreCheckError(Exception):
    """git could not say which paths it ignores (its message)."""


def check_ignore(git: GitRunner, paths: Sequence[str]) -> set[str]:
    """The paths of ``paths`` that git's ignore rules ignore in ``git``'s work tree (one git
    process, paths as bytes, see the module); :class:`IgnoreCheckError` when git fails."""
    if not paths:
        return set()
    sent = {b"./" + os.fsencode(p): p for p in paths}
    result = git.run(
        ["check-ignore", "--no-index", "-z", "--stdin"],
        input=b"".join(raw + b"\0" for raw in sent),
        operation="git check-ignore",
        check=False,
        # check-ignore refuses literal pathspecs; the "./" prefix keeps magic out
        extra_env={"GIT_LITERAL_PATHSPECS": "0"},
    )
    if result.returncode not in (0, 1):
        detail = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise IgnoreCheckError(detail[0] if detail else f"exit status {result.returncode}")
    found: set[str] = set()
    for echo in result.stdout.split(b"\0"):
        if not echo:
            continue
        path = sent.get(echo)
        if path is None:
            raise IgnoreCheckError("git check-ignore answered for a path it was not asked")
        found.add(path)
    return found


def ignored_now(repo: GitRepo, guard: WorktreeGuard, paths: Sequence[str]) -> set[str]:
    """The paths of ``paths`` (absent from the work tree) that the rules in force now ignore;
    :class:`~ledger.errors.UnsafeRestoreError` when git cannot tell."""
    direct: list[str] = []
    beyond: list[str] = []
    for path in paths:
        links = [p for p in parents(path) if _is_link(guard.lstat(p))]
        (beyond if links else direct).append(path)
    try:
        found = check_ignore(GitRunner(repo.root, repo.git_dir), direct)
        if beyond:
            with _scratch(repo) as scratch:
                for directory in _real_dirs(guard, beyond):
                    _copy_rules(repo.root, directory, scratch)
                found |= check_ignore(GitRunner(scratch, repo.git_dir), beyond)
    except (IgnoreCheckError, OSError) as exc:
        raise UnsafeRestoreError(
            "cannot tell whether a path is ignored now",
            [*direct, *beyond],
            hint=f"nothing was changed; {exc}",
        ) from exc
    return found


def ignored_by_target(
    repo: GitRepo, target_tree: str, deletes: Sequence[str], changes: Sequence[Change]
) -> set[str]:
    """Paths the plan would delete that the target's own ignore rules ignore: files of the user's
    that a restore had made visible by removing a ``.gitignore`` (an ignored ``.env``). The
    target's snapshot could never have held them, so deleting them would not make the work tree
    more like it; they are left alone (docs/design.md#ignored-files).

    Only needed when the plan changes a ``.gitignore``; the target's rule files along the
    deleted paths are written to a scratch work tree in our private dir, and git's own
    ``check-ignore`` answers there. When git cannot tell, nothing is kept: the paths are deleted
    as the plan says (the undo snapshot holds them)."""
    if not deletes or not any(c.path.rsplit("/", 1)[-1] == ".gitignore" for c in changes):
        return set()
    r = repo.pygit2
    directories = {""} | {p for d in deletes for p in parents(d)}
    try:
        with _scratch(repo) as scratch:
            for directory in directories:
                rules = directory + "/.gitignore" if directory else ".gitignore"
                entry = entry_at(repo, target_tree, rules)  # by raw bytes, any name
                if entry is None or entry.mode not in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
                    continue
                kind, size = r.odb.read_header(entry.oid)  # bounded before it is read
                if kind != ObjectType.BLOB or size > _RULES_MAX_BYTES:
                    return set()  # git cannot be asked: the paths go as the plan says
                _, data = r.odb.read(entry.oid)
                _write_rules(scratch, os.fsencode(directory), data)
            return check_ignore(GitRunner(scratch, repo.git_dir), deletes)
    except (IgnoreCheckError, OSError, KeyError, ValueError):
        return set()


# --- scratch work trees ---------------------------------------------------------------------


@contextlib.contextmanager
def _scratch(repo: GitRepo) -> Iterator[Path]:
    """``<git-dir>/pi-rewind/ignore-scratch-<pid>-<hex>/``, made only once its owner lock is
    held (:func:`ledger.git.owned.scratch_dir`): one a kill leaves is named by ``rewind doctor``
    and removed by ``rewind sweep`` once that lock is free, never while its owner lives."""
    with scratch_dir(make_private_dir(repo.git_dir)) as scratch:
        yield scratch


def _is_link(st: os.stat_result | None) -> bool:
    return st is not None and stat.S_ISLNK(st.st_mode)


def _real_dirs(guard: WorktreeGuard, paths: Sequence[str]) -> set[str]:
    """The root and every leading directory of ``paths`` that is a real directory, up to the
    first component that is not one."""
    found = {""}
    for path in paths:
        for parent in parents(path):
            st = guard.lstat(parent)
            if st is None or not stat.S_ISDIR(st.st_mode):
                break
            found.add(parent)
    return found


def _copy_rules(root: Path, directory: str, scratch: Path) -> None:
    """Copy ``directory/.gitignore`` of the work tree into ``scratch`` when it is a regular file,
    read as git reads it (never through a symlink: git ignores a symlinked rule file)."""
    rel = os.fsencode(directory)
    try:
        fd = open_dir(os.fsencode(root), rel.split(b"/") if rel else [], missing_ok=True)
    except NotADirectoryOnPath:
        return
    if fd is None:
        return
    try:
        try:
            rules = os.open(
                _RULES, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd
            )
        except OSError:  # absent, a symlink (ELOOP), unreadable: git reads no rules there
            return
    finally:
        os.close(fd)
    try:
        st = os.fstat(rules)
        if not stat.S_ISREG(st.st_mode):
            return
        if st.st_size > _RULES_MAX_BYTES:
            name = f"{directory}/.gitignore" if directory else ".gitignore"
            raise OSError(f"{display_name(name)} is larger than 64 MiB")
        with os.fdopen(rules, "rb", closefd=False) as reader:
            data = reader.read()
    finally:
        os.close(rules)
    _write_rules(scratch, rel, data)


def _write_rules(scratch: Path, directory: bytes, data: bytes) -> None:
    base = os.fsencode(scratch) + (b"/" + directory if directory else b"")
    os.makedirs(base, exist_ok=True)
    with open(base + b"/" + _RULES, "wb") as f:
        f.write(data)


__all__ = ["IgnoreCheckError", "check_ignore", "ignored_by_target", "ignored_now"]
