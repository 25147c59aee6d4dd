"""Shadow repositories (docs/shadow.md): rewind in a directory that is not a git repository.

Real git, real directories: the capture equals a fresh index under the same excludes, restore,
undo and fork work, nothing but the user's files ever appears in the directory, shadows are
keyed by real path, ``git init`` later migrates, ``/`` and the home directory are refused.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from ledger.engine.engine import Engine
from ledger.engine.host import FileHost
from ledger.engine.operations import fork, restore, undo
from ledger.errors import NoShadowError, ShadowRefusedError
from ledger.git.capture.scan import capture_tree
from ledger.git.shadow.layout import ShadowRepo, find_shadow, shadow_home
from ledger.git.shadow.open import open_work_tree
from ledger.git.shadow.upkeep import list_shadows, remove_orphaned
from ledger.git.store.chain import Store
from ledger.git.store.snapshot import take_snapshot
from ledger.retention.plan import Policy
from ledger.retention.sweep import run_sweep
from ledger.session.agent_dir import resolve_agent_dir
from ledger.session.discovery import repo_sessions
from ledger.session.store import SessionAppender
from ledger.settings import SnapshotSettings
from tests.enginekit import Agent
from tests.gitkit import git

SETTINGS = SnapshotSettings()


@pytest.fixture
def agent_dir() -> Path:
    return resolve_agent_dir()


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    """A directory outside any git repository with a typical mix of files."""
    d = tmp_path / "work" / "scratch"
    (d / "src" / "deep").mkdir(parents=True)
    (d / "src" / "main.py").write_text("print('hi')\n")
    (d / "src" / "deep" / "data.json").write_text('{"a": 1}\n')
    (d / ".hidden").write_text("dotfile\n")
    run = d / "run.sh"
    run.write_text("#!/bin/sh\necho run\n")
    run.chmod(0o755)
    (d / "link").symlink_to("src/main.py")
    (d / "node_modules" / "pkg").mkdir(parents=True)
    (d / "node_modules" / "pkg" / "index.js").write_text("module.exports = 1\n")
    (d / ".venv" / "bin").mkdir(parents=True)
    (d / ".venv" / "bin" / "python").write_text("#!/bin/sh\n")
    (d / ".cache").mkdir()
    (d / ".cache" / "blob").write_bytes(b"\0" * 100)
    (d / "__pycache__").mkdir()
    (d / "__pycache__" / "m.pyc").write_bytes(b"\x00pyc")
    return d


def listing(directory: Path) -> dict[str, tuple[int, bytes]]:
    """Every path below ``directory`` (hidden ones too, symlinks not followed) → mode, content."""
    found: dict[str, tuple[int, bytes]] = {}
    for root, dirs, files in os.walk(directory, followlinks=False):
        for name in dirs + files:
            path = Path(root) / name
            st = os.lstat(path)
            rel = str(path.relative_to(directory))
            if stat.S_ISLNK(st.st_mode):
                found[rel] = (st.st_mode, os.readlink(path).encode())
            elif stat.S_ISREG(st.st_mode):
                found[rel] = (st.st_mode, path.read_bytes())
            else:
                found[rel] = (st.st_mode, b"")
    return found


def oracle(directory: Path, repo: ShadowRepo) -> str:
    """A fresh index for ``directory`` under the shadow's own exclude file, in a throw-away git
    dir: ``git --git-dir=<tmp> --work-tree=<dir> add -A`` + ``write-tree``."""
    with tempfile.TemporaryDirectory() as tmp:
        git_dir = Path(tmp) / "git"
        subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
        (git_dir / "info").mkdir(exist_ok=True)
        (git_dir / "info" / "exclude").write_bytes((repo.git_dir / "info" / "exclude").read_bytes())
        base = ["git", f"--git-dir={git_dir}", f"--work-tree={directory}"]
        subprocess.run([*base, "-c", "core.autocrlf=false", "add", "-A"], cwd=directory, check=True)
        return subprocess.run(
            [*base, "write-tree"], cwd=directory, check=True, capture_output=True, text=True
        ).stdout.strip()


def shadow_agent(directory: Path, agent_dir: Path) -> Agent:
    """The scripted agent of tests/enginekit.py, with its engine on the shadow repository."""

    class ShadowAgent(Agent):
        def __post_init__(self) -> None:
            self.host = FileHost(self.session_file, self.agent_dir / "sessions")
            opened = open_work_tree(self.repo, self.agent_dir, create=True)
            self.engine = Engine(self.host, opened.repo)
            self.writer = SessionAppender(self.session_file)

    return ShadowAgent.start(directory, agent_dir)


def write(name: str, text: str):
    def change(root: Path) -> None:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    return change


def remove(name: str):
    return lambda root: (root / name).unlink()


# --- capture -------------------------------------------------------------------------------


def test_capture_equals_a_fresh_index_under_the_default_excludes(
    plain: Path, agent_dir: Path
) -> None:
    repo = open_work_tree(plain, agent_dir, create=True).repo
    assert isinstance(repo, ShadowRepo)
    first = capture_tree(repo, SETTINGS)
    assert first.tree == oracle(plain, repo)
    names = git(plain, f"--git-dir={repo.git_dir}", "ls-tree", "-r", "--name-only", first.tree)
    assert set(names.split()) == {"src/main.py", "src/deep/data.json", ".hidden", "run.sh", "link"}
    # A kept private index, after changes of every kind.
    (plain / "src" / "main.py").write_text("print('changed')\n")
    (plain / "run.sh").chmod(0o644)
    (plain / ".hidden").unlink()
    (plain / "new dir").mkdir()
    (plain / "new dir" / "f.txt").write_text("new\n")
    (plain / ".gitignore").write_text("*.log\n")
    (plain / "x.log").write_text("ignored by the user's own .gitignore\n")
    second = capture_tree(repo, SETTINGS)
    assert second.tree == oracle(plain, repo)
    assert "x.log" not in git(
        plain, f"--git-dir={repo.git_dir}", "ls-tree", "-r", "--name-only", second.tree
    )


def test_files_above_the_size_limit_are_skipped(plain: Path, agent_dir: Path) -> None:
    repo = open_work_tree(plain, agent_dir, create=True).repo
    (plain / "big.bin").write_bytes(b"x" * 2048)
    result = capture_tree(repo, SETTINGS.replace(shadow_max_file_bytes=1024))
    assert [(s.path, s.reason) for s in result.skipped] == [("big.bin", "too-large")]
    assert "big.bin" not in git(
        plain, f"--git-dir={repo.git_dir}", "ls-tree", "-r", "--name-only", result.tree
    )
    unlimited = capture_tree(repo, SETTINGS.replace(shadow_max_file_bytes=0))
    assert unlimited.tree == oracle(plain, repo)


def test_changed_excludes_rebuild_the_capture(plain: Path, agent_dir: Path) -> None:
    repo = open_work_tree(plain, agent_dir, create=True).repo
    capture_tree(repo, SETTINGS)
    # protectedDirs still apply in a shadow; turned off here to see the excludes alone.
    narrow = SETTINGS.replace(shadow_excludes=("src/deep/",), protected_dirs=())
    tree = capture_tree(repo, narrow).tree
    assert tree == oracle(plain, repo)
    names = git(plain, f"--git-dir={repo.git_dir}", "ls-tree", "-r", "--name-only", tree)
    assert "node_modules/pkg/index.js" in names and "src/deep/data.json" not in names


# --- nothing in the user's directory ---------------------------------------------------------


def test_snapshot_restore_undo_fork_sweep_write_nothing_but_the_users_files(
    plain: Path, agent_dir: Path
) -> None:
    agent = shadow_agent(plain, agent_dir)
    u1, _ = agent.prompt("create a", write("a.txt", "a1\n"))
    start = listing(plain)
    u2, _ = agent.prompt("edit", write("a.txt", "a2\n"), write("b/c.txt", "c\n"))
    after = listing(plain)
    assert set(after) - set(start) == {"b", "b/c.txt"}

    report = restore(agent.engine, u2, mode="files")
    assert report.changed
    assert listing(plain) == start
    undo(agent.engine)
    assert listing(plain) == after
    forked = fork(agent.engine, u2, mode="all")
    assert forked.child.is_file()
    assert listing(plain) == start
    sweep = run_sweep(
        agent.engine.repo,
        agent.session_file,
        agent_dir,
        scan_mode="repo-sessions",
        policy=Policy(max_snapshots=1),
    )
    assert not sweep.dry_run
    assert listing(plain) == start
    assert not (plain / ".git").exists()
    # The shadow lives under the agent dir, and Pi's own session discovery finds the session.
    assert agent.engine.repo.git_dir.is_relative_to(agent_dir)
    assert [s.path for s in repo_sessions(agent_dir, plain)][-1] == agent.session_file
    assert u1


def test_restore_keeps_excluded_and_large_files(plain: Path, agent_dir: Path) -> None:
    agent = shadow_agent(plain, agent_dir)
    agent.prompt("one", write("a.txt", "1\n"))
    u2, _ = agent.prompt("two", write("a.txt", "2\n"))
    (plain / "node_modules" / "pkg" / "later.js").write_text("installed later\n")
    (plain / "huge.bin").write_bytes(b"h" * (SETTINGS.shadow_max_file_bytes + 1))
    restore(agent.engine, u2, mode="files")  # the point before prompt two ran
    assert (plain / "a.txt").read_text() == "1\n"
    assert (plain / "node_modules" / "pkg" / "later.js").exists(), "excluded: untouched"
    assert (plain / "huge.bin").stat().st_size == SETTINGS.shadow_max_file_bytes + 1


# --- keys, refusals, read-only opens ---------------------------------------------------------


def test_same_name_directories_get_different_shadows(tmp_path: Path, agent_dir: Path) -> None:
    one, two = tmp_path / "a" / "proj", tmp_path / "b" / "proj"
    for d, text in ((one, "one\n"), (two, "two\n")):
        d.mkdir(parents=True)
        (d / "f.txt").write_text(text)
    r1 = open_work_tree(one, agent_dir, create=True).repo
    r2 = open_work_tree(two, agent_dir, create=True).repo
    assert r1.git_dir != r2.git_dir
    s1, s2 = take_snapshot(r1, SETTINGS), take_snapshot(r2, SETTINGS)
    assert s1.tree != s2.tree
    assert Store(r1).snapshots() == [s1.commit] and Store(r2).snapshots() == [s2.commit]


def test_a_subdirectory_uses_the_shadow_of_its_directory(plain: Path, agent_dir: Path) -> None:
    top = open_work_tree(plain, agent_dir, create=True).repo
    inner = open_work_tree(plain / "src" / "deep", agent_dir, create=True).repo
    assert inner.git_dir == top.git_dir and inner.root == plain


def test_a_moved_directory_is_a_new_one_and_its_old_shadow_is_orphaned(
    plain: Path, agent_dir: Path
) -> None:
    old = open_work_tree(plain, agent_dir, create=True).repo
    take_snapshot(old, SETTINGS)
    moved = plain.parent / "renamed"
    plain.rename(moved)
    with pytest.raises(NoShadowError):
        open_work_tree(moved, agent_dir, create=False)
    new = open_work_tree(moved, agent_dir, create=True).repo
    assert new.git_dir != old.git_dir
    states = {str(s.home): s.state for s in list_shadows(agent_dir)}
    assert states == {str(old.git_dir.parent): "gone", str(new.git_dir.parent): "active"}
    removed = remove_orphaned(agent_dir)
    assert [r.home for r in removed] == [old.git_dir.parent]
    assert not old.git_dir.parent.exists() and new.git_dir.exists()


def test_read_only_open_creates_nothing(plain: Path, agent_dir: Path) -> None:
    with pytest.raises(NoShadowError):
        open_work_tree(plain, agent_dir, create=False)
    assert find_shadow(plain, agent_dir) is None
    assert not shadow_home(agent_dir, plain).exists()


@pytest.mark.parametrize("where", ["home", "root", "agent-dir", "inside-agent-dir"])
def test_home_root_and_the_agent_dir_are_refused(where: str, agent_dir: Path) -> None:
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "sessions").mkdir(exist_ok=True)
    start = {
        "home": Path.home(),
        "root": Path("/"),
        "agent-dir": agent_dir,
        "inside-agent-dir": agent_dir / "sessions",
    }[where]
    before = sorted(os.listdir(agent_dir))
    with pytest.raises(ShadowRefusedError):
        open_work_tree(start, agent_dir, create=True)
    assert sorted(os.listdir(agent_dir)) == before


# --- git init later ------------------------------------------------------------------------


def test_git_init_later_moves_every_rewind_point_into_the_repository(
    plain: Path, agent_dir: Path
) -> None:
    agent = shadow_agent(plain, agent_dir)
    agent.prompt("one", write("a.txt", "1\n"))
    u2, _ = agent.prompt("two", write("a.txt", "2\n"))
    shadow_repo = agent.engine.repo
    assert isinstance(shadow_repo, ShadowRepo)
    shadow_snaps = Store(shadow_repo).snapshots()

    git(plain, "init", "-q")
    (plain / ".gitignore").write_text("node_modules/\n.venv/\n.cache/\n__pycache__/\n")
    # A read-only open says nothing and changes nothing.
    quiet = open_work_tree(plain, agent_dir, create=False)
    assert not isinstance(quiet.repo, ShadowRepo) and not quiet.notices
    assert Store(quiet.repo).head() is None

    opened = open_work_tree(plain, agent_dir, create=True)
    assert not isinstance(opened.repo, ShadowRepo)
    assert len(opened.notices) == 1 and "became a git repository" in opened.notices[0]
    real_store = Store(opened.repo)
    assert set(shadow_snaps) <= set(real_store.snapshots())
    assert open_work_tree(plain, agent_dir, create=True).notices == [], "said once"
    assert {s.state for s in list_shadows(agent_dir)} == {"migrated"}

    # The old points restore in the real repository, without touching HEAD or the index.
    resumed = Agent(plain, agent_dir, agent.session_file)
    resumed.engine.session_start("startup")
    report = restore(resumed.engine, u2, mode="files")
    assert report.changed and (plain / "a.txt").read_text() == "1\n"
    assert not (plain / ".git" / "index").exists()
    assert git(plain, "rev-parse", "--verify", "-q", "HEAD", check=False) == ""


def test_a_snapshot_added_to_the_shadow_after_migration_is_migrated_too(
    plain: Path, agent_dir: Path
) -> None:
    shadow = open_work_tree(plain, agent_dir, create=True).repo
    take_snapshot(shadow, SETTINGS)
    git(plain, "init", "-q")
    real = open_work_tree(plain, agent_dir, create=True).repo
    (plain / "late.txt").write_text("a session still running on the shadow\n")
    late = take_snapshot(ShadowRepo.open(shadow.shadow), SETTINGS)
    assert not Store(real).reaches(late.commit)
    open_work_tree(plain, agent_dir, create=True)
    assert Store(real).reaches(late.commit)


def test_the_shadow_head_follows_the_last_snapshot_and_a_broken_one_is_reset(
    plain: Path, agent_dir: Path
) -> None:
    repo = open_work_tree(plain, agent_dir, create=True).repo
    assert isinstance(repo, ShadowRepo)
    first = take_snapshot(repo, SETTINGS)
    (plain / "more.txt").write_text("more\n")
    second = take_snapshot(repo, SETTINGS)
    # The next capture's status compares the index with this HEAD: only paths that changed
    # since the index was last written are listed (an unborn HEAD lists every file as added).
    capture_tree(repo, SETTINGS)
    assert (repo.git_dir / "HEAD").read_text().strip() == second.commit
    status = git(
        plain,
        f"--git-dir={repo.git_dir}",
        f"--work-tree={plain}",
        "status",
        "--porcelain",
        env={"GIT_INDEX_FILE": str(repo.git_dir / "pi-rewind" / "index")},
    )
    assert set(status.splitlines()) <= {"D  more.txt", "?? more.txt"}
    message = git(plain, f"--git-dir={repo.git_dir}", "log", "-1", "--format=%B", first.commit)
    assert "Head:" not in message and "Branch:" not in message
    (repo.git_dir / "HEAD").write_text("1" * 40 + "\n")
    (repo.git_dir / "pi-rewind" / "last-snapshot.json").unlink()
    (plain / "again.txt").write_text("again\n")
    assert capture_tree(repo, SETTINGS).tree == oracle(plain, repo)
