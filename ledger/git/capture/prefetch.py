"""The capture's ``git status``, started by a cold command before it has loaded its code.

Why it exists (issue 34): a cold ``rewind restore --yes`` spends ~110 ms importing (pygit2 alone
~60 ms) before its capture runs ``git status`` on the private index (~160-190 ms at 100k files,
nearly all of it git's ``lstat`` of every entry). Neither needs the other: on two cores they
overlap. So the command line (:mod:`ledger.cli`) starts that status as soon as it knows the
repository, and the capture (``Capturer._status``) takes its output instead of running it again.

Invariants (docs/capture.md#status-prefetch):
- **The index cannot change under it.** The prefetch holds the capture lock (re-entrant in this
  thread) from before its git starts until the first capture in this thread ends, or the command
  ends. It takes that lock without waiting (busy: no prefetch), and only while no restore is
  running: a command waits for a running restore, and must not wait holding the lock that
  restore may need (a running journal's lock is held; a journal without a lock file counts as
  running). A new restore cannot start meanwhile: it writes its journal under the capture lock.
- **Only the same command on the same index.** The capture uses it only if it would have run
  exactly this argv with exactly this environment, and nothing of the capture before its status
  changed the index or found a rule file changed (not fresh, nothing dropped, no rule change);
  otherwise the prefetch is stopped and status runs as before. Its racy-entry guard and its
  "since status started" margin count from the prefetch's start.
- **Its git never outlives the lock.** Stopped (``SIGTERM``, which lets git remove its
  ``index.lock``, then waited for) before the lock is let go, on every path of the command:
  ``os._exit`` included (:func:`stop` is called first), and ``SIGTERM``/``SIGHUP`` to the command
  become an interruption while a prefetch runs, so that its ``finally`` runs.
- The lock is let go only when the prefetch's hold is the last one of this thread: a capture
  nested in another hold (a restore's) leaves it to :func:`stop`.
Standard library, :mod:`ledger.git.capture.index` and :mod:`ledger.git.capture.untracked_cache`
only (no pygit2): it runs before them. It reads the index's untracked cache before its git starts,
under the same lock, for the capture's late pass (``Capturer._capture``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ledger.git.capture.index import PrivateIndex
from ledger.git.capture.status_command import PRIVATE_CONFIG, STATUS_ARGS, TRACE_ENV
from ledger.git.capture.untracked_cache import CacheSnapshot, read_extension
from ledger.git.runner import GitRunner
from ledger.plain import Plain


class Prefetched(Plain):
    """A finished prefetched status: what ``GitRunner.run`` would have returned, and when it
    started."""

    __slots__ = ("returncode", "started_ns", "stderr", "stdout", "untracked_before")
    returncode: int
    stdout: bytes
    stderr: bytes
    started_ns: int
    untracked_before: CacheSnapshot | None
    """The index's untracked cache as it was before this status (read_extension)."""

    def __init__(
        self,
        returncode: int,
        stdout: bytes,
        stderr: bytes,
        started_ns: int,
        untracked_before: CacheSnapshot | None = None,
    ) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.started_ns = started_ns
        self.untracked_before = untracked_before


class _Prefetch(Plain):
    __slots__ = (
        "argv",
        "env",
        "hold",
        "index",
        "index_path",
        "output",
        "previous_handlers",
        "proc",
        "reader",
        "started_ns",
        "thread",
        "untracked_before",
    )
    index_path: Path
    argv: list[str]
    env: dict[str, str]
    proc: subprocess.Popen[bytes]
    started_ns: int
    hold: contextlib.ExitStack
    index: PrivateIndex
    thread: int
    previous_handlers: dict[int, object]
    output: tuple[bytes, bytes] | None
    reader: threading.Thread | None
    untracked_before: CacheSnapshot | None

    def __init__(
        self,
        index_path: Path,
        argv: list[str],
        env: dict[str, str],
        proc: subprocess.Popen[bytes],
        started_ns: int,
        hold: contextlib.ExitStack,
        index: PrivateIndex,
        thread: int,
        previous_handlers: dict[int, object] | None = None,
        output: tuple[bytes, bytes] | None = None,
        reader: threading.Thread | None = None,
        untracked_before: CacheSnapshot | None = None,
    ) -> None:
        self.untracked_before = untracked_before
        self.index_path = index_path
        self.argv = argv
        self.env = env
        self.proc = proc
        self.started_ns = started_ns
        self.hold = hold
        self.index = index
        self.thread = thread
        self.previous_handlers = {} if previous_handlers is None else previous_handlers
        self.output = output
        self.reader = reader


_current: _Prefetch | None = None
_guard = threading.Lock()


def status_command(runner: GitRunner, index_path: Path) -> tuple[list[str], dict[str, str]]:
    """The capture's status for ``index_path``: argv and environment, as ``GitRunner.run``
    builds them (``Capturer._status`` compares the prefetch's with its own)."""
    argv = runner.command(STATUS_ARGS, PRIVATE_CONFIG)
    env = runner.env(index=index_path, optional_locks=True, extra=TRACE_ENV)
    return argv, env


def start(root: str, git_dir: str) -> bool:
    """Start the capture's status for the work tree ``root`` (git directory ``git_dir``) under
    the capture lock, when that lock is free and no restore runs. False: nothing started."""
    global _current
    if _current is not None or threading.current_thread() is not threading.main_thread():
        return False
    index = PrivateIndex(Path(git_dir))
    if not index.index_path.is_file() or not index.state_path.is_file():
        return False  # the first capture builds the index: nothing to overlap
    hold = contextlib.ExitStack()
    try:
        hold.enter_context(index.locked(timeout_s=0.0))
    except Exception:  # busy (another capture or restore), or unwritable: no prefetch
        hold.close()
        return False
    try:
        if _restore_running(Path(git_dir)):
            hold.close()
            return False
        runner = GitRunner(Path(root), Path(git_dir))
        argv, env = status_command(runner, index.index_path)
        before = read_extension(index.index_path)  # under the lock: as status will find it
        started_ns = time.time_ns()
        proc = subprocess.Popen(
            argv,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except BaseException:
        hold.close()
        return False
    prefetch = _Prefetch(
        index.index_path,
        argv,
        env,
        proc,
        started_ns,
        hold,
        index,
        threading.get_ident(),
        untracked_before=before,
    )
    # Read both pipes as git writes them (a status of many changes fills a pipe long before the
    # command gets to it, and git would stop there).
    prefetch.reader = threading.Thread(
        target=_read, args=(prefetch,), name="rewind-status-prefetch", daemon=True
    )
    prefetch.reader.start()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            prefetch.previous_handlers[sig] = signal.signal(sig, _interrupt)
    with _guard:
        _current = prefetch
    return True


def pending() -> bool:
    """Whether this thread started a prefetch that may still be taken (one check of a global:
    every full capture asks, and builds the status command to compare only then)."""
    prefetch = _current
    return prefetch is not None and bool(prefetch.argv) and prefetch.thread == threading.get_ident()


def take(index_path: Path, argv: Sequence[str], env: Mapping[str, str]) -> Prefetched | None:
    """The prefetched status of ``index_path`` if it is this command (argv and environment) and
    this thread started it; waits for it to end. ``None``: run status (a prefetch that does not
    fit is stopped first, so that two never run on one index)."""
    prefetch = _current
    if prefetch is None or prefetch.thread != threading.get_ident():
        return None
    if prefetch.index_path != index_path or prefetch.argv != list(argv) or prefetch.env != env:
        _stop_git(prefetch)
        return None
    assert prefetch.reader is not None
    prefetch.reader.join()
    returncode = prefetch.proc.wait()
    stdout, stderr = prefetch.output or (b"", b"")
    prefetch.output = None  # used once
    prefetch.argv = []
    return Prefetched(returncode, stdout, stderr, prefetch.started_ns, prefetch.untracked_before)


def discard() -> None:
    """The capture will run its own status: stop the prefetched one (the lock stays held)."""
    prefetch = _current
    if prefetch is not None and prefetch.thread == threading.get_ident():
        _stop_git(prefetch)
        prefetch.argv = []


def capture_ended() -> None:
    """A capture in this thread ended: let go of the prefetch's hold when it is the only one
    left (see the module docstring)."""
    prefetch = _current
    if prefetch is None or prefetch.thread != threading.get_ident():
        return
    if prefetch.index.depth_here() <= 1:
        stop()


def stop() -> None:
    """Stop the prefetch's git if it still runs, and let go of its lock (the thread that started
    it only: the lock's depth is counted per thread). Idempotent."""
    global _current
    with _guard:
        prefetch = _current
        if prefetch is None or prefetch.thread != threading.get_ident():
            return
        _current = None
    _stop_git(prefetch)
    prefetch.hold.close()
    for sig, handler in prefetch.previous_handlers.items():
        # Only where ours is still installed: a restore's own handler (ledger/cli/restore.py,
        # which rolls back on SIGTERM) may have replaced it, and must stay.
        with contextlib.suppress(ValueError, OSError, TypeError):
            if signal.getsignal(sig) is _interrupt:
                signal.signal(sig, handler)  # type: ignore[arg-type]


def _stop_git(prefetch: _Prefetch) -> None:
    proc = prefetch.proc
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.terminate()  # git removes its index.lock on SIGTERM
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if prefetch.reader is not None:
        prefetch.reader.join()


def _read(prefetch: _Prefetch) -> None:
    with contextlib.suppress(Exception):
        if prefetch.untracked_before is not None:
            # Parsed while git runs (the capture's late pass needs it after), in this thread:
            # git's output fits the pipes meanwhile, or waits a few milliseconds.
            prefetch.untracked_before.prepare()
        prefetch.output = prefetch.proc.communicate()


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _restore_running(git_dir: Path) -> bool:
    """A restore journal whose liveness lock is held (or cannot be told): the command may wait
    for that restore, which must not happen while holding the capture lock."""
    from ledger.git.liveness import lock_held

    # Paths as ledger/git/restore/journal.py names them (``journal_dir``, ``Journal.lock_path``);
    # not imported from there: that module loads pygit2, which this runs before.
    journals = git_dir / "pi-rewind" / "journal"
    try:
        names = os.listdir(journals)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    for name in names:
        if not name.endswith(".json"):
            continue
        lock = journals / (name[: -len(".json")] + ".lock")
        if not lock.exists() or lock_held(lock) is not False:
            return True
    return False


__all__ = [
    "Prefetched",
    "capture_ended",
    "discard",
    "pending",
    "start",
    "status_command",
    "stop",
    "take",
]
