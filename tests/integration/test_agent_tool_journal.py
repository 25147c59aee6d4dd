"""The model's ``rewind`` tool settles its own restore's journal once its record is appended
(:func:`ledger.engine.agent_tool.restore`): a model that restores many times leaves no pile of
``done`` journals for every later restore to read under its lock, and the restore stays
undoable from ``/rewind`` (the undo comes from the op record, not the journal)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.bridgekit import FakePi
from tests.gitkit import git
from tests.integration.test_agent_rewind_tool import begin, end, pi, tool_call, turn

__all__ = ["pi"]  # the fixture


def _journals(repo: Path) -> list[str]:
    directory = Path(git(repo, "rev-parse", "--absolute-git-dir").strip()) / "pi-rewind" / "journal"
    return sorted(p.name for p in directory.glob("*.json")) if directory.is_dir() else []


def test_a_tool_restore_leaves_no_journal_and_is_still_undone_from_rewind(pi: FakePi) -> None:
    repo = pi.cwd
    (repo / "notes.md").write_text("the user's\n")
    begin(pi, "try")
    turn(pi, 0, lambda: tool_call(pi, {"action": "checkpoint", "label": "start"}))

    def attempt(n: int) -> Callable[[], int]:
        return lambda: (repo / "app.py").write_text(f"attempt {n}\n")

    for n in range(3):
        turn(pi, 1 + 2 * n, attempt(n))
        done = turn(pi, 2 + 2 * n, lambda: tool_call(pi, {"action": "restore", "point": "start"}))
        assert [f["path"] for f in done["details"]["restored"]] == ["app.py"]
        assert not (repo / "app.py").exists()
        assert _journals(repo) == [], "the recorded restore's journal is settled"
    end(pi)
    assert pi.event("rewind_apply", {"action": "undo"}).error is None
    assert (repo / "app.py").read_text() == "attempt 2\n"
    assert (repo / "notes.md").read_text() == "the user's\n"
