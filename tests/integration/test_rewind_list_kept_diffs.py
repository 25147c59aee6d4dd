"""The ``/rewind`` list's neighbouring diffs are kept on disk (:mod:`ledger.engine.kept_diffs`):
a fresh process lists without diffing the recorded trees again, and the list says exactly what
it says without them, with a damaged file or with a file of another version (issue 34)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

import ledger.engine.kept_diffs as kept_diffs
import ledger.engine.ownership as ownership
from ledger.engine.preview import list_points
from ledger.git.trees import Change
from tests.enginekit import Agent


def _session(repo: Path, agent_dir: Path, prompts: int = 8) -> Agent:
    rng = random.Random(7)
    agent = Agent.start(repo, agent_dir)
    names = [f"d{n % 3}/f{n}.txt" for n in range(12)]

    def act(step: int) -> Callable[[Path], None]:
        def change(root: Path) -> None:
            for name in rng.sample(names, 3):
                path = root / name
                if path.exists() and rng.random() < 0.3:
                    path.unlink()
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(f"agent {step} {rng.random()}\n")

        return change

    for step in range(prompts):
        if step % 3 == 2:
            (repo / "d1").mkdir(exist_ok=True)
            (repo / "d1" / f"hand{step}.txt").write_text("by hand\n")
        agent.prompt(f"prompt {step}", act(step))
    return agent


def _fresh_process(agent: Agent) -> Agent:
    """A new engine with nothing in memory, as a new bridge process has."""
    kept_diffs._stores.clear()
    return agent.resume()


def _listed(agent: Agent) -> list[object]:
    listed = list_points(agent.engine)
    return [p.to_json() for p in listed.points]


def _count_tree_diffs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, str]]:
    """Record the recorded-tree diffs :func:`ownership.recorded_changes` computes (the real
    walk still runs)."""
    seen: list[tuple[str | None, str]] = []
    real = ownership.leaf_changes

    def counting(repo: object, old: str | None, new: str) -> list[Change] | None:
        seen.append((old, new))
        return real(repo, old, new)  # type: ignore[arg-type]

    monkeypatch.setattr(ownership, "leaf_changes", counting)
    return seen


def test_a_fresh_process_lists_without_diffing_the_recorded_trees_again(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _session(repo, tmp_path / "agent")
    first = _listed(agent)
    fresh = _fresh_process(agent)
    seen = _count_tree_diffs(monkeypatch)
    assert _listed(fresh) == first
    assert seen == []  # every neighbouring diff came from the file


@pytest.mark.parametrize("damage", ["none", "missing", "garbage", "flipped", "other-version"])
def test_the_list_is_the_same_whatever_the_kept_file_holds(
    repo: Path, tmp_path: Path, damage: str
) -> None:
    agent = _session(repo, tmp_path / "agent")
    kept_diffs._stores.clear()
    path = agent.engine.repo.git_dir / "pi-rewind" / kept_diffs.FILE_NAME
    path.unlink(missing_ok=True)
    expected = _listed(_fresh_process(agent))  # computed from the trees
    assert path.exists()
    data = path.read_bytes()
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(kept_diffs.HEADER + bytes(random.Random(1).randbytes(5000)))
    elif damage == "flipped":
        flipped = bytearray(data)
        for at in range(len(kept_diffs.HEADER) + 20, len(flipped), 97):
            flipped[at] ^= 0x5A
        path.write_bytes(bytes(flipped))
    elif damage == "other-version":
        path.write_bytes(b"pi-rewind-tree-diffs 9\n" + data[len(kept_diffs.HEADER) :])
    assert _listed(_fresh_process(agent)) == expected
    assert _listed(_fresh_process(agent)) == expected  # and after the file was written again
