"""``rewind restore/undo/fork/checkpoint/diff/demo``: real repositories, real session files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ledger.demo import DemoWorld, build_world, run_prompts
from ledger.records import FORK_PENDING, OP
from ledger.session.store import read_session
from tests.cli.helpers import run_cli, run_process
from tests.gitkit import git


@pytest.fixture
def world(tmp_path: Path) -> DemoWorld:
    return run_prompts(build_world(tmp_path / "demo"))


def cli(capsys: pytest.CaptureFixture[str], world: DemoWorld, *args: str):
    return run_cli(capsys, "--agent-dir", world.agent_dir, *args, cwd=world.repo)


def files(repo: Path) -> dict[str, str]:
    return {
        str(p.relative_to(repo)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def test_dry_run_prints_the_plan_and_changes_nothing(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    before, session_bytes = files(world.repo), world.session.read_bytes()
    result = cli(capsys, world, "restore", "@", world.users[1], "--dry-run", "--json")
    assert result.code == 0, result.err
    plan = result.json_lines()[0]
    assert (plan["added"], plan["modified"], sorted(plan["deleted"])) == (
        ["notes.md"],
        ["hello.py"],
        ["greeting.py", "scratch.txt"],
    )
    assert plan["leaf"] == read_session(world.session).get(world.users[1]).parent_id
    assert files(world.repo) == before and world.session.read_bytes() == session_bytes


def test_restore_both_moves_files_and_leaf_and_undo_swaps_back(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files(world.repo)
    index_before = (world.repo / ".git" / "index").read_bytes()
    head_before = git(world.repo, "rev-parse", "HEAD")
    result = cli(capsys, world, "restore", "@", world.users[1], "--yes", "--json")
    assert result.code == 0, result.err
    report = result.json_lines()[0]
    assert report["changed"] and report["undo"]
    # users[1]'s point is the work tree before prompt 2 ran (D1): prompt 1's files only
    assert (world.repo / "notes.md").exists() and not (world.repo / "greeting.py").exists()
    assert not (world.repo / "greet.py").exists()
    assert not (world.repo / "scratch.txt").exists(), "created after the point: removed"
    assert (world.repo / "build" / "out.bin").exists(), "ignored: untouched"
    session = read_session(world.session)
    assert session.leaf.parent_id == session.get(world.users[1]).parent_id
    assert (world.repo / ".git" / "index").read_bytes() == index_before
    assert git(world.repo, "rev-parse", "HEAD") == head_before
    undone = cli(capsys, world, "undo", "@", "--yes")
    assert undone.code == 0, undone.err
    assert files(world.repo) == before
    cli(capsys, world, "undo", "@", "--yes")
    assert (world.repo / "notes.md").exists() and not (world.repo / "greeting.py").exists(), (
        "undo of undo"
    )


def test_restore_files_only_keeps_the_conversation(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    leaf = read_session(world.session).leaf_id
    result = cli(capsys, world, "restore", "@", world.assistants[0], "--mode", "files", "--yes")
    assert result.code == 0, result.err
    assert (world.repo / "notes.md").exists() and (
        world.repo / "hello.py"
    ).read_text() == "print('hello')\n"
    session = read_session(world.session)
    assert session.leaf.parent_id == leaf
    op = session.leaf.raw["data"]
    assert list(op) == ["v", "snapshots", "current", "undo"]


def test_restore_conversation_only_keeps_the_files(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files(world.repo)
    result = cli(
        capsys,
        world,
        "restore",
        "@",
        world.assistants[0],
        "--mode",
        "conversation",
        "--yes",
        "--json",
    )
    assert result.code == 0, result.err
    assert files(world.repo) == before
    session = read_session(world.session)
    assert session.leaf.parent_id == world.assistants[0]
    assert list(session.leaf.raw["data"]) == ["v", "snapshots", "current"]


def test_restore_without_a_terminal_requires_yes(world: DemoWorld) -> None:
    before = world.session.read_bytes()
    result = run_process(
        "--agent-dir", world.agent_dir, "restore", "@", world.users[0], cwd=world.repo, stdin=""
    )
    assert (
        result.code == 1 and "needs confirmation" in result.err and "hint: pass --yes" in result.err
    )
    assert world.session.read_bytes() == before


def test_an_entry_without_a_point_is_refused_with_nothing_appended(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    before = world.session.read_bytes()
    record = next(e.id for e in read_session(world.session).entries if e.type == "custom")
    result = cli(capsys, world, "restore", "@", record, "--yes")
    assert result.code == 1 and "has no exact rewind point" in result.err and "hint:" in result.err
    assert world.session.read_bytes() == before


def test_undo_without_a_rewind_is_an_error(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    result = cli(capsys, world, "undo", "@", "--yes")
    assert result.code == 1 and "nothing to undo" in result.err


def test_fork_code_only_writes_a_child_and_restores_files(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    result = cli(capsys, world, "fork", "@", world.users[2], "--mode", "code", "--yes", "--json")
    assert result.code == 0, result.err
    report = result.json_lines()[0]
    child = Path(report["child"])
    assert (world.repo / "greet.py").exists() and not (world.repo / "greeting.py").exists()
    child_session = read_session(child)
    assert child_session.parent_session == str(world.session.resolve())
    assert world.users[2] not in child_session.by_id and world.assistants[1] in child_session.by_id
    (op,) = [e.raw["data"] for e in child_session.entries if e.custom_type == OP]
    assert list(op) == ["v", "snapshots", "current", "undo"]
    pending = [
        e.raw["data"] for e in read_session(world.session).entries if e.custom_type == FORK_PENDING
    ]
    assert pending[-1]["current"] == op["snapshots"][0]
    tree = {r["id"]: r for r in cli(capsys, world, "tree", str(child), "--json").json_lines()}
    assert tree[world.users[1]]["point"], "the child resolves the parent's points through lineage"


def test_fork_conversation_keeps_files(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files(world.repo)
    result = cli(capsys, world, "fork", "@", world.users[1])
    assert result.code == 0, result.err
    assert "forked session: " in result.out
    assert files(world.repo) == before


def test_checkpoint_binds_the_current_files(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    (world.repo / "hello.py").write_text("hand edit\n")
    result = cli(capsys, world, "checkpoint", "@", "--json")
    assert result.code == 0, result.err
    report = result.json_lines()[0]
    assert report["entry"] == world.assistants[2]
    cli(capsys, world, "restore", "@", world.users[0], "--mode", "files", "--yes")
    cli(capsys, world, "restore", "@", world.assistants[2], "--mode", "files", "--yes")
    assert (world.repo / "hello.py").read_text() == "hand edit\n"


def test_diff_shows_a_stat_or_a_patch(world: DemoWorld, capsys: pytest.CaptureFixture[str]) -> None:
    stat = cli(capsys, world, "diff", "@", world.users[1], "--json").json_lines()[0]
    assert stat["modified"] == ["hello.py"]
    patch = cli(capsys, world, "diff", "@", world.users[1], "--patch").out
    assert (
        "hello.py" in patch
        and "-from greeting import greet" in patch
        and "+print('hello')" in patch
    )


def test_demo_runs_and_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its own temporary directory: a demo of another test run beside this one (two suites at
    # once) made one in the shared /tmp while this one ran, and was counted as left behind.
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    result = run_process("demo", cwd=tmp_path)
    assert result.code == 0, result.err
    for word in (
        "rewind tree",
        "rewind diff",
        "rewind restore",
        "rewind undo",
        "rewind fork",
        "rewind log",
    ):
        assert f"$ {word}" in result.out
    assert list(temp.iterdir()) == [], "nothing of its own left"


def test_demo_keep_leaves_the_world_in_place(tmp_path: Path) -> None:
    result = run_process("demo", "--keep", tmp_path / "kept", cwd=tmp_path)
    assert result.code == 0, result.err
    assert (tmp_path / "kept" / "project" / "hello.py").exists()
    again = run_process("demo", "--keep", tmp_path / "kept", cwd=tmp_path)
    assert again.code == 1 and "already exists" in again.err


def test_undo_plans_and_attributes_once_for_its_confirmation_and_its_run(
    world: DemoWorld, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33: ``rewind undo`` showed a plan (dry run), then planned and attributed it again
    to run it. The run reuses the plan it showed; the restore itself still plans once more
    under its lock, as every restore does (not counted here: ``restore_commit``)."""
    from ledger.engine import changes_since, operations

    assert cli(capsys, world, "restore", "@", world.users[1], "--yes").code == 0
    (world.repo / "mine.txt").write_text("made by hand after the restore\n")
    calls = {"plan_for": 0, "plan_authors": 0}
    plan_for, plan_authors = operations.plan_for, changes_since.plan_authors

    def counted_plan_for(*args, **kwargs):
        calls["plan_for"] += 1
        return plan_for(*args, **kwargs)

    def counted_plan_authors(*args, **kwargs):
        calls["plan_authors"] += 1
        return plan_authors(*args, **kwargs)

    monkeypatch.setattr(operations, "plan_for", counted_plan_for)
    monkeypatch.setattr(operations, "plan_authors", counted_plan_authors)
    undone = cli(capsys, world, "undo", "@", "--yes")
    assert undone.code == 0, undone.err
    assert "mine.txt" in undone.out, "the plan it showed names the user's file it deletes"
    assert calls == {"plan_for": 1, "plan_authors": 1}
    assert not (world.repo / "mine.txt").exists()
