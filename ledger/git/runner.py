"""Running the git executable with a controlled environment and configuration.

Why it exists: the snapshot layer needs git itself (status with the untracked cache, update-index,
write-tree, update-ref) and must run it so that nothing inherited from the caller can redirect a
write. A hook, an agent or a user shell may export ``GIT_INDEX_FILE``, ``GIT_DIR``,
``GIT_NAMESPACE``, pathspec-magic switches or tracing; any of those would make git write the
wrong index, read the wrong repository or misparse a path.

Invariants:
- Every command runs at the work-tree root with ``GIT_DIR`` and ``GIT_WORK_TREE`` set explicitly,
  so the caller's cwd (a subdirectory, or elsewhere) never changes what git sees.
- ``GIT_INDEX_FILE`` is set only when the caller passes ``index=`` (our private index); otherwise
  it is removed, and git reads the user's own index.
- ``GIT_OPTIONAL_LOCKS=0`` unless the caller asks for optional locks, so a read-only command can
  never refresh and rewrite the user's ``.git/index``.
- Pathspecs are literal (``GIT_LITERAL_PATHSPECS=1``), paths travel NUL-separated as bytes, and
  user hooks never run (``core.hooksPath=/dev/null``).
- A failing command raises :class:`~ledger.errors.GitError` with git's own message.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from ledger.errors import GitError
from ledger.plain import FrozenPlain

# Variables that can point git at another repository, index, object store or ref namespace, or
# change how it parses pathspecs and prints: never inherited.
_DROPPED_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_QUARANTINE_PATH",
    "GIT_REPLACE_REF_BASE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_GRAFT_FILE",
    "GIT_SHALLOW_FILE",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
    "GIT_LITERAL_PATHSPECS",
    "GIT_OPTIONAL_LOCKS",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_TRACE",
    "GIT_TRACE2",
    "GIT_TRACE2_EVENT",
    "GIT_TRACE2_PERF",
    "GIT_TRACE_PERFORMANCE",
    "GIT_TRACE_SETUP",
    "GIT_TRACE_PACKET",
    "GIT_TRACE_PACKFILE",
    "GIT_TRACE_CURL",
    "GIT_TRACE_UNTRACKED_STATS",
    "GIT_TRACE_FSMONITOR",
    "GIT_FLUSH",
    "GIT_REDIRECT_STDOUT",
    "GIT_REDIRECT_STDERR",
    "GIT_REFLOG_ACTION",
)

# Applied to every command: no hooks (update-ref would run reference-transaction hooks), no
# pager, paths printed verbatim.
BASE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.quotePath", "false"),
    ("core.pager", "cat"),
)

_T = TypeVar("_T")

ZERO_SHA = "0" * 40
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class GitResult(FrozenPlain):
    __slots__ = ("returncode", "stderr", "stdout")
    returncode: int
    stdout: bytes
    stderr: bytes

    def __init__(self, returncode: int, stdout: bytes, stderr: bytes) -> None:
        self._init(returncode=returncode, stdout=stdout, stderr=stderr)

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "surrogateescape")

    def lines_z(self) -> list[bytes]:
        """NUL-separated records of ``stdout`` (the trailing empty one dropped)."""
        if not self.stdout:
            return []
        parts = self.stdout.split(b"\0")
        if parts and parts[-1] == b"":
            parts.pop()
        return parts


_background = threading.local()


@contextlib.contextmanager
def idle_priority_git() -> Iterator[None]:
    """Inside, the git processes this thread starts run under the idle scheduling policy
    (``SCHED_IDLE``, through util-linux's ``chrt``): the change feed's lock-free verification
    scan.

    Why not only ``nice``: the scan competes with a prompt's capture in the same process and
    with Pi. A nice 10 process still keeps the CPU it runs on until its time slice ends when a
    capture's thread, or git, wakes up there, and a capture wakes up several times (socket,
    pipes to git): measured (``tools/bench_verify_overlap.py``, 100k files), a fed capture
    during a verification took 4.8 ms (p90 23 ms) against 3.1 ms (p90 3.6 ms) with none; with
    this and ``rewind serve``'s short GIL switch interval, 3.0-4.4 ms (p90 12-16 ms). A
    ``SCHED_IDLE`` task is preempted at once by any normal one.

    Never around work a prompt may wait for: a scan under the capture lock (the verifier's base
    scan) would make a prompt wait behind every other task of a busy machine. And only git
    processes, never the Python thread: a thread that may hold the GIL must not wait behind
    every other task either (docs/capture.md#verification)."""
    before = getattr(_background, "idle", False)
    _background.idle = True
    try:
        yield
    finally:
        _background.idle = before


def _idle_prefix() -> list[str]:
    if not getattr(_background, "idle", False):
        return []
    chrt = _chrt()
    return [chrt, "--idle", "0"] if chrt else []


@functools.cache
def _chrt() -> str | None:
    """``chrt``, once it has been seen to work here (a sandbox may refuse the policy change:
    then git runs at the thread's nice value only, never not at all)."""
    from ledger.facilities import facilities

    if not facilities().idle_scheduling:
        return None
    found = resolve_executable("chrt")
    if os.sep not in found:
        return None  # not on PATH
    try:
        probe = subprocess.run(
            [found, "--idle", "0", "true"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return found if probe.returncode == 0 else None


class GitRunner:
    """Runs ``git`` for one work tree. Cheap to construct; holds no process."""

    def __init__(self, root: Path, git_dir: Path, *, executable: str = "git") -> None:
        self.root = Path(root)
        self.git_dir = Path(git_dir)
        self.executable = executable
        self._base_env = self._make_base_env(os.environ)

    def _make_base_env(self, source: Mapping[str, str]) -> dict[str, str]:
        env = {k: v for k, v in source.items() if k not in _DROPPED_ENV}
        env["GIT_DIR"] = str(self.git_dir)
        env["GIT_WORK_TREE"] = str(self.root)
        env["GIT_LITERAL_PATHSPECS"] = "1"
        env["GIT_TERMINAL_PROMPT"] = "0"
        env["GIT_OPTIONAL_LOCKS"] = "0"
        env["LC_ALL"] = "C"
        env.pop("LANGUAGE", None)
        return env

    def env(
        self,
        *,
        index: Path | None = None,
        optional_locks: bool = False,
        extra: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        env = dict(self._base_env)
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        if optional_locks:
            env["GIT_OPTIONAL_LOCKS"] = "1"
        if extra:
            env.update(extra)
        return env

    def command(self, args: Sequence[str], config: Iterable[tuple[str, str]] = ()) -> list[str]:
        cmd = [*_idle_prefix(), resolve_executable(self.executable)]
        for key, value in (*BASE_CONFIG, *config):
            cmd += ["-c", f"{key}={value}"]
        cmd += list(args)
        return cmd

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
        """Run one git command and capture its output as bytes.

        ``index`` selects our private index; ``optional_locks`` lets git refresh and rewrite the
        index it reads (only ever granted for the private index).
        """
        cmd = self.command(args, config)
        try:
            proc = subprocess.run(
                cmd,
                cwd=str(cwd or self.root),
                env=self.env(index=index, optional_locks=optional_locks, extra=extra_env),
                input=input if input is not None else b"",
                capture_output=True,
                check=False,
            )
        except OSError as exc:
            raise GitError(
                operation or f"git {args[0] if args else ''}".strip(),
                str(exc),
                hint="is git installed and on PATH?",
            ) from exc
        result = GitResult(proc.returncode, proc.stdout, proc.stderr)
        if check and proc.returncode != 0:
            raise GitError(
                operation or f"git {args[0]}",
                first_lines(proc.stderr) or f"exit status {proc.returncode}",
            )
        return result


_RESOLVED: dict[tuple[str, str], str] = {}


def resolve_executable(name: str) -> str:
    """``name`` looked up on ``PATH`` once per ``PATH`` value (the same lookup ``execvp`` would
    make for every command: a long ``PATH`` costs a failed ``execve`` per entry each time)."""
    if os.sep in name:
        return name
    key = (name, os.environ.get("PATH", os.defpath))
    found = _RESOLVED.get(key)
    if found is None:
        import shutil

        found = shutil.which(name) or name
        _RESOLVED[key] = found
    return found


def first_lines(stderr: bytes, limit: int = 6) -> str:
    text = stderr.decode("utf-8", "replace").strip()
    # Lines of a trace2 event stream we asked for on stderr are not git's message.
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith('{"')]
    return "; ".join(lines[:limit])


def encode_path(path: str) -> bytes:
    """A repository-relative path as the bytes git expects (surrogates restore raw bytes)."""
    return os.fsencode(path)


def decode_path(raw: bytes) -> str:
    return os.fsdecode(raw)


def nul_join(paths: Iterable[str]) -> bytes:
    return b"".join(encode_path(p) + b"\0" for p in paths)


ARG_CHUNK = 400
"""Paths per git command line when they travel as arguments (well under ``ARG_MAX``)."""


def chunks(items: Sequence[_T], size: int = ARG_CHUNK) -> Iterator[list[_T]]:
    """``items`` in argument-list-sized pieces."""
    for i in range(0, len(items), size):
        yield list(items[i : i + size])
