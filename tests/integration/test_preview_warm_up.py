"""A fresh bridge prepares the session's first ``/rewind`` preview before it is asked for
(ledger/bridge/warm_up.py ``ahead_of_previews``, issue 34: any preview ≤ 200 ms, the first
one of a fresh bridge included): the tree levels a preview's check reads are read and judged
ahead (:func:`ledger.git.restore.checked_walks.prefill`), so the first preview of any point
reads from the object database only the levels above what changed since the newest point;
and what it shows is still the restore's own plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.bridge.warm_up import ahead_of_previews
from ledger.engine.ownership import neighbour_pairs
from ledger.engine.preview import list_points, preview
from ledger.git.restore import checked_walks
from ledger.git.restore.run import plan_restore
from tests.enginekit import Agent


def _deep_session(repo: Path, tmp_path: Path) -> tuple[Agent, list[str]]:
    """Prompts that each change files three directories deep; the last one only README.md
    (so the work tree now differs from the newest point at its root level only)."""
    agent = Agent.start(repo, tmp_path / "agent")

    def make(root: Path) -> None:
        for d in range(4):
            for e in range(3):
                for f in range(2):
                    path = root / f"d{d}" / f"e{e}" / f"f{f}" / "file.txt"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text("made\n")

    users = [agent.prompt("make the directories", make)[0]]
    for step in range(6):

        def change(root: Path, step: int = step) -> None:
            for n in range(3):
                path = root / f"d{(step + n) % 4}" / f"e{n}" / f"f{step % 2}" / "file.txt"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"prompt {step}, file {n}\n")

        user, _ = agent.prompt(f"prompt {step}", change)
        users.append(user)
    user, _ = agent.prompt("last", lambda root: (root / "README.md").write_text("last\n"))
    users.append(user)
    return agent, users


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every tree level the preview's check reads from the object database."""
    read: list[str] = []
    real = checked_walks._tree_data

    def counted(repo: object, oid: str) -> bytes | None:
        read.append(oid)
        return real(repo, oid)  # type: ignore[arg-type]

    monkeypatch.setattr(checked_walks, "_tree_data", counted)
    return read


def test_after_the_warm_up_the_first_preview_reads_no_points_level_again(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, users = _deep_session(repo, tmp_path)
    engine = agent.resume().engine  # a fresh bridge's engine
    session = engine.session()
    pairs = neighbour_pairs(engine, session, session.leaf_id, limit=200)
    assert len(pairs) == len(users) - 1
    checked_walks.forget()
    read = _reads(monkeypatch)

    # Without the warm-up, each point's first preview reads its levels.
    list_points(engine)
    for user in users[:-1]:
        assert preview(engine, user).refused is None
    assert len(set(read)) > 10
    checked_walks.forget()
    read.clear()

    ahead_of_previews(engine, pairs)  # what the bridge does after session_start
    assert read  # the levels were read here, ahead
    read.clear()
    list_points(engine)
    for user in users[:-1]:
        shown = preview(engine, user)
        target = engine.resolve_point(user)
        assert target is not None and shown.refused is None
        planned = plan_restore(engine.repo, target, engine.settings.snapshot)
        assert (shown.counts.added, shown.counts.modified, shown.counts.deleted) == (
            planned.added,
            planned.modified,
            planned.deleted,
        )
    # Only the work tree's root now (README.md changed since the newest point) was read.
    assert len(set(read)) <= 1, read
    checked_walks.forget()
