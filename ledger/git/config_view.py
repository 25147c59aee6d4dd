"""git's own view of its configuration, read once and kept while nothing it came from changed.

Why it exists: a restore needs a few configuration facts on its path (``core.symlinks``,
``core.attributesFile``, ``filter.*``, ``core.eol``, ``attr.tree``: can git's checkout convert
anything? :mod:`ledger.git.restore.direct_write`), and the undo snapshot needs the committer
identity (``git var GIT_COMMITTER_IDENT``). Asking git each time costs a process per question
per restore; a long-lived process (the watcher serving commands, a bridge) restores many times
under the same configuration. This module asks git once (``git config -z --list
--show-origin``) and keeps the answer for as long as its :class:`Signature` is unchanged.

Why the cache is exact: git's configuration is the environment plus the files it reads. The
signature holds every environment variable that can change what git reads (``GIT_*``, ``HOME``,
``XDG_CONFIG_HOME``, ``PATH``, ``EMAIL``) and the ``stat`` data (inode, size, ``mtime`` and
``ctime`` in nanoseconds; or "absent") of every file it read (each ``file:`` origin), of every file
it would read if it existed (system, global, XDG, repository and worktree files), and of every
file an ``include.path``/``includeIf.*.path`` names (a missing or empty include shows no origin)
plus ``HEAD`` when any ``includeIf`` is present (``onbranch:``). Any difference means git is asked
again. A view git could not give whole (an include whose base is not a file, a failed command)
is never kept.

Invariants: read-only; the library never prints; one ``git config`` process on a miss, none on a
hit (a few ``stat`` calls); thread-safe (one lock around the cache).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ledger.git.repo import GitRepo
from ledger.git.runner import GitRunner, resolve_executable
from ledger.plain import Plain

_T = TypeVar("_T")

_ENV_NAMES = ("HOME", "XDG_CONFIG_HOME", "PATH", "EMAIL")

_FRESH_NS = 2_000_000_000
"""A view whose files changed less than this before it was read is not kept (see :func:`_read`),
on a file system that keeps whole seconds (FAT keeps two)."""
_FRESH_FINE_NS = 20_000_000
"""The same where times have a fraction of a second: the kernel stamps them from its coarse
clock, one tick of at most 10 ms (``HZ`` ≥ 100)."""


def _racy(sig: FileSig, now_ns: int) -> bool:
    """Whether a file read at ``now_ns`` may change again, in place and same size, with stat data
    that stays the same (git's racy-timestamp rule; see :func:`_read`)."""
    if sig is None:
        return False
    mtime, ctime = sig[3], sig[4]
    whole_seconds = mtime % 1_000_000_000 == 0 and ctime % 1_000_000_000 == 0
    return now_ns - max(mtime, ctime) <= (_FRESH_NS if whole_seconds else _FRESH_FINE_NS)


FileSig = tuple[int, int, int, int, int] | None
"""``(dev, ino, size, mtime_ns, ctime_ns)`` of a file, ``None`` when there is none."""

Signature = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, FileSig], ...]]
"""The environment and the files a view was read under."""


def _file_sig(path: str) -> FileSig:
    try:
        st = os.stat(path)  # git follows a symlinked config file: so does the signature
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _env_part() -> tuple[tuple[str, str], ...]:
    return tuple(
        sorted((k, v) for k, v in os.environ.items() if k.startswith("GIT_") or k in _ENV_NAMES)
    )


def git_prefix() -> str | None:
    """The installation prefix of the ``git`` on ``PATH`` (``/usr`` for ``/usr/bin/git``):
    where its system-wide ``etc/gitconfig`` and ``etc/gitattributes`` may live besides
    ``/etc``."""
    exe = resolve_executable("git")
    if os.sep not in exe:
        return None
    return os.path.dirname(os.path.dirname(os.path.realpath(exe)))


def candidate_files(repo: GitRepo) -> list[str]:
    """Every configuration file git may read for ``repo`` when it exists (includes aside)."""
    home = os.environ.get("HOME", "")
    xdg = os.environ.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    files = ["/etc/gitconfig", str(repo.common_dir / "config"), str(repo.git_dir / "config")]
    files.append(str(repo.git_dir / "config.worktree"))
    prefix = git_prefix()
    if prefix:
        files.append(os.path.join(prefix, "etc", "gitconfig"))
    for name in ("GIT_CONFIG_SYSTEM", "GIT_CONFIG_GLOBAL", "GIT_CONFIG"):
        value = os.environ.get(name)
        if value:
            files.append(value)
    if home:
        files.append(os.path.join(home, ".gitconfig"))
    if xdg:
        files.append(os.path.join(xdg, "git", "config"))
    return files


class ConfigView(Plain):
    """The effective configuration, last value of each key (lower-cased names; a key written
    without ``=`` has the value ``None``), and the signature it is valid under."""

    __slots__ = ("complete", "keys", "memo", "pairs", "signature", "values")
    values: dict[str, str | None]
    pairs: tuple[tuple[str, str | None], ...]
    """Every ``(key, value)`` in git's order, a key set twice listed twice (``git config -z
    --list``): what the capture's fingerprint hashes (:mod:`ledger.git.capture.fingerprint`)."""
    signature: Signature
    keys: frozenset[str]
    complete: bool
    """False when git could not be asked: nothing may be concluded from the view."""
    memo: dict[str, object]
    """Answers derived from this view (the committer identity), dropped with it."""

    def __init__(
        self,
        values: dict[str, str | None],
        signature: Signature,
        keys: frozenset[str] | None = None,
        complete: bool = True,
        memo: dict[str, object] | None = None,
        pairs: tuple[tuple[str, str | None], ...] = (),
    ) -> None:
        self.values = values
        self.pairs = pairs
        self.signature = signature
        self.keys = frozenset() if keys is None else keys
        self.complete = complete
        self.memo = {} if memo is None else memo

    def has_prefix(self, prefix: str) -> bool:
        return any(k.startswith(prefix) for k in self.keys)

    def remember(self, name: str, compute: Callable[[], _T]) -> _T:
        """``compute()``, once per view: valid as long as the view is."""
        if name not in self.memo:
            self.memo[name] = compute()
        return self.memo[name]  # type: ignore[return-value]


_lock = threading.Lock()
_cache: dict[str, tuple[ConfigView, list[str]]] = {}
"""Per git dir: the view and the files its signature covers."""


def _signature(files: list[str]) -> Signature:
    return (_env_part(), tuple((f, _file_sig(f)) for f in files))


def _resolve_include(value: str, origin: str | None) -> str | None:
    if value.startswith("~/"):
        home = os.environ.get("HOME")
        return os.path.join(home, value[2:]) if home else None
    if os.path.isabs(value):
        return value
    if origin is None:
        return None  # relative to what? git refuses it; the view is not kept
    return os.path.join(os.path.dirname(origin), value)


def _read(repo: GitRepo) -> tuple[ConfigView, list[str]] | None:
    """Ask git: the view and the files it depends on (``None``: the view is not to be kept)."""
    env_before = _env_part()
    files = candidate_files(repo)
    before = [(f, _file_sig(f)) for f in files]
    git = GitRunner(repo.root, repo.git_dir)
    result = git.run(
        ["config", "-z", "--list", "--show-origin"], operation="git config", check=False
    )
    if result.returncode not in (0, 1):  # 1: no configuration at all
        return None
    records = result.lines_z()
    values: dict[str, str | None] = {}
    pairs: list[tuple[str, str | None]] = []
    keep = True
    include_if = False
    for i in range(0, len(records) - 1, 2):
        origin_raw, item = records[i], records[i + 1]
        origin = os.fsdecode(origin_raw[5:]) if origin_raw.startswith(b"file:") else None
        if origin is not None and not os.path.isabs(origin):
            origin = os.path.join(str(repo.root), origin)
        if origin is not None:
            files.append(origin)
        text = item.decode("utf-8", "surrogateescape")
        key, newline, value = text.partition("\n")
        key = key.lower()
        values[key] = value if newline else None
        pairs.append((key, values[key]))
        if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
            include_if = include_if or key.startswith("includeif.")
            target = _resolve_include(value, origin) if newline else None
            if target is None:
                keep = False
            else:
                files.append(target)
    if include_if:
        files.append(str(repo.git_dir / "HEAD"))
    files = sorted(set(files))
    signature = _signature(files)
    # The files the candidates named must not have changed while git read them.
    if signature[0] != env_before or any(
        dict(signature[1]).get(f, sig) != sig for f, sig in before
    ):
        keep = False
    # Exactness (git's racy-timestamp rule, as for the capture's rule files): a file changed
    # within one tick of the clock that stamps it before this read may change again in that
    # tick, same size, in place, and leave its stat data as it was. A view read that soon is
    # used, not kept. Read later, any further change falls in a later tick: new times.
    now_ns = time.time_ns()
    if any(_racy(sig, now_ns) for _, sig in signature[1]):
        keep = False
    view = ConfigView(values, signature, frozenset(values), pairs=tuple(pairs))
    return (view, files) if keep else (view, [])


def config_view(repo: GitRepo) -> ConfigView:
    """git's configuration for ``repo`` now: kept from an earlier call while its signature is
    unchanged, else read again (one ``git config`` process)."""
    key = str(repo.git_dir)
    with _lock:
        held = _cache.get(key)
        if held is not None:
            view, files = held
            if _signature(files) == view.signature:
                return view
            del _cache[key]
    read = _read(repo)
    if read is None:
        return ConfigView({}, ((), ()), frozenset(), complete=False)
    view, files = read
    if files:
        with _lock:
            _cache[key] = (view, files)
    return view


def forget() -> None:
    """Drop every kept view (tests)."""
    with _lock:
        _cache.clear()


def path_value(view: ConfigView, key: str, root: Path) -> str | None:
    """A path-valued key as git expands it (``~/``, relative to the work tree); ``None`` when
    unset, ``""`` when set to nothing."""
    if key not in view.values:
        return None
    value = view.values[key] or ""
    if not value:
        return ""
    if value.startswith("~/"):
        home = os.environ.get("HOME", "")
        return os.path.join(home, value[2:]) if home else ""
    return value if os.path.isabs(value) else os.path.join(str(root), value)


__all__ = [
    "ConfigView",
    "FileSig",
    "Signature",
    "candidate_files",
    "config_view",
    "forget",
    "git_prefix",
    "path_value",
]
