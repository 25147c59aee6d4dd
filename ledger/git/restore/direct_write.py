"""Writing and hashing a restore's files in-process when git could not convert a single byte.

Why it exists: a restore that writes one file used to start four git processes for it (a
throw-away index, ``git checkout-index`` into the staging directory, ``git hash-object`` to verify
it, ``git hash-object`` for a suspect of the one-scan re-check), ~4 ms each: most of a restore
served by the watcher or run inside the bridge (docs/capture.md#writing-in-process). git's checkout is
needed for what only git knows: attributes (``text``, ``eol``, ``filter``, ``ident``,
``working-tree-encoding``), filters and line-ending conversion. When none of them can apply, git
writes a blob's bytes as they are, and hashes a file's bytes as they are; this module does the
same without a process.

When the in-process path is taken (:func:`conversion_free`; anything else keeps git's path):
- no attribute source that could name the paths: no ``.gitattributes`` in any directory on the way
  to any of them in the work tree (git's checkout reads the work tree's, and the throw-away index's,
  which only holds the written paths: a written or deleted ``.gitattributes`` sends the whole
  restore to git), no ``info/attributes``, no ``core.attributesFile`` (nor the XDG default), no
  system ``etc/gitattributes``, no ``attr.tree`` nor ``GIT_ATTR_SOURCE``;
- no ``filter.*`` key and no ``core.eol`` in git's configuration (without an attribute neither
  converts anything; refused all the same). ``core.autocrlf`` needs no check: every git command of a
  restore runs with ``core.autocrlf=false`` (``PRIVATE_CONFIG``), so git converts nothing for it;
- regular files and symlinks only (a gitlink or any other mode: git), a symlink only where git
  would make one (``core.symlinks`` not false) and with a target git can write (no NUL, not
  empty, shorter than ``PATH_MAX``: git fails on those, and its error is the one to report);
  at most :data:`DIRECT_BYTES` in all (larger restores stream through git);
- git's configuration could be read (:mod:`ledger.git.config_view`).

What git does and this module copies (``entry.c``, tested against ``git checkout-index``):
a regular file is created with ``open(O_CREAT | O_EXCL, 0777 if executable else 0666)``, so the
process umask decides its permission bits exactly as for git (a served command runs under the
client's umask, :mod:`ledger.bridge.served_commands`); a symlink gets the blob's bytes as its
target; missing directories are created 0777 before the umask (by the placement, which renames
each flat-staged file to its path: :func:`write_staged`).

Invariants: files are written only into the restore's staging directory (the caller renames them
into place, :mod:`ledger.git.restore.placement`); every directory is reached with ``O_NOFOLLOW``
(:mod:`ledger.git.restore.nofollow`) and every file is created with ``O_EXCL | O_NOFOLLOW``, so
nothing is written through a symlink; hashing reads with ``O_NOFOLLOW`` and never writes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence

import pygit2
from pygit2.enums import FileMode

from ledger.git.config_view import ConfigView, config_view, git_prefix, path_value
from ledger.git.repo import GitRepo
from ledger.git.restore.nofollow import NotADirectoryOnPath, open_dir
from ledger.plain import FrozenPlain

DIRECT_BYTES = 64 << 20
"""The most bytes written (or hashed) in-process per restore; beyond it git streams them."""

_PLAIN = frozenset({FileMode.BLOB, FileMode.BLOB_EXECUTABLE})
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK | O_NOCTTY: a path swapped for a FIFO or a device after its lstat never blocks the
# open nor becomes our terminal; fstat then refuses anything but a regular file.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY


class Staged(FrozenPlain):
    """One file to write: its path, tree mode and bytes (a symlink's: its target)."""

    __slots__ = ("data", "mode", "path")
    path: str
    mode: int
    data: bytes

    def __init__(self, path: str, mode: int, data: bytes) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "data", data)

    def _fields(self) -> tuple[object, ...]:
        return (self.path, self.mode, self.data)


def _global_attribute_files(repo: GitRepo, view: ConfigView) -> list[str] | None:
    """Every attribute file outside the work tree git could read (``None``: one is configured
    in a way this module does not follow: git decides)."""
    files = [
        str(repo.common_dir / "info" / "attributes"),
        str(repo.git_dir / "info" / "attributes"),
        "/etc/gitattributes",
    ]
    prefix = git_prefix()
    if prefix:
        files.append(os.path.join(prefix, "etc", "gitattributes"))
    raw = view.values.get("core.attributesfile") or ""
    if raw.startswith("~") and not raw.startswith("~/"):
        return None  # another user's home (~user/...): not expanded here
    named = path_value(view, "core.attributesfile", repo.root)
    if named == "":
        return None
    if named is not None:
        files.append(named)
    else:  # git's default: $XDG_CONFIG_HOME/git/attributes, else ~/.config/git/attributes
        home = os.environ.get("HOME", "")
        xdg = os.environ.get("XDG_CONFIG_HOME")
        if xdg:
            files.append(os.path.join(xdg, "git", "attributes"))
        if home:
            files.append(os.path.join(home, ".config", "git", "attributes"))
    return files


def conversion_free(
    repo: GitRepo, paths: Iterable[str], view: ConfigView | None = None
) -> str | None:
    """``None`` when git would neither convert the bytes it writes to nor hash from any of
    ``paths`` (see the module docstring); else why it might (git's path is then taken)."""
    view = view or config_view(repo)
    if not view.complete:
        return "git's configuration could not be read"
    if os.environ.get("GIT_ATTR_SOURCE") or "attr.tree" in view.values:
        return "attributes are read from a tree (attr.tree, GIT_ATTR_SOURCE)"
    if view.has_prefix("filter."):
        return "a filter is configured"
    if "core.eol" in view.values:
        return "core.eol is set"
    files = _global_attribute_files(repo, view)
    if files is None:
        return "core.attributesFile is set to nothing"
    for name in files:
        if os.path.lexists(name):
            return f"an attribute file exists: {name}"
    root = str(repo.root)
    seen: set[str] = set()
    for path in paths:
        parts = path.split("/")
        if parts[-1].lower() == ".gitattributes":  # any case: a case-folding file system
            return f"a .gitattributes is written or deleted: {path}"
        for depth in range(len(parts)):
            directory = "/".join(parts[:depth])
            if directory in seen:
                continue
            seen.add(directory)
            if os.path.lexists(os.path.join(root, directory, ".gitattributes")):
                return f"a .gitattributes applies: {directory or '.'}"
    return None


def stage_plan(
    repo: GitRepo,
    writes: Sequence[tuple[str, int, str]],
    deleted: Sequence[str] = (),
) -> list[Staged] | str:
    """The files to write in-process, with their bytes, or why git must write them."""
    view = config_view(repo)
    reason = conversion_free(repo, [*(w[0] for w in writes), *deleted], view)
    if reason is not None:
        return reason
    links_ok = _git_bool(view, "core.symlinks", default=True)
    odb = repo.pygit2
    staged: list[Staged] = []
    total = 0
    for path, mode, oid in writes:
        if mode not in _PLAIN and not (mode == FileMode.LINK and links_ok):
            return f"{path}: mode {mode:o} is checked out by git"
        try:
            # The size from the object's header, before any blob is inflated into memory.
            kind, size = odb.odb.read_header(oid)
            if kind != pygit2.enums.ObjectType.BLOB:
                return f"{path}: {oid} is not a blob"
            total += size
            if total > DIRECT_BYTES:
                return "too many bytes to write in-process"
            blob = odb[oid]
        except (KeyError, ValueError, pygit2.GitError):
            return f"{path}: blob {oid} unreadable here"
        if not isinstance(blob, pygit2.Blob):
            return f"{path}: {oid} is not a blob"
        data = blob.data
        if mode == FileMode.LINK and (not data or b"\0" in data or len(data) >= 4096):
            return f"{path}: a symlink target git writes its own way"
        staged.append(Staged(path, mode, data))
    return staged


def _git_bool(view: ConfigView, key: str, *, default: bool) -> bool:
    if key not in view.values:
        return default
    value = view.values[key]
    if value is None:
        return True
    try:
        return bool(pygit2.Config.parse_bool(value))
    except (pygit2.GitError, ValueError):
        return default


def write_staged(root: os.PathLike[str] | str, staging: str, files: Sequence[Staged]) -> list[str]:
    """Write ``files`` into ``root/staging/`` as git's checkout would (module docstring), each
    under a name of its own, not its path: ``0``, ``1``, … in order, returned for the placement
    (:meth:`~ledger.git.restore.placement.Placer.place_all`), which creates the work tree's
    directories as git does. Staging them flat makes no directory that is only removed again:
    at ~50 files in ~40 directories, each ``mkdir`` (and ``rmdir`` at the end) cost far more than
    the file (measured: 20 ms against 0.8 ms)."""
    names: list[str] = []
    try:
        fd = open_dir(os.fsencode(os.fspath(root)), [os.fsencode(staging)])
    except NotADirectoryOnPath as exc:
        # Only our fresh staging directory is opened: something replaced it meanwhile.
        raise OSError(exc.errno, f"staging directory changed under us: {exc.part!r}") from None
    assert fd is not None  # only missing_ok gives None
    try:
        for item in files:
            name = str(len(names))
            names.append(name)
            if item.mode == FileMode.LINK:
                os.symlink(item.data, name, dir_fd=fd)
                continue
            perm = 0o777 if item.mode == FileMode.BLOB_EXECUTABLE else 0o666
            out = os.open(name, _WRITE_FLAGS, perm, dir_fd=fd)
            try:
                view = memoryview(item.data)
                while view:
                    view = view[os.write(out, view) :]
            finally:
                os.close(out)
    finally:
        os.close(fd)
    return names


def read_file(root: os.PathLike[str] | str, path: str, limit: int = DIRECT_BYTES) -> bytes | None:
    """The bytes of the regular file ``path`` (``None``: not a regular file any more, unreadable
    or larger than ``limit``). The last component is opened with ``O_NOFOLLOW``."""
    name = os.fsencode(os.fspath(root)) + b"/" + os.fsencode(path)
    try:
        fd = os.open(name, _READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks: list[bytes] = []
        held = 0
        while held <= limit:  # a file still growing is read to limit + 1 bytes, no further
            chunk = os.read(fd, min(max(st.st_size + 1, 1 << 16), limit + 1 - held))
            if not chunk:
                break
            chunks.append(chunk)
            held += len(chunk)
        data = b"".join(chunks)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def blob_id(data: bytes) -> str:
    """The blob id git gives ``data`` (no filter applies: see :func:`conversion_free`)."""
    return str(pygit2.hash(data))


__all__ = [
    "DIRECT_BYTES",
    "Staged",
    "blob_id",
    "conversion_free",
    "read_file",
    "stage_plan",
    "write_staged",
]
