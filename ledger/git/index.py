"""The private, persistent capture index under ``<git-dir>/pi-rewind/`` and what it remembers.

Why it exists: building a fresh index and re-hashing every file at every capture (the reference's
method) costs seconds on large repositories (defect D9). Keeping our own index lets git's stat
cache, cache-tree and untracked cache do the work, so a capture costs a stat per file plus
hashing what changed. The index is ours alone: git runs on it with our settings, never the
user's weakened ones.

What lives in ``<git-dir>/pi-rewind/``:
- ``index``: the private index (git's format v2, so that racy entries can be found without
  parsing every entry; with the untracked cache; never a split index, whose shared files git
  would put in ``.git/`` itself).
- ``lock``: held with ``flock`` for the whole of a capture, so two processes never use the
  private index at once.
- ``capture-state.json``: what the index does not say: the fingerprint of everything outside the
  index that changes capture results without touching a file's stat data (configuration, global
  ignore and attribute files, our settings), per-directory signatures of ``.gitignore`` and
  ``.gitattributes`` (and whether the directory holds a ``.git``), the gitlinks, and the racy
  entries (see below).

Global fingerprint (:func:`global_fingerprint`): some inputs change a capture without changing any
file's stat data: configuration (``core.excludesFile``, ``core.attributesFile``, filters,
``core.fileMode``, ``core.symlinks`` …), the global ignore and attribute files, and our own
settings. All of them are hashed; when the hash differs from the one the private index was built
under, the index is rebuilt from nothing. Conservative: every ``core.*``, ``filter.*``,
``index.*``, ``feature.*`` and ``extensions.*`` key counts, so an unrelated change costs a rebuild,
never a wrong tree.

Invariants:
- A missing, stale, unreadable or corrupt index or state is rebuilt from nothing, never trusted.
- ``state.tree`` is the tree of the index's entries, or ``None``. A capture marks itself in
  progress (``capture-in-progress``) before git may write the index and clears the mark when it
  saves the state; a state found with the mark (a crash half-way) is not trusted.
- Racy entries. Git here is built without nanosecond stat comparison: it compares ctime in whole
  seconds and decides "racily clean" from mtime alone (entry mtime not before the index file's
  mtime, in seconds). A same-size rewrite that restores the mtime, within the second in which
  git recorded the entry, is therefore invisible to a kept index. At the end of every capture
  the entries whose *recorded* ctime falls within the capture's own seconds (whether we hashed
  them or ``git status`` refreshed them) are found, and the index file's mtime is moved back to
  their oldest mtime, so that git compares their content next time. Entries whose mtime is too
  old for that (more than :data:`ledger.git.capture.RACY_BACKDATE_LIMIT_S` ago) are listed in
  ``danger`` instead, and the next capture drops them so that they are hashed again. The real
  write time is kept (``index_mtime_real_ns``) and restored once nothing is racy.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import GitError
from ledger.git.repo import GitRepo
from ledger.git.runner import GitRunner
from ledger.settings import SnapshotSettings

STATE_VERSION = 1
PRIVATE_DIR_NAME = "pi-rewind"
LOCK_TIMEOUT_S = 120.0

Signature = list[Any] | None


def private_dir(git_dir: Path) -> Path:
    return Path(git_dir) / PRIVATE_DIR_NAME


@dataclass
class CaptureState:
    """The persisted companion of the private index (``capture-state.json``)."""

    fingerprint: str = ""
    tree: str | None = None
    """The tree of the private index's entries (``git write-tree``), when known."""
    dirs: dict[str, list[Any]] = field(default_factory=dict)
    """Directory → [``.gitignore`` signature, ``.gitattributes`` signature, has ``.git``]."""
    gitlinks: list[str] = field(default_factory=list)
    danger: list[str] = field(default_factory=list)
    danger_until: int = 0
    kept_protected: list[str] = field(default_factory=list)
    index_mtime_real_ns: int = 0
    """The index file's mtime as git last wrote it."""
    index_mtime_set_ns: int = 0
    """The mtime we last gave the index file (equal to the real one unless moved back)."""

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": STATE_VERSION,
                "fingerprint": self.fingerprint,
                "tree": self.tree,
                "dirs": self.dirs,
                "gitlinks": sorted(set(self.gitlinks)),
                "danger": sorted(set(self.danger)),
                "danger_until": self.danger_until,
                "kept_protected": sorted(set(self.kept_protected)),
                "index_mtime_real_ns": self.index_mtime_real_ns,
                "index_mtime_set_ns": self.index_mtime_set_ns,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode("utf-8", "surrogateescape")

    @classmethod
    def from_json(cls, raw: bytes) -> CaptureState | None:
        try:
            data = json.loads(raw.decode("utf-8", "surrogateescape"))
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            return None
        try:
            state = cls(
                fingerprint=str(data["fingerprint"]),
                tree=data["tree"] if isinstance(data.get("tree"), str) else None,
                dirs={str(k): list(v) for k, v in dict(data["dirs"]).items()},
                gitlinks=[str(p) for p in data["gitlinks"]],
                danger=[str(p) for p in data["danger"]],
                danger_until=int(data["danger_until"]),
                kept_protected=[str(p) for p in data.get("kept_protected", [])],
                index_mtime_real_ns=int(data.get("index_mtime_real_ns", 0)),
                index_mtime_set_ns=int(data.get("index_mtime_set_ns", 0)),
            )
        except (KeyError, TypeError, ValueError):
            return None
        if any(not isinstance(v, list) or len(v) != 3 for v in state.dirs.values()):
            return None
        return state


_HELD = threading.local()
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


class PrivateIndex:
    """Paths, lock and state file of one work tree's private capture index."""

    def __init__(self, git_dir: Path) -> None:
        self.dir = private_dir(git_dir)
        self.index_path = self.dir / "index"
        self.state_path = self.dir / "capture-state.json"
        self.lock_path = self.dir / "lock"
        self.pending_path = self.dir / "capture-in-progress"

    # --- locking ------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
        """Exclusive use of the private index across processes (``flock``) and threads.

        Re-entrant within a thread: a restore holds the lock across its captures, which take it
        again. (A second ``flock`` on a new descriptor would wait for ourselves.)
        """
        key = str(self.lock_path)
        held: dict[str, int] = _HELD.__dict__.setdefault("depth", {})
        if held.get(key):
            held[key] += 1
            try:
                yield
            finally:
                held[key] -= 1
            return
        with _THREAD_LOCKS_GUARD:
            thread_lock = _THREAD_LOCKS.setdefault(key, threading.Lock())
        if not thread_lock.acquire(timeout=timeout_s):
            raise GitError(
                "snapshot",
                f"the capture index {self.dir} is busy in this process",
                hint="another rewind capture is running; try again",
            )
        try:
            with self._flocked(timeout_s):
                held[key] = 1
                try:
                    yield
                finally:
                    held[key] = 0
        finally:
            thread_lock.release()

    @contextlib.contextmanager
    def _flocked(self, timeout_s: float) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            deadline = time.monotonic() + timeout_s
            delay = 0.005
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise GitError("snapshot", f"cannot lock {self.lock_path}: {exc}") from exc
                    if time.monotonic() >= deadline:
                        raise GitError(
                            "snapshot",
                            f"the capture index {self.dir} is locked by another process",
                            hint="another rewind capture is running; try again",
                        ) from exc
                    time.sleep(delay)
                    delay = min(delay * 2, 0.1)
            # We hold the lock, so no rewind process is using the private index: a leftover
            # git lock file next to it comes from a crashed command and would block git.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.dir / "index.lock")
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    # --- state --------------------------------------------------------------------------

    def load_state(self) -> CaptureState | None:
        """The state, or ``None`` when it (or the index) is missing or unreadable, or when a
        capture stopped half-way (its racy entries were never guarded)."""
        if self.pending_path.exists():
            return None
        try:
            raw = self.state_path.read_bytes()
        except OSError:
            return None
        if not self.index_path.is_file():
            return None
        return CaptureState.from_json(raw)

    def health(self) -> str:
        """``ok``, ``missing`` (built at the next capture), ``interrupted`` or ``stale``
        (rebuilt at the next capture), or ``corrupt`` (not an index file; rebuilt too)."""
        if not self.index_path.exists():
            return "missing"
        if self.pending_path.exists():
            return "interrupted"
        try:
            with open(self.index_path, "rb") as handle:
                magic = handle.read(4)
        except OSError:
            return "corrupt"
        if magic != b"DIRC":
            return "corrupt"
        return "ok" if self.load_state() is not None else "stale"

    def save_state(self, state: CaptureState) -> None:
        tmp = self.state_path.with_name(f"{self.state_path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(state.to_json())
        os.replace(tmp, self.state_path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.pending_path)

    def begin(self) -> None:
        """Mark a capture in progress (before git may write the index); :meth:`save_state`
        clears the mark once the state matches the index again."""
        self.pending_path.touch()

    def reset(self) -> None:
        """Forget everything: the next capture starts from an empty index."""
        for path in (self.index_path, self.state_path, self.dir / "index.lock", self.pending_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


# --- signatures of rule files --------------------------------------------------------------


def file_signature(path: Path | str, previous: Signature = None) -> Signature:
    """``[size, mtime_ns, ctime_ns, ino, sha1]`` of a file (not followed if a symlink), or
    ``None`` when absent. The content hash is reused from ``previous`` only when the stat data
    is identical and was not recorded within two seconds of the file's last change."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    head = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    if (
        previous is not None
        and list(previous[:4]) == head
        and time.time_ns() - st.st_ctime_ns > 2_000_000_000
    ):
        return previous
    if stat.S_ISLNK(st.st_mode):
        digest = "link:" + hashlib.sha1(os.fsencode(os.readlink(path))).hexdigest()
    elif stat.S_ISREG(st.st_mode):
        try:
            with open(path, "rb") as handle:
                digest = hashlib.sha1(handle.read()).hexdigest()
        except OSError:
            digest = "unreadable"
    else:
        digest = f"mode:{st.st_mode:o}"
    return [*head, digest]


def same_content(a: Signature, b: Signature) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a[4] == b[4]


def dir_signatures(root: str, rel_dir: str, previous: list[Any] | None = None) -> list[Any]:
    """``[.gitignore signature, .gitattributes signature, has .git]`` of one directory
    (``root`` and ``rel_dir`` as strings: this runs for every directory at every capture)."""
    base = os.path.join(root, rel_dir) if rel_dir else root
    prev_ignore = previous[0] if previous else None
    prev_attr = previous[1] if previous else None
    return [
        file_signature(base + "/.gitignore", prev_ignore),
        file_signature(base + "/.gitattributes", prev_attr),
        bool(rel_dir) and os.path.lexists(base + "/.git"),
    ]


def parent_dirs(path: str) -> Iterable[str]:
    """``a/b/c`` → ``a/b``, ``a``, ``""`` (the root is ``""``)."""
    while True:
        cut = path.rfind("/")
        if cut < 0:
            yield ""
            return
        path = path[:cut]
        yield path


def topmost(dirs: Iterable[str]) -> list[str]:
    """The directories not inside another one of the set (``""`` covers everything)."""
    ordered = sorted(set(dirs), key=lambda d: (d.count("/"), d))
    if "" in ordered:
        return [""]
    kept: set[str] = set()
    for d in ordered:
        if not any(parent in kept for parent in parent_dirs(d)):
            kept.add(d)
    return sorted(kept)


# --- path helpers shared by the capture and the feed ------------------------------------------

ARG_CHUNK = 400


def protected_prefix(path: str, names: set[str], *, include_last: bool) -> str | None:
    """The first directory prefix of ``path`` named like a protected directory (the last
    component counts only with ``include_last``), or ``None``."""
    parts = path.split("/")
    limit = len(parts) if include_last else len(parts) - 1
    for i in range(limit):
        if parts[i] in names:
            return "/".join(parts[: i + 1])
    return None


def covers(tracked: set[str], prefix: str) -> bool:
    """Whether ``tracked`` holds ``prefix`` itself or a path below it."""
    head = prefix + "/"
    return prefix in tracked or any(p.startswith(head) for p in tracked)


def chunks(items: Sequence[str], size: int = ARG_CHUNK) -> Iterable[list[str]]:
    """``items`` in argument-list-sized pieces."""
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


# --- racy entries in the index file ----------------------------------------------------------


def recent_entries(index_path: Path, first_s: int, last_s: int) -> list[tuple[str, int]]:
    """``(path, recorded mtime second)`` of index entries whose recorded ctime second lies in
    ``[first_s, last_s]``.

    Every entry git recorded during a capture (ours, or a refresh done by ``git status``) has a
    recorded ctime no later than the recording second; those within the capture's own seconds
    are the racy ones. Instead of parsing every entry, look for the 4-byte big-endian seconds
    values where an entry can start (v2/v3 entries begin with ctime seconds) and check that a
    plausible entry follows. A false match only makes git compare more content, never less:
    it can add a path or lower the chosen timestamp, not hide a real entry.
    """
    data = index_path.read_bytes()
    if len(data) < 12 or data[:4] != b"DIRC":
        raise ValueError(f"{index_path}: not an index file")
    version = int.from_bytes(data[4:8], "big")
    if version not in (2, 3):
        raise ValueError(f"{index_path}: index version {version}, expected 2")
    found: dict[str, int] = {}
    for second in range(first_s, last_s + 1):
        needle = (second & 0xFFFFFFFF).to_bytes(4, "big")
        pos = data.find(needle, 12)
        while pos >= 0:
            path = _entry_path_at(data, pos)
            if path is not None:
                mtime = int.from_bytes(data[pos + 8 : pos + 12], "big")
                found[path] = min(mtime, found.get(path, mtime))
            pos = data.find(needle, pos + 1)
    return sorted(found.items())


def _entry_path_at(data: bytes, pos: int) -> str | None:
    flags_at = pos + 60
    if flags_at + 2 > len(data):
        return None
    flags = int.from_bytes(data[flags_at : flags_at + 2], "big")
    name_at = flags_at + 2 + (2 if flags & 0x4000 else 0)
    end = data.find(b"\0", name_at)
    if end < 0:
        return None
    length = end - name_at
    if length == 0 or (
        length != (flags & 0x0FFF) and not (flags & 0x0FFF == 0x0FFF and length >= 0x0FFF)
    ):
        return None
    mode = int.from_bytes(data[pos + 24 : pos + 28], "big")
    if mode >> 12 not in (0b1000, 0b1010):  # regular file, symlink (gitlinks compare HEAD)
        return None
    return os.fsdecode(data[name_at:end])


# --- what, outside the work tree, shapes a capture --------------------------------------------

FORMAT_VERSION = "capture-1"
_CONFIG_PREFIXES = ("core.", "filter.", "index.", "feature.", "extensions.")
_ENV_KEYS = ("HOME", "XDG_CONFIG_HOME", "GIT_ATTR_NOSYSTEM", "GIT_CONFIG_NOSYSTEM")
_SYSTEM_ATTRIBUTES = Path("/etc/gitattributes")


def common_dir(git_dir: Path) -> Path:
    """The repository's common directory (differs from ``git_dir`` in a linked worktree)."""
    try:
        text = (git_dir / "commondir").read_text().strip()
    except OSError:
        return git_dir
    path = Path(text)
    return path if path.is_absolute() else (git_dir / path).resolve()


def _config_path(value: str | None, default_name: str, root: Path) -> Path | None:
    if value is None:
        xdg = os.environ.get("XDG_CONFIG_HOME")
        home = os.environ.get("HOME")
        if xdg:
            return Path(xdg) / "git" / default_name
        return Path(home) / ".config" / "git" / default_name if home else None
    if not value:
        return None
    if value.startswith("~/") and os.environ.get("HOME"):
        return Path(os.environ["HOME"]) / value[2:]
    path = Path(value)
    return path if path.is_absolute() else root / path


@dataclass(frozen=True)
class GitFacts:
    """The few configuration values the capture itself acts on."""

    ignore_case: bool
    filemode: bool


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() in {"true", "yes", "on", "1", ""}


def global_fingerprint(
    git: GitRunner, repo: GitRepo, settings: SnapshotSettings
) -> tuple[str, GitFacts]:
    """``(hash, facts)`` of everything outside the work tree that shapes a capture."""
    config = git.config_list()
    relevant = sorted((k, v) for k, v in config if k.startswith(_CONFIG_PREFIXES))
    last: dict[str, str] = {}
    for key, value in config:
        last[key] = value
    common = common_dir(repo.git_dir)
    files = [
        common / "info" / "exclude",
        common / "info" / "attributes",
        _config_path(last.get("core.excludesfile"), "ignore", repo.root),
        _config_path(last.get("core.attributesfile"), "attributes", repo.root),
    ]
    if not os.environ.get("GIT_ATTR_NOSYSTEM"):
        files.append(_SYSTEM_ATTRIBUTES)
    signatures = []
    for path in files:
        sig = file_signature(path) if path is not None else None
        signatures.append([str(path), sig[4] if sig else None])
    payload = {
        "format": FORMAT_VERSION,
        "root": str(repo.root),
        "git_dir": str(repo.git_dir),
        "config": relevant,
        "env": [(k, os.environ.get(k)) for k in _ENV_KEYS],
        "files": signatures,
        "settings": [settings.max_untracked_file_bytes, sorted(settings.protected_dirs)],
    }
    digest = hashlib.sha256(
        json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogateescape")
    )
    facts = GitFacts(
        ignore_case=_bool(last.get("core.ignorecase"), False),
        filemode=_bool(last.get("core.filemode"), True),
    )
    return digest.hexdigest(), facts
