"""``rewind history`` and ``rewind undo --to OP``: real repositories, real session files, real
``rewind`` processes (issue 33: every earlier state one choice away)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ledger.demo import DemoWorld, build_world, run_prompts
from ledger.engine.engine import Engine
from ledger.engine.host import FileHost
from ledger.git.repo import GitRepo
from ledger.records import FORK_PENDING, OP
from ledger.session.store import read_session
from tests.cli.helpers import Result, run_cli, run_process
from tests.enginekit import fresh_index_tree, tree_of_commit
from tests.gitkit import git


@pytest.fixture
def world(tmp_path: Path) -> DemoWorld:
    return run_prompts(build_world(tmp_path / "demo"))


def rewind(world: DemoWorld, *args: str) -> Result:
    """A real ``rewind`` process in the demo repository."""
    return run_process("--agent-dir", world.agent_dir, *args, cwd=world.repo)


def cli(capsys: pytest.CaptureFixture[str], world: DemoWorld, *args: str) -> Result:
    return run_cli(capsys, "--agent-dir", world.agent_dir, *args, cwd=world.repo)


def files(repo: Path) -> dict[str, str]:
    return {
        str(p.relative_to(repo)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def op_records(world: DemoWorld) -> list[tuple[str, str | None, str | None]]:
    """``(id, current, undo)`` of every file-changing ``rewind-op``, in file order."""
    found = []
    for entry in read_session(world.session).entries:
        if entry.custom_type != OP:
            continue
        data = entry.raw["data"]
        snapshots = data["snapshots"]
        current = snapshots[data["current"]] if "current" in data else None
        undo = snapshots[data["undo"]] if "undo" in data else None
        if current is not None:
            found.append((entry.id, current, undo))
    return found


def three_operations(world: DemoWorld) -> None:
    """A restore of files and conversation, a restore of files only, and an undo."""
    for args in (
        ("restore", "@", world.users[1], "--yes"),
        ("restore", "@", world.users[0], "--mode", "files", "--yes"),
        ("undo", "@", "--yes"),
    ):
        result = rewind(world, *args)
        assert result.code == 0, result.err


def name_status(repo: Path, before: str, after: str) -> dict[str, list[str]]:
    out = git(repo, "diff-tree", "-r", "--no-renames", "--name-status", before, after)
    split: dict[str, list[str]] = {"added": [], "modified": [], "deleted": []}
    for line in out.splitlines():
        status, path = line.split("\t", 1)
        split[{"A": "added", "M": "modified", "D": "deleted"}[status[0]]].append(path)
    return {k: sorted(v) for k, v in split.items()}


def test_history_lists_the_operations_newest_first_with_snapshots_and_changed_paths(
    world: DemoWorld,
) -> None:
    three_operations(world)
    records = op_records(world)
    assert len(records) == 3
    listed = rewind(world, "history", "@", "--json")
    assert listed.code == 0, listed.err
    ops = listed.json_lines()
    assert [op["id"] for op in ops] == [r[0] for r in reversed(records)]
    assert [op["kind"] for op in ops] == ["undo", "restore-files", "restore-both"]
    for op, (record, current, undo) in zip(ops, reversed(records), strict=True):
        assert (op["before"], op["after"]) == (undo, current), record
        assert op["beforeExists"] is True and op["changesKnown"] is True
        changed = {k: sorted(op[k]) for k in ("added", "modified", "deleted")}
        assert changed == name_status(world.repo, undo, current)
        assert any(changed.values())
    assert ops[2]["deleted"] and ops[0]["before"] == ops[1]["after"], "the undo swapped back"

    text = rewind(world, "history", "@")
    assert text.code == 0, text.err
    heads = [line for line in text.out.splitlines() if not line.startswith(" ")]
    assert [line.split()[0] for line in heads] == [op["id"] for op in ops]
    for head, op in zip(heads, ops, strict=True):
        assert f"before {op['before'][:12]}" in head and f"after {op['after'][:12]}" in head
        assert op["kind"] in head
    assert "  D greeting.py" in text.out

    newest = rewind(world, "history", "@", "-n", "1", "--no-paths", "--json").json_lines()
    assert [op["id"] for op in newest] == [ops[0]["id"]] and "added" not in newest[0]


def test_undo_to_the_oldest_operation_brings_back_exactly_the_files_before_it(
    world: DemoWorld,
) -> None:
    three_operations(world)
    oldest, _current, before = op_records(world)[0]
    assert before is not None
    files_before_to = files(world.repo)
    tree_before_to = fresh_index_tree(world.repo)

    result = rewind(world, "undo", "@", "--to", oldest[:5], "--yes", "--json")
    assert result.code == 0, result.err
    report = result.json_lines()[0]
    assert report["operation"] == oldest and report["changed"] and report["target"] == before
    # Byte for byte (blob ids and modes) the snapshot taken just before the oldest operation.
    assert fresh_index_tree(world.repo) == tree_of_commit(world.repo, before)
    assert files(world.repo) != files_before_to

    # One more operation: its undo is the state it replaced, so a plain undo swaps back.
    record, current, undo = op_records(world)[-1]
    assert record == report["record"] and current == before
    assert undo is not None and tree_of_commit(world.repo, undo) == tree_before_to
    newest = rewind(world, "history", "@", "-n", "1", "--json").json_lines()[0]
    assert (newest["id"], newest["before"], newest["after"]) == (record, undo, before)

    back = rewind(world, "undo", "@", "--yes")
    assert back.code == 0, back.err
    assert files(world.repo) == files_before_to


def test_undo_to_dry_run_prints_the_plan_and_changes_nothing(world: DemoWorld) -> None:
    three_operations(world)
    oldest, _current, before = op_records(world)[0]
    files_before, session_before = files(world.repo), world.session.read_bytes()
    result = rewind(world, "undo", "@", "--to", oldest, "--dry-run", "--json")
    assert result.code == 0, result.err
    plan = result.json_lines()[0]
    assert plan["dryRun"] and plan["operation"] == oldest and plan["target"] == before
    planned = {k: sorted(plan[k]) for k in ("added", "modified", "deleted")}
    assert planned == name_status(world.repo, fresh_index_tree(world.repo), before)
    assert any(planned.values())
    text = rewind(world, "undo", "@", "--to", oldest, "--dry-run")
    assert text.code == 0 and f"before operation {oldest}" in text.out
    assert files(world.repo) == files_before and world.session.read_bytes() == session_before


def test_undo_to_without_a_terminal_requires_yes(world: DemoWorld) -> None:
    three_operations(world)
    oldest = op_records(world)[0][0]
    files_before, session_before = files(world.repo), world.session.read_bytes()
    result = rewind(world, "undo", "@", "--to", oldest)
    assert result.code == 1 and "--yes" in result.err
    assert files(world.repo) == files_before and world.session.read_bytes() == session_before


def test_an_unknown_op_is_refused_listing_the_operations(world: DemoWorld) -> None:
    three_operations(world)
    session_before = world.session.read_bytes()
    result = rewind(world, "undo", "@", "--to", "zzzz", "--yes")
    assert result.code == 1
    assert "error: no operation matches 'zzzz'" in result.err
    hint = next(line for line in result.err.splitlines() if line.startswith("hint: "))
    assert all(record in hint for record, *_ in op_records(world))
    assert world.session.read_bytes() == session_before


def test_an_ambiguous_op_prefix_is_refused_listing_the_candidates(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    three_operations(world)
    # Swap back and forth until two operation ids share a first digit (17 ids must).
    while True:
        ids = [record for record, *_ in op_records(world)]
        shared = [i for i in ids if sum(j[0] == i[0] for j in ids) > 1]
        if shared:
            break
        assert cli(capsys, world, "undo", "@", "--yes").code == 0
    prefix = shared[0][0]
    files_before, session_before = files(world.repo), world.session.read_bytes()
    result = rewind(world, "undo", "@", "--to", prefix, "--yes")
    assert result.code == 1
    assert f"error: operation name '{prefix}' is ambiguous" in result.err
    assert "hint: use a longer prefix; candidates: " in result.err
    assert all(i in result.err for i in shared)
    assert files(world.repo) == files_before and world.session.read_bytes() == session_before


def test_an_op_that_changed_no_file_has_no_state_before_it(
    world: DemoWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = cli(
        capsys, world, "restore", "@", world.assistants[0], "--mode", "conversation", "--yes"
    )
    assert moved.code == 0, moved.err
    record = op_records(world)[-1][0]
    listed = rewind(world, "history", "@", "--json").json_lines()
    assert [(op["id"], op["kind"], op["before"]) for op in listed] == [(record, "move", None)]
    session_before = world.session.read_bytes()
    result = rewind(world, "undo", "@", "--to", record, "--yes")
    assert result.code == 1
    assert f"error: cannot undo to before operation {record}" in result.err
    assert "changed no file" in result.err and "hint: " in result.err
    assert world.session.read_bytes() == session_before


def test_an_op_whose_before_snapshot_is_gone_is_refused(world: DemoWorld) -> None:
    gone = "ab" * 20
    engine = Engine(
        FileHost(world.session, world.agent_dir / "sessions"), GitRepo.discover(world.repo)
    )
    current = engine.snapshot()
    record = engine.append_op(current=current, undo=gone)
    listed = rewind(world, "history", "@", "--json").json_lines()
    assert listed[0]["id"] == record and listed[0]["beforeExists"] is False
    assert listed[0]["changesKnown"] is False
    files_before, session_before = files(world.repo), world.session.read_bytes()
    result = rewind(world, "undo", "@", "--to", record, "--yes")
    assert result.code == 1 and "was pruned" in result.err and "hint: " in result.err
    assert files(world.repo) == files_before and world.session.read_bytes() == session_before


def test_a_forks_history_is_its_own_and_lineage_adds_its_parents(world: DemoWorld) -> None:
    three_operations(world)
    forked = rewind(world, "fork", "@", world.users[0], "--mode", "code", "--yes", "--json")
    assert forked.code == 0, forked.err
    child = Path(forked.json_lines()[0]["child"])
    own = rewind(world, "history", str(child), "--json").json_lines()
    assert [op["kind"] for op in own] == ["fork-import"]
    parent_ids = {record for record, *_ in op_records(world)}
    assert not parent_ids & {op["id"] for op in own}
    # The parent's fork-pending record of a fork that restored files is its /fork restore.
    pending = [e.id for e in read_session(world.session).entries if e.custom_type == FORK_PENDING]
    both = rewind(world, "history", str(child), "--lineage", "--json").json_lines()
    assert {op["id"] for op in both} == parent_ids | {own[0]["id"], *pending}
    assert [op["kind"] for op in both[:2]] == ["fork-import", "fork-restore"]
    assert both[0]["before"] == both[1]["before"] and both[0]["after"] == both[1]["after"]
    stamps = [op["timestamp"] for op in both]
    assert stamps == sorted(stamps, reverse=True)
