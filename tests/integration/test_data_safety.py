"""The fault campaign's data-loss findings, each reproduced and pinned (docs/defects.md#fault-campaign):
the separate git dir layout, an ignored file in a restore's way, hostile files as sessions,
parents and settings, and a stale store lock."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.errors import UnsafeLayoutError
from ledger.git.repo import GitRepo
from ledger.git.store.chain import STORE_REF
from tests.bridgekit import FakePi
from tests.cli.helpers import Result
from tests.enginekit import Agent, tree_of_commit
from tests.gitkit import ROOT, fresh_tree, git


def _tree_files(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if any(rel == s or rel.startswith(s + "/") for s in skip):
            continue
        if path.is_symlink():
            out[rel] = b"-> " + os.fsencode(os.readlink(path))
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def _rewind(*args: str | Path, cwd: Path, timeout: float = 60) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _identity(repo: Path) -> None:
    git(repo, "config", "user.name", "Rewind Test")
    git(repo, "config", "user.email", "rewind@example.com")


# --- 1. the work tree is the one git uses ------------------------------------------------------


@pytest.mark.parametrize("how", ["init", "clone"])
def test_a_separate_git_dir_restore_changes_nothing_outside_the_work_tree(
    tmp_path: Path, how: str
) -> None:
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "thesis.txt").write_text("one\n")
    project = home / "proj"
    if how == "init":
        project.mkdir()
        git(project, "init", "-q", "--separate-git-dir", str(home / "proj.git"))
    else:
        source = tmp_path / "source"
        source.mkdir()
        git(source, "init", "-q")
        _identity(source)
        (source / "seed.txt").write_text("seed\n")
        git(source, "add", "-A")
        git(source, "commit", "-qm", "seed")
        git(
            home,
            "clone",
            "-q",
            "--separate-git-dir",
            str(home / "proj.git"),
            str(source),
            str(project),
        )
    _identity(project)
    (project / "a.txt").write_text("v1\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "c1")
    assert GitRepo.discover(project).root == project.resolve()

    agent = Agent.start(project, home / ".pi" / "agent")
    expected = fresh_tree(project)  # git's own tree of the work tree before the prompt
    user, _ = agent.prompt("edit", lambda repo: (repo / "a.txt").write_text("v2\n"))
    point = agent.engine.resolve_point(user)
    assert point is not None and tree_of_commit(project, point) == expected
    outside_before = _tree_files(home, skip=("proj", "proj.git", ".pi"))

    (home / "Documents" / "thesis-ch2.txt").write_text("two\n")
    result = _rewind("restore", agent.session_file, user, "--mode", "files", "--yes", cwd=project)

    assert result.code == 0, result.err
    assert (project / "a.txt").read_text() == "v1\n"
    assert (home / "Documents" / "thesis-ch2.txt").read_text() == "two\n"
    assert (
        _tree_files(home, skip=("proj", "proj.git", ".pi", "Documents/thesis-ch2.txt"))
        == outside_before
    )
    assert agent.session_file.exists()
    assert git(project, "rev-parse", "-q", "--verify", STORE_REF).strip()
    assert git(project, "log", "--oneline").count("\n") >= 1


def test_git_dir_and_work_tree_from_the_environment_are_the_ones_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta, tree = tmp_path / "meta.git", tmp_path / "tree"
    tree.mkdir()
    git(tmp_path, "init", "-q", "--bare", str(meta))
    git(tmp_path, "--git-dir", str(meta), "config", "core.bare", "false")
    git(tmp_path, "--git-dir", str(meta), "config", "core.worktree", str(tree))
    (tree / "x.txt").write_text("x\n")
    monkeypatch.setenv("GIT_DIR", str(meta))
    monkeypatch.setenv("GIT_WORK_TREE", str(tree))
    repo = GitRepo.discover(tree)
    assert (repo.root, repo.git_dir) == (tree.resolve(), meta.resolve())


def test_a_git_dir_inside_the_work_tree_under_another_name_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    git(project, "init", "-q", "--separate-git-dir", str(project / "inner.git"))
    with pytest.raises(UnsafeLayoutError, match="lies inside the work tree"):
        GitRepo.discover(project)
    result = _rewind("snapshot", cwd=project)
    assert result.code == 1 and result.err.startswith("error: ") and "hint: " in result.err
    assert "Traceback" not in result.err


def test_a_restore_never_writes_inside_the_agent_dir(repo: Path, tmp_path: Path) -> None:
    agent_dir = repo / "dot-pi" / "agent"  # a dotfiles-style repository holding the agent dir
    agent = Agent.start(repo, agent_dir)
    user, _ = agent.prompt("one", lambda r: (r / "f.txt").write_text("1\n"))
    agent.prompt("two", lambda r: (r / "f.txt").write_text("2\n"))
    before = agent.session_file.read_bytes()
    result = _rewind(
        "--agent-dir",
        agent_dir,
        "restore",
        agent.session_file,
        user,
        "--mode",
        "files",
        "--yes",
        cwd=repo,
    )
    assert result.code == 1
    assert "inside a git directory or Pi's agent dir" in result.err
    assert agent.session_file.read_bytes() == before
    assert (repo / "f.txt").read_text() == "2\n"


# --- 3. ignored files in a restore's way ---------------------------------------------------------


def test_an_ignored_file_in_the_way_is_kept_by_restore_and_by_undo(
    repo: Path, tmp_path: Path
) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    (repo / ".env").write_text("KEY=old-placeholder\n")  # captured while untracked and not ignored
    user, _ = agent.prompt("add a feature", lambda r: (r / "feature.py").write_text("x = 1\n"))
    agent.prompt("ignore env", lambda r: (r / ".gitignore").write_text(".env\n"))
    (repo / ".env").write_text("KEY=real-secret\n")  # now ignored: the user's own

    result = _rewind(
        "restore", agent.session_file, user, "--mode", "files", "--yes", "--json", cwd=repo
    )
    assert result.code == 0, result.err
    assert (repo / ".env").read_text() == "KEY=real-secret\n"
    assert "left alone (ignored or protected now" in result.err
    assert not (repo / ".gitignore").exists()

    undo = _rewind("undo", agent.session_file, "--yes", cwd=repo)
    assert undo.code == 0, undo.err
    assert (repo / ".env").read_text() == "KEY=real-secret\n"
    assert (repo / ".gitignore").read_text() == ".env\n"


def test_an_ignored_path_the_target_holds_is_not_created_so_undo_stays_exact(
    repo: Path, tmp_path: Path
) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    (repo / "cache.txt").write_text("old cache\n")
    user, _ = agent.prompt("one", lambda r: (r / "a.txt").write_text("1\n"))
    (repo / "cache.txt").unlink()
    agent.prompt("two", lambda r: (r / ".gitignore").write_text("cache.txt\n"))
    before = _tree_files(repo, skip=(".git",))

    assert (
        _rewind("restore", agent.session_file, user, "--mode", "files", "--yes", cwd=repo).code == 0
    )
    assert not (repo / "cache.txt").exists()
    assert _rewind("undo", agent.session_file, "--yes", cwd=repo).code == 0
    assert _tree_files(repo, skip=(".git",)) == before


# --- 4. hostile files ---------------------------------------------------------------------------


@pytest.fixture
def session_world(repo: Path, isolated_env: Path) -> Agent:
    agent = Agent.start(repo, isolated_env / ".pi" / "agent")
    agent.prompt("one", lambda r: (r / "a.txt").write_text("1\n"))
    return agent


def _with_parent(agent: Agent, parent: str) -> None:
    lines = agent.session_file.read_bytes().split(b"\n", 1)
    import json

    header = json.loads(lines[0])
    header["parentSession"] = parent
    agent.session_file.write_bytes(json.dumps(header).encode() + b"\n" + lines[1])


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_hostile_parent_session_gives_a_clear_message_within_seconds(
    session_world: Agent, kind: str
) -> None:
    agent, repo = session_world, session_world.repo
    hostile = agent.agent_dir / f"parent-{kind}.jsonl"
    if kind == "fifo":
        os.mkfifo(hostile)
    else:
        os.symlink("/dev/zero", hostile)
    _with_parent(agent, str(hostile))
    for args in (
        ("log", agent.session_file, "--lineage"),
        ("tree", agent.session_file),
        ("sweep", agent.session_file),
        ("restore", agent.session_file, "@", "--dry-run"),
    ):
        started = time.monotonic()
        result = _rewind(*args, cwd=repo, timeout=30)
        assert time.monotonic() - started < 20
        assert "Traceback" not in result.err and "internal error" not in result.err, (
            args,
            result.err,
        )
        assert result.code in (0, 1), (args, result)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_hostile_session_file_in_the_sessions_dir_is_skipped(
    session_world: Agent, kind: str
) -> None:
    agent, repo = session_world, session_world.repo
    hostile = agent.agent_dir / "sessions" / f"zz-{kind}.jsonl"
    if kind == "fifo":
        os.mkfifo(hostile)
    else:
        os.symlink("/dev/zero", hostile)
    for args in (
        ("sessions",),
        ("doctor",),
        ("sweep", "--scan", "repo-sessions"),
        ("tree", "@"),
        ("log", "@"),
        ("checkpoint", "@"),
    ):
        started = time.monotonic()
        result = _rewind(*args, cwd=repo, timeout=30)
        assert time.monotonic() - started < 20
        assert "Traceback" not in result.err and "internal error" not in result.err, (
            args,
            result.err,
        )
        assert result.code == 0, (args, result)


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/stdin", "fifo", "big"])
def test_a_hostile_project_settings_file_is_ignored_with_a_warning(
    session_world: Agent, target: str
) -> None:
    agent, repo = session_world, session_world.repo
    settings = repo / ".pi" / "settings.json"
    settings.parent.mkdir()
    if target == "fifo":
        os.mkfifo(settings)
    elif target == "big":
        settings.write_text('{"rewind": {}, "pad": "' + "x" * (2 << 20) + '"}')
    else:
        os.symlink(target, settings)
    started = time.monotonic()
    result = _rewind("checkpoint", agent.session_file, cwd=repo, timeout=30)
    assert time.monotonic() - started < 20
    assert result.code == 0, result.err
    assert f"{settings}: cannot read settings" in result.err


def test_the_bridge_answers_session_start_with_a_broken_project_settings_file(
    repo: Path, isolated_env: Path
) -> None:
    (repo / ".pi").mkdir()
    os.symlink("/dev/stdin", repo / ".pi" / "settings.json")
    fake = FakePi(repo, isolated_env / ".pi" / "agent")
    try:
        reply = fake.event("session_start", {"reason": "startup"})
        assert reply.error is None
        assert any("cannot read settings" in n["text"] for n in reply.notices), reply.notices
        user, _ = fake.prompt("one", lambda: (repo / "a.txt").write_text("1\n"))
        assert user
    finally:
        fake.close()


def test_a_stale_store_lock_is_named_with_its_age_and_remedy(session_world: Agent) -> None:
    agent, repo = session_world, session_world.repo
    lock = repo / ".git" / "refs" / "pi-rewind" / "store.lock"
    lock.write_text("")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    (repo / "b.txt").write_text("new\n")

    started = time.monotonic()
    result = _rewind("checkpoint", agent.session_file, cwd=repo)
    assert time.monotonic() - started < 10
    assert result.code == 1
    assert str(lock) in result.err and "rm " in result.err

    doctor = _rewind("doctor", cwd=repo)
    assert doctor.code == 1
    assert "stale lock" in doctor.err and str(lock) in doctor.out + doctor.err
    lock.unlink()
    assert _rewind("checkpoint", agent.session_file, cwd=repo).code == 0
