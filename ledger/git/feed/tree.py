"""The change feed's tree: a base capture plus the paths the watcher saw change.

Why it exists: :mod:`ledger.git.feed.service` decides *when* a fed capture can be trusted; this module
computes it (docs/design.md#the-private-index). Each dirty path is classified the way ``git add
-A`` into a fresh index would: an entry of the base is not ignored (ignore rules did not change:
the feed scans fully when they may have); a new path is asked to ``git check-ignore
--no-index``; its bytes come from ``git hash-object`` (attributes and clean filters applied)
through :func:`ledger.git.capture.treeedit.current_entries`.

Invariants: writes only git objects. Anything the feed does not model (nested ``.git``, gitlinks,
protected directories, too-large files, special files, names git reads differently) raises
:class:`NeedScan`, and the caller scans fully instead.
"""

from __future__ import annotations

import os
import select
import stat
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2
from pygit2.enums import FileMode

from ledger.git.capture.plan import SkippedPath, protected_prefix
from ledger.git.capture.treeedit import LazyUnsupported, current_entries, edit_tree
from ledger.git.repo import is_git_dir
from ledger.git.runner import GitResult, GitRunner

if TYPE_CHECKING:
    from ledger.git.capture.scan import Capturer

FED_MAX_PATHS = 5_000
"""More dirty paths than this: a full scan (hash-object and tree edits would cost more)."""
KEPT_MAX_PATHS = 256
"""Batches up to this size go to the kept git processes; larger ones to a one-shot git."""
KEPT_TIMEOUT_S = 120.0
PIPE_PAGE = 4096
"""A kept process is sent a run of paths at once, then read its answers (one round trip per run,
not per path). A run's input is at most the smallest capacity a Linux pipe can have (one page,
when the user's pipe quota is spent): that write never waits for git, so git, which may wait for
us to read its answers, cannot deadlock with us."""


OBJECT_CACHE_BYTES = 1 << 20
"""The bound of libgit2's object cache in a process that runs a feed (:func:`bound_git_memory`)."""
PACK_WINDOW_BYTES = 8 << 20
PACK_MAPPED_BYTES = 32 << 20
"""How much of the packs libgit2 maps at once there, in windows of :data:`PACK_WINDOW_BYTES`."""


def bound_git_memory() -> None:
    """Bound what libgit2 keeps in memory in this long-lived process (process-wide settings:
    they change how much is kept, never what is read).

    The object cache: libgit2 keeps every tree and commit it parses (up to 4 KiB each) in a
    per-repository cache whose total is capped process-wide at 256 MiB by default, a cap made
    for short commands. Every fed capture writes and reads new trees (the changed directories
    up to the root), and the watcher's snapshot service keeps one repository open for its whole
    life, so the cache only grew: ~1.3 MB of accounted object bytes per 100 prompts, ~2.5× that
    in the heap (the parsed entries); the watcher's RSS went 59 → 131 MB over 1,500 prompts
    (docs/soak.md#watcher-memory). Worth caching here is what one capture or one engine
    operation reads again (the directories on a changed path, a session's latest commits):
    :data:`OBJECT_CACHE_BYTES`. Past it libgit2 evicts entries as it stores new ones; an evicted
    object is read again from the object database.

    The pack windows: libgit2 maps packs in windows of up to 1 GiB and unmaps them only past
    8 GiB mapped, so each pack the disk upkeep writes (docs/design.md#disk-upkeep) added its
    pages to the watcher's RSS for good (+1.4 MB a pack in the soak). Past
    :data:`PACK_MAPPED_BYTES` the least recently used window is unmapped (the file stays open;
    its pages stay in the page cache, a later read maps them again)."""
    pygit2.settings.cache_max_size(OBJECT_CACHE_BYTES)
    pygit2.settings.mwindow_size = PACK_WINDOW_BYTES
    pygit2.settings.mwindow_mapped_limit = PACK_MAPPED_BYTES


class NeedScan(Exception):
    """The dirty set holds something the feed does not model: scan fully. ``why`` is the kind of
    reason without the path (the feed counts fallbacks by it), ``str()`` the whole message."""

    def __init__(self, why: str, path: str | None = None) -> None:
        super().__init__(f"{path}: {why}" if path is not None else why)
        self.why = why


def fed_tree(
    capturer: Capturer,
    base_tree: str,
    base_skipped: tuple[SkippedPath, ...],
    filemode: bool,
    dirty: set[str],
    git: GitRunner | None = None,
) -> tuple[str, int]:
    """``(tree, changed paths)``: ``base_tree`` (a capture's tree, whose skipped paths are
    ``base_skipped``) with every path of ``dirty`` as it is now, classified the way ``git add -A``
    into a fresh index would. Raises :class:`NeedScan` for anything the feed does not model.
    ``git``: the runner for ``check-ignore`` and ``hash-object`` (a :class:`KeptGit`), by default
    the capturer's."""
    from ledger.git.capture.scan import PRIVATE_CONFIG

    runner = git or capturer.git

    if len(dirty) > FED_MAX_PATHS:
        raise NeedScan(f"more than {FED_MAX_PATHS} changed paths")
    repo = capturer.repo.pygit2
    root = capturer.root_s
    settings = capturer.settings
    limit = settings.max_untracked_file_bytes
    protected = set(settings.protected_dirs)
    tree = repo.get(base_tree)
    if not isinstance(tree, pygit2.Tree):
        raise NeedScan("base tree missing")
    skipped_files = {s.path for s in base_skipped if not s.path.endswith("/")}
    skipped_dirs = {s.path[:-1]: s.reason for s in base_skipped if s.path.endswith("/")}
    dirs: dict[str, str] = {}
    changes: dict[str, tuple[int, pygit2.Oid] | None] = {}
    known: list[str] = []
    new: list[str] = []
    pending = sorted(dirty)
    listed = set(dirty)
    for path in pending:  # grows while it is read: see the directory case below
        parts = path.split("/")
        if ".git" in parts:
            raise NeedScan("a nested repository changed", path)
        if parts[-1] in (".gitignore", ".gitattributes"):
            raise NeedScan("ignore or attribute rules changed", path)
        if path in skipped_files or path in skipped_dirs:
            raise NeedScan("a skipped path changed", path)
        under = _under_skipped(parts, skipped_dirs)
        if under is not None:
            if under[1] == "git-dir" and is_git_dir(os.path.join(root, under[0])):
                continue  # a push into a git directory in the tree: still left out
            if under[1] != "protected-dir" or not _real_dir(root, under[0]):
                raise NeedScan("changed under a skipped directory", f"{path} (in {under[0]}/)")
            continue  # still skipped: the user's index is watched (see _env_signature)
        if parts[-1] == "HEAD" and len(parts) > 1 and is_git_dir(os.path.join(root, *parts[:-1])):
            # A git directory appeared (git init --bare, a clone): the full scan leaves it out
            # (docs/design.md#git-directories-are-not-work-trees).
            raise NeedScan("a git directory in the work tree", path)
        parent = _parent_state(root, parts, dirs)
        if parent == "repo":
            raise NeedScan("inside a nested repository", path)
        if parent == "gone":
            changes[path] = None
            continue
        try:
            st = os.lstat(os.path.join(root, path))
        except FileNotFoundError:
            changes[path] = None
            continue
        existing = _entry(tree, path)
        if stat.S_ISDIR(st.st_mode):
            if os.path.lexists(os.path.join(root, path, ".git")):
                raise NeedScan("a nested repository", path)
            if existing is not None and existing[0] != FileMode.TREE:
                if existing[0] == FileMode.COMMIT:
                    raise NeedScan("a gitlink changed", path)
                changes[path] = None  # a file became a directory: its files follow
            elif existing is not None:
                # The watcher reports a directory moved away (and one made again under its name)
                # by its own path only: the files the base holds under it are re-read too.
                for leaf in _base_leaves(repo, existing[1], path):
                    if leaf not in listed:
                        listed.add(leaf)
                        pending.append(leaf)
                if len(pending) > FED_MAX_PATHS:
                    raise NeedScan(f"more than {FED_MAX_PATHS} changed paths")
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise NeedScan("not a file, symlink or directory", path)
        if existing is not None and existing[0] == FileMode.COMMIT:
            raise NeedScan("a gitlink changed", path)
        if limit and stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise NeedScan("larger than the untracked size limit", path)
        if existing is not None and existing[0] != FileMode.TREE:
            known.append(path)
        else:
            new.append(path)
    if new:
        ignored = _check_ignore(runner, new)
        for path in new:
            if path in ignored:
                changes[path] = None
            elif protected and protected_prefix(path, protected, include_last=False):
                raise NeedScan("in a protected directory", path)
            else:
                known.append(path)
    try:
        if known:
            changes.update(
                current_entries(
                    runner,
                    repo,
                    root,
                    known,
                    filemode=filemode,
                    config=PRIVATE_CONFIG,
                )
            )
        return edit_tree(repo, base_tree, changes), len(changes)
    except LazyUnsupported as exc:
        raise NeedScan("tree edit unsupported", str(exc)) from None


def _check_ignore(git: GitRunner, paths: list[str]) -> set[str]:
    """Which of ``paths`` git's exclude rules ignore (``check-ignore`` refuses literal pathspec
    mode, and would read a leading ``:`` as pathspec magic)."""
    if any(p.startswith(":") for p in paths):
        raise NeedScan("a new path starts with ':'")
    data = b"".join(os.fsencode(p) + b"\0" for p in paths)
    result = git.run(
        list(CHECK_IGNORE),
        input=data,
        operation="git check-ignore",
        check=False,
        extra_env={"GIT_LITERAL_PATHSPECS": "0"},
    )
    if result.returncode not in (0, 1):
        raise NeedScan("git check-ignore failed")
    return {os.fsdecode(p) for p in result.lines_z()}


CHECK_IGNORE = ("check-ignore", "--no-index", "-z", "--stdin")
HASH_PATHS = ("hash-object", "-w", "--stdin-paths")


class KeptGit(GitRunner):
    """A :class:`GitRunner` that serves small ``check-ignore --stdin`` and ``hash-object
    --stdin-paths`` batches from git processes kept running between captures (two process
    starts per fed capture were most of its cost: ~10 ms each on a loaded machine).

    Exactness: git answers each path as it reads it (both commands flush per path; we send runs
    of paths, :data:`PIPE_PAGE`, and read as many answers), with the
    ignore and attribute rules and configuration it loaded *when it started*. Every change of
    those sends the feed to a full scan (a ``.gitignore``/``.gitattributes`` event, the
    environment signature), and the feed then replaces this object (:meth:`close`), so a kept
    process never outlives the rules it read. Anything unexpected (a process that died, a short
    answer, a timeout) raises :class:`NeedScan` and closes the processes.
    """

    def __init__(self, root: Path, git_dir: Path) -> None:
        super().__init__(root, git_dir)
        self._procs: dict[tuple[object, ...], subprocess.Popen[bytes]] = {}
        self._buffers: dict[int, bytearray] = {}

    def close(self) -> None:
        procs, self._procs = list(self._procs.values()), {}
        for proc in procs:
            _stop(proc)

    def run(
        self,
        args: Sequence[str],
        *,
        operation: str | None = None,
        index: Path | None = None,
        config: Iterable[tuple[str, str]] = (),
        input: bytes | None = None,
        optional_locks: bool = False,
        check: bool = True,
        cwd: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> GitResult:
        kind = tuple(args)
        sep = b"\0" if kind == CHECK_IGNORE else b"\n"
        items = (input or b"").split(sep)
        if items and items[-1] == b"":
            items.pop()
        if (
            kind not in (CHECK_IGNORE, HASH_PATHS)
            or index is not None
            or optional_locks
            or cwd is not None
            or not items
            or len(items) > KEPT_MAX_PATHS
        ):
            return super().run(
                args,
                operation=operation,
                index=index,
                config=config,
                input=input,
                optional_locks=optional_locks,
                check=check,
                cwd=cwd,
                extra_env=extra_env,
            )
        config = tuple(config)
        key = (kind, config, tuple(sorted((extra_env or {}).items())))
        try:
            if kind == CHECK_IGNORE:
                return self._check_ignore(key, config, extra_env, items)
            return self._hash(key, config, extra_env, items)
        except (OSError, ValueError) as exc:
            self.close()
            raise NeedScan(f"a kept git process failed: {exc}") from None

    def _check_ignore(
        self,
        key: tuple[object, ...],
        config: tuple[tuple[str, str], ...],
        extra_env: Mapping[str, str] | None,
        paths: list[bytes],
    ) -> GitResult:
        # -v -n: one record of four fields per path, matched or not (so the answer is complete);
        # a match of a negated pattern ("!x") means "not ignored", as without -v.
        proc = self._proc(key, [*CHECK_IGNORE, "-v", "-n"], config, extra_env)
        ignored = []
        for batch in _batches(paths):
            self._send(proc, b"".join(path + b"\0" for path in batch))
            for path in batch:
                source, _line, pattern, name = (self._read(proc, b"\0") for _ in range(4))
                if name != path:
                    raise ValueError("check-ignore answered for another path")
                if source and not pattern.startswith(b"!"):
                    ignored.append(path + b"\0")
        return GitResult(0 if ignored else 1, b"".join(ignored), b"")

    def _hash(
        self,
        key: tuple[object, ...],
        config: tuple[tuple[str, str], ...],
        extra_env: Mapping[str, str] | None,
        paths: list[bytes],
    ) -> GitResult:
        proc = self._proc(key, list(HASH_PATHS), config, extra_env)
        out = []
        for batch in _batches(paths):
            self._send(proc, b"".join(path + b"\n" for path in batch))
            for _path in batch:
                oid = self._read(proc, b"\n")
                if len(oid) not in (40, 64) or not all(c in b"0123456789abcdef" for c in oid):
                    raise ValueError(f"hash-object answered {oid[:80]!r}")
                out.append(oid + b"\n")
        return GitResult(0, b"".join(out), b"")

    def _proc(
        self,
        key: tuple[object, ...],
        args: list[str],
        config: tuple[tuple[str, str], ...],
        extra_env: Mapping[str, str] | None,
    ) -> subprocess.Popen[bytes]:
        proc = self._procs.get(key)
        if proc is None or proc.poll() is not None:
            proc = subprocess.Popen(
                self.command(args, config),
                cwd=str(self.root),
                env=self.env(extra=extra_env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            self._procs[key] = proc
            self._buffers[proc.pid] = bytearray()
        return proc

    @staticmethod
    def _send(proc: subprocess.Popen[bytes], data: bytes) -> None:
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.flush()

    def _read(self, proc: subprocess.Popen[bytes], sep: bytes) -> bytes:
        """One ``sep``-terminated field of ``proc``'s output (without ``sep``)."""
        assert proc.stdout is not None
        buffer = self._buffers[proc.pid]
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + KEPT_TIMEOUT_S
        while sep not in buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ValueError("no answer in time")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise ValueError("the process ended")
            buffer += chunk
        end = buffer.index(sep)
        field = bytes(buffer[:end])
        del buffer[: end + len(sep)]
        return field


def _batches(paths: list[bytes]) -> Iterator[list[bytes]]:
    """``paths`` in runs whose input (with separators) fits in :data:`PIPE_PAGE` bytes; a
    longer path makes a run of its own."""
    batch: list[bytes] = []
    size = 0
    for path in paths:
        if batch and size + len(path) + 1 > PIPE_PAGE:
            yield batch
            batch, size = [], 0
        batch.append(path)
        size += len(path) + 1
    if batch:
        yield batch


def _stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
    finally:
        if proc.stdout is not None:
            proc.stdout.close()


def _entry(tree: pygit2.Tree, path: str) -> tuple[int, str] | None:
    """The base's entry at ``path`` as ``(mode, oid)``, or ``None``.

    Not ``tree[path]``: pygit2 (1.21) keeps a reference to the key string whenever a lookup
    takes its by-path branch (a path with ``/``, or a name that is not there), so the long-lived
    watcher kept every dirty path it ever looked up (~55 B each, for good). One name at a time,
    by binary search over the entries (:func:`_child`), nothing is kept."""
    names = path.split("/")
    want_tree = len(names) > 1 and not names[-1]  # "dir/": only a tree, as libgit2 reads it
    if want_tree:
        names.pop()
    node: pygit2.Object = tree
    for name in names:
        if not isinstance(node, pygit2.Tree):
            return None
        found = _child(node, os.fsencode(name))
        if found is None:
            return None
        node = found
    if want_tree and not isinstance(node, pygit2.Tree):
        return None
    return int(node.filemode), str(node.id)


def _child(tree: pygit2.Tree, name: bytes) -> pygit2.Object | None:
    """The entry ``name`` of ``tree`` (``None``: none), found by binary search in git's order:
    byte-wise, a tree's name compared as if it ended with ``/``; so a file ``name`` sorts at
    ``name`` and a tree ``name`` at ``name/``. Integer indexing keeps no reference to anything."""
    size = len(tree)
    for key in (name, name + b"/"):
        lo, hi = 0, size
        while lo < hi:  # the first entry whose key is not below ``key``
            mid = (lo + hi) // 2
            if _sort_key(tree[mid]) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < size:
            entry = tree[lo]
            if _sort_key(entry) == key:
                return entry
    return None


def _sort_key(entry: pygit2.Object) -> bytes:
    raw = entry.raw_name or b""
    return raw + b"/" if entry.filemode == FileMode.TREE else raw


def _base_leaves(repo: pygit2.Repository, tree_id: str, path: str) -> list[str]:
    """Every entry of the base tree ``tree_id`` (at ``path``) that is not a tree, as paths."""
    out: list[str] = []
    stack = [(tree_id, path)]
    while stack:
        oid, prefix = stack.pop()
        tree = repo.get(oid)
        if not isinstance(tree, pygit2.Tree):
            raise NeedScan("base tree missing", prefix)
        for entry in tree:
            if entry.raw_name is None:
                raise NeedScan("an entry without a name", prefix)
            child = f"{prefix}/{os.fsdecode(entry.raw_name)}"
            if entry.filemode == FileMode.TREE:
                stack.append((str(entry.id), child))
            else:
                out.append(child)
    return out


def _under_skipped(parts: list[str], skipped_dirs: dict[str, str]) -> tuple[str, str] | None:
    for i in range(1, len(parts)):
        prefix = "/".join(parts[:i])
        if prefix in skipped_dirs:
            return prefix, skipped_dirs[prefix]
    return None


def _real_dir(root: str, rel: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(os.path.join(root, rel)).st_mode)
    except OSError:
        return False


def _parent_state(root: str, parts: list[str], cache: dict[str, str]) -> str:
    """``ok`` (every ancestor is a real directory without ``.git``), ``gone`` (one is not a
    directory: the path is not in the work tree), or ``repo`` (one is a nested repository)."""
    for i in range(1, len(parts)):
        rel = "/".join(parts[:i])
        state = cache.get(rel)
        if state is None:
            full = os.path.join(root, rel)
            if not _real_dir(root, rel):
                state = "gone"
            elif os.path.lexists(os.path.join(full, ".git")):
                state = "repo"
            else:
                state = "ok"
            cache[rel] = state
        if state != "ok":
            return state
    return "ok"


__all__ = [
    "FED_MAX_PATHS",
    "OBJECT_CACHE_BYTES",
    "PACK_MAPPED_BYTES",
    "PACK_WINDOW_BYTES",
    "KeptGit",
    "NeedScan",
    "bound_git_memory",
    "fed_tree",
]
