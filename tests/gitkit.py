"""Real git for tests: running it, the small repositories tests start from, and the oracles.

Every test module imports its git helpers from here (fixtures live in the ``conftest.py``
files, which only wrap these). Nothing here imports ``ledger``: a test of a broken module still
gets its repository.

``fresh_tree`` is the capture oracle: the reference capture (a fresh ``GIT_INDEX_FILE``,
``git -c core.autocrlf=false add -A``, ``git write-tree`` at the repository root). ``user_state``
records everything of the user's that a capture or a restore must leave byte-identical;
``files`` records a work tree (modes, bytes, link targets).
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

USER_NAME = "Rewind Test"
USER_EMAIL = "rewind@example.com"


def git(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    """Run real git in ``cwd`` and return stdout (text)."""
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def git_call_log(tmp_path: Path) -> tuple[Path, Path]:
    """``(shim directory, log)``: put the directory first on ``PATH`` and every ``git`` the
    code runs writes its subcommand to the log, then runs the real git."""
    import shutil

    real = shutil.which("git")
    assert real is not None
    log = tmp_path / "git-calls.log"
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "git").write_text(
        "#!/bin/sh\n"
        f'for a in "$@"; do case "$a" in -*|*=*) ;; *) echo "$a" >> "{log}"; break;; esac; done\n'
        f'exec "{real}" "$@"\n'
    )
    (shim / "git").chmod(0o755)
    return shim, log


def init_repo(path: Path, *, identity: bool = True) -> Path:
    """``git init`` a new directory ``path`` (with the test identity unless ``identity`` is off)."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    if identity:
        git(path, "config", "user.name", USER_NAME)
        git(path, "config", "user.email", USER_EMAIL)
    return path


def one_commit_repo(
    path: Path, files: Mapping[str, str] | None = None, *, message: str = "initial"
) -> Path:
    """A new repository at ``path`` with an identity and one commit of ``files`` (relative path
    → text; default ``README.md`` = ``hello``)."""
    init_repo(path)
    for rel, text in (files if files is not None else {"README.md": "hello\n"}).items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return path


def source_repo(parent: Path, name: str = "source", text: str = "submodule v1\n") -> Path:
    """A small repository with one commit (``v1``) of ``file.txt``, to add as a submodule."""
    return one_commit_repo(parent / name, {"file.txt": text}, message="v1")


# --- oracles ------------------------------------------------------------------------------


def fresh_tree(repo: Path, *, exclude: tuple[str, ...] = ()) -> str:
    """The reference capture: fresh index + ``git -c core.autocrlf=false add -A`` + write-tree."""
    with tempfile.TemporaryDirectory(prefix="pi-rewind-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        pathspec = ["--", ".", *[f":(exclude,literal){p}" for p in exclude]] if exclude else []
        git(repo, "-c", "core.autocrlf=false", "add", "-A", *pathspec, env=env)
        return git(repo, "write-tree", env=env).strip()


def ls_tree(repo: Path, tree: str) -> str:
    return git(repo, "ls-tree", "-r", "--full-tree", tree)


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (IsADirectoryError, FileNotFoundError):
        return "-"


def user_state(repo: Path) -> dict[str, object]:
    """The user's index and HEAD bytes, refs other than ours, every file under ``.git`` outside
    objects and ``pi-rewind`` (path + content), and the work tree (path, mode, content, mtime)."""
    git_dir = repo / ".git"
    meta = {}
    for dirpath, dirnames, filenames in os.walk(git_dir):
        rel_dir = Path(dirpath).relative_to(git_dir)
        if rel_dir.parts[:1] in {("objects",), ("pi-rewind",)} or rel_dir.parts[:2] == (
            "refs",
            "pi-rewind",
        ):
            dirnames[:] = []
            continue
        for name in filenames:
            meta[str(rel_dir / name)] = _digest(Path(dirpath) / name)
    tree = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        if Path(dirpath) == repo and ".git" in dirnames:
            dirnames.remove(".git")
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            content = os.readlink(p) if p.is_symlink() else (_digest(p) if p.is_file() else "dir")
            tree[str(p.relative_to(repo))] = (st.st_mode, content, st.st_mtime_ns)
    return {"git": meta, "worktree": tree}


def files(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path under ``root`` except the top-level ``.git``: files as (permission bits,
    bytes), symlinks as their target, directories as ``dir``."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root and ".git" in dirnames:
            dirnames.remove(".git")
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), p.read_bytes())
    return out


# --- changing a work tree -----------------------------------------------------------------


def write(repo: Path, rel: str, data: str | bytes, *, mode: int | None = None) -> Path:
    """Replace ``repo/rel`` (a file or a symlink) with ``data``, creating parent directories."""
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.is_file():
        path.unlink()
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if mode is not None:
        path.chmod(mode)
    return path


def set_mtime(path: Path, seconds_ago: float) -> None:
    t = time.time() - seconds_ago
    os.utime(path, (t, t), follow_symlinks=False)


def dead_pid() -> int:
    """The pid of a process that has ended (reaped), as an older version's temporary names
    its killed writer."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def lock_holder(path: Path, *, cwd: Path) -> subprocess.Popen[bytes]:
    """A real process holding ``path`` as a writer holds its temporary (created and ``flock``'ed
    by :func:`ledger.git.liveness.take_lock`), started and holding when this returns; the
    caller kills it."""
    code = (
        "import time\nfrom pathlib import Path\nfrom ledger.git.liveness import take_lock\n"
        f"fd = take_lock(Path({str(path)!r}))\nprint(fd is not None, flush=True)\ntime.sleep(120)\n"
    )
    holder = run_python(code, cwd=cwd)
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"True"
    return holder


def run_python(code: str, *, cwd: Path) -> subprocess.Popen[bytes]:
    """Start a real Python process that can import ledger (for concurrency tests)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
