"""``/rewind``'s list walks back through the points one neighbouring diff at a time
(ledger/engine/preview.py ``list_points``): for every point it must say exactly what comparing
the work tree with that point from scratch says (``compare_point``, the oracle), on sessions with the
agent's changes, hand edits between prompts, a restore and its undo, deletes and re-adds."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ledger.engine.changes_since import latest_point
from ledger.engine.operations import restore, undo
from ledger.engine.preview import compare_point, list_points
from ledger.git.capture.scan import capture_tree
from tests.enginekit import Agent


def oracle(agent: Agent, snapshot: str) -> tuple[dict[str, object], list[str]]:
    engine = agent.engine
    captured = capture_tree(engine.repo, engine.settings.snapshot)
    skipped = [s.path for s in captured.skipped]
    counts, own, _ = compare_point(engine, captured.tree, snapshot, skipped, latest_point(engine))
    return counts.to_json(), [c.path for c in own]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_listed_point_equals_a_comparison_from_scratch(
    repo: Path, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    agent = Agent.start(repo, tmp_path / "agent")
    names = [f"d{n % 3}/f{n}.txt" for n in range(12)]

    def act(step: int):
        def change(root: Path) -> None:
            for name in rng.sample(names, 3):
                path = root / name
                if path.exists() and rng.random() < 0.3:
                    path.unlink()
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(f"agent {step} {rng.random()}\n")

        return change

    users = []
    for step in range(8):
        if step % 3 == 2:  # the user's own work between prompts
            hand = repo / rng.choice(names)
            hand.parent.mkdir(parents=True, exist_ok=True)
            hand.write_text(f"by hand {step}\n")
        user, _ = agent.prompt(f"prompt {step}", act(step))
        users.append(user)
        if step == 5:
            restore(agent.engine, users[2], mode="files")
            undo(agent.engine)
    (repo / "d0" / "mine.txt").parent.mkdir(exist_ok=True)
    (repo / "d0" / "mine.txt").write_text("now, by hand\n")
    listed = list_points(agent.engine)
    assert [p.entry for p in listed.points] == list(reversed(users))
    for point in listed.points:
        assert point.snapshot is not None
        counts, own = oracle(agent, point.snapshot)
        assert point.counts.to_json() == counts, point.entry  # numbers, words, first names
        assert [c.path for c in point.own] == own, point.entry
