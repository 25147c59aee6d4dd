"""Where git says the work tree, the git directory and the common directory are, seen from a
directory: the one ``git rev-parse`` every way into the repository starts with.

Why it exists apart from :mod:`ledger.git.repo`: that module loads pygit2, and a spawned bridge
answers Pi's first ``session_start`` before loading it (:mod:`ledger.bridge.quick_start`). Both
ask git here, the same way. Imports nothing but the standard library, and not ``subprocess``
(~4 ms with ``signal``, ``selectors`` and ``locale``, before that answer: issue 34): git is run
with ``os.posix_spawnp`` as ``subprocess.run`` would run it: stdin from ``/dev/null``, stderr
dropped, ``SIGPIPE``/``SIGXFSZ`` back to their defaults, no other descriptor of this process
(Python's own are close-on-exec; ``subprocess`` would also close any inherited one, which a
read-only ``rev-parse`` cannot use), in ``probe`` through ``git -C`` (git changes into it
before it reads anything, as a child started there would).
"""

from __future__ import annotations

# `_signal`: the interpreter's own, loaded at start-up (no stub); `signal` adds ~1 ms of enums.
import _signal  # type: ignore[import-not-found]
import os
import select
import time
from pathlib import Path

TIMEOUT_S = 30.0

Located = tuple[Path, Path, Path]
"""``(work tree, git dir, common dir)``, as :func:`locate` answers."""


def locate(probe: Path) -> Located | None:
    """``(work tree, git dir, common dir)`` as git sees them from ``probe``, or None outside a
    work tree (including inside a ``.git`` directory and in a bare repository).

    git reads the caller's ``GIT_DIR``/``GIT_WORK_TREE`` here on purpose: they say which work
    tree the user means. Everything after discovery runs git with these paths set explicitly
    (:mod:`ledger.git.runner`)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE", "GIT_PREFIX")
    }
    args = ["rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"]
    done = _git(probe, args, env)
    if done is None:
        return None
    returncode, stdout = done
    # One path a line, split on b"\n" only: str.splitlines() would also split a directory name
    # holding U+2028 or \x1c, and every path is os.fsdecode of its bytes, as everywhere else.
    lines = [os.fsdecode(line) for line in stdout.split(b"\n")]
    if lines and not lines[-1]:
        lines.pop()
    if returncode != 0 or len(lines) != 3 or not lines[0]:
        return None
    common = Path(lines[2])
    if not common.is_absolute():
        common = probe / common
    return Path(lines[0]), Path(lines[1]), common


def _git(cwd: Path, args: list[str], env: dict[str, str]) -> tuple[int, bytes] | None:
    """``(exit status, stdout)`` of ``git -C cwd args``; None when git cannot be started or
    outlives :data:`TIMEOUT_S` (then it is killed and reaped)."""
    if not os.path.isdir(cwd):
        return None  # subprocess.run(cwd=...) raised here (git -C would say so on stderr)
    read_end, write_end = os.pipe()
    try:
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, write_end, 1),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        argv = ["git", "-C", os.fspath(cwd), *args]
        try:
            pid = os.posix_spawnp(
                "git",
                argv,
                env,
                file_actions=actions,
                setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),  # subprocess's restore_signals
            )
        except OSError:
            return None
        finally:
            os.close(write_end)
        chunks: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                os.kill(pid, _signal.SIGKILL)
                os.waitpid(pid, 0)
                return None
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status), b"".join(chunks)
    finally:
        os.close(read_end)


__all__ = ["locate"]
