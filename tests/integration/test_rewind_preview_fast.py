"""``/rewind``'s preview of a prompt's point (ledger/engine/preview.py ``fill_plan``) takes the
changes from the list's neighbouring diffs and keeps its checked walks and git's line counts
per tree pair (issue 34: any preview ≤ 200 ms at 100k files). What it shows must be what the
restore would do (the restore's own plan, ``plan_restore``, and git's ``--numstat``), at every
point, the first time and from what it kept; and a restore after a preview must still read the
snapshot itself."""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest

from ledger.engine.operations import restore, undo
from ledger.engine.preview import list_points, preview
from ledger.errors import LedgerError
from ledger.git.restore import checked_walks
from ledger.git.restore import plan as plan_module
from ledger.git.restore.run import plan_restore
from tests.enginekit import Agent


def numstat(repo: Path, old: str, new: str) -> dict[str, tuple[int, int, bool]]:
    """git's own counts of every changed path (the oracle for the preview's line counts)."""
    out = subprocess.run(
        ["git", "diff-tree", "-r", "-z", "--numstat", "--no-renames", old, new],
        cwd=repo,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    counts: dict[str, tuple[int, int, bool]] = {}
    for record in out:  # "added TAB deleted TAB path" (no renames)
        if not record:
            continue
        added, deleted, path = record.split(b"\t", 2)
        binary = added == b"-"
        counts[os.fsdecode(path)] = (
            0 if binary else int(added),
            0 if binary else int(deleted),
            binary,
        )
    return counts


def random_session(repo: Path, tmp_path: Path, seed: int) -> tuple[Agent, list[str]]:
    """Prompts that modify, add, delete and turn files into directories and symlinks (and
    back), hand edits between prompts, and a restore with its undo."""
    rng = random.Random(seed)
    agent = Agent.start(repo, tmp_path / "agent")
    names = [f"d{n % 3}/f{n}.txt" for n in range(12)]

    def act(step: int) -> Callable[[Path], None]:
        def change(root: Path) -> None:
            for name in rng.sample(names, 3):
                path = root / name
                roll = rng.random()
                if path.is_dir() and not path.is_symlink():
                    for child in path.iterdir():
                        child.unlink()
                    path.rmdir()
                elif path.exists() or path.is_symlink():
                    if roll < 0.3:
                        path.unlink()
                    elif roll < 0.4:
                        path.unlink()
                        path.mkdir()
                        (path / "inside.txt").write_text(f"agent {step}\n")
                    elif roll < 0.5:
                        path.unlink()
                        path.symlink_to(f"target-{step}")
                    else:
                        path.write_text(f"agent {step} {rng.random()}\n" * rng.randint(1, 4))
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(b"\0binary\n" if roll < 0.1 else f"new {step}\n".encode())

        return change

    users = []
    for step in range(9):
        if step % 3 == 2:  # the user's own work between prompts
            hand = repo / f"hand/{step}.md"
            hand.parent.mkdir(exist_ok=True)
            hand.write_text(f"by hand {step}\n")
        user, _ = agent.prompt(f"prompt {step}", act(step))
        users.append(user)
        if step == 5:
            restore(agent.engine, users[2], mode="files")
            undo(agent.engine)
    (repo / "d0" / "mine.txt").parent.mkdir(exist_ok=True)
    (repo / "d0" / "mine.txt").write_text("now, by hand\n")
    return agent, users


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_points_preview_is_the_restores_plan_with_gits_line_counts(
    repo: Path, tmp_path: Path, seed: int
) -> None:
    agent, users = random_session(repo, tmp_path, seed)
    engine = agent.engine
    list_points(engine)  # the list first, as in /rewind: its neighbouring diffs are memoised
    checked_walks.forget()
    for round_ in ("first", "kept"):
        for user in users:
            shown = preview(engine, user)
            target = engine.resolve_point(user)
            assert target is not None and shown.refused is None, (round_, user)
            planned = plan_restore(engine.repo, target, engine.settings.snapshot)
            assert (shown.counts.added, shown.counts.modified, shown.counts.deleted) == (
                planned.added,
                planned.modified,
                planned.deleted,
            ), (round_, user)
            assert shown.warnings == list(planned.warnings)
            assert shown.current_tree == planned.current_tree
            lines = numstat(repo, planned.current_tree, planned.target_tree)
            kinds = {**dict.fromkeys(planned.added, "A"), **dict.fromkeys(planned.modified, "M")}
            kinds.update(dict.fromkeys(planned.deleted, "D"))
            assert [f.path for f in shown.files] == [
                *planned.added,
                *planned.modified,
                *planned.deleted,
            ]
            for f in shown.files:
                assert f.change == kinds[f.path]
                assert (f.additions, f.deletions, f.binary) == lines.get(f.path, (0, 0, False))


def test_a_prompts_preview_after_the_list_walks_no_tree_again(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, users = random_session(repo, tmp_path, 4)
    list_points(agent.engine)
    checked_walks.forget()
    walks: list[bool] = []
    real = plan_module.tree_changes

    def counted(*args: object, **kwargs: object) -> object:
        walks.append(bool(kwargs.get("validate")))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(plan_module, "tree_changes", counted)
    shown = preview(agent.engine, users[0])
    assert shown.counts.added or shown.counts.modified or shown.counts.deleted
    assert walks == []  # composed from the list's diffs, the target's levels checked
    # A restore's plan always walks the trees itself.
    target = agent.engine.resolve_point(users[0])
    assert target is not None
    plan_restore(agent.engine.repo, target, agent.engine.settings.snapshot)
    assert walks == [True]


def test_a_restore_after_a_preview_still_reads_the_snapshots_trees(
    repo: Path, tmp_path: Path
) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    engine = agent.engine

    def make(root: Path) -> None:
        (root / "only-then").mkdir()
        (root / "only-then" / "a.txt").write_text("a\n")

    first, _ = agent.prompt("make a directory", make)
    second, _ = agent.prompt("more", lambda root: (root / "README.md").write_text("changed\n"))

    def drop(root: Path) -> None:
        (root / "only-then" / "a.txt").unlink()
        (root / "only-then").rmdir()

    agent.prompt("remove it", drop)
    list_points(engine)
    shown = preview(engine, second)  # kept: the walk from now to that point
    assert shown.refused is None and "only-then/a.txt" in shown.counts.added
    again = preview(engine, second)
    assert again.counts.added == shown.counts.added
    # The point's subtree (held by no other tree of the work tree now) goes missing.
    target = engine.resolve_point(second)
    assert target is not None
    tree = engine.repo.tree_of(target)
    assert tree is not None
    found = engine.repo.pygit2[tree]
    assert isinstance(found, pygit2.Tree)
    subtree = str(found["only-then"].id)
    loose = repo / ".git" / "objects" / subtree[:2] / subtree[2:]
    assert loose.exists()
    loose.chmod(0o644)
    loose.unlink()
    before = (repo / "README.md").read_text()
    # A new process (libgit2 keeps objects it has read in memory, so the same handle would not
    # notice): the previews' kept walk is in this process, under this repository's path.
    fresh = agent.resume().engine
    with pytest.raises(LedgerError, match="incomplete"):
        plan_restore(fresh.repo, target, fresh.settings.snapshot)
    with pytest.raises(LedgerError, match="incomplete"):
        restore(fresh, second, mode="files")
    assert (repo / "README.md").read_text() == before
    assert not (repo / "only-then").exists()
