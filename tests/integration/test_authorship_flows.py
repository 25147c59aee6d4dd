"""Flows the authorship index once answered wrongly, found by the engine-level property test
(tests/property/test_authorship_engine_property.py) and minimised here (issue 33,
docs/authorship.md).

Each test drives real engines on a real git repository and compares what a restore plan names
(``operations.restore`` dry runs: the plan the CLI and the menus show) with the index written as
the work happened and with the index rebuilt from the ledgers (the file deleted: the next plan
rebuilds it), which must answer alike.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ledger.authorship.store import AuthorshipStore
from ledger.engine import operations
from ledger.engine.attribution import Attribution
from ledger.engine.operations import restore, undo
from ledger.git.private import private_dir
from tests.enginekit import Agent


def _writes(files: dict[str, str | None]) -> Callable[[Path], None]:
    """Write each file (``None``: delete it)."""

    def act(root: Path) -> None:
        for name, text in files.items():
            path = root / name
            if text is None:
                path.unlink(missing_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    return act


def _named(report: operations.RestoreReport) -> tuple[list[str], dict[str, list[str]]]:
    own = sorted(c.path for c in report.outside)
    return own, {g.neighbour.session_id: list(g.paths) for g in report.others}


def _forget_index(agent: Agent) -> None:
    """Delete the index file: the next plan rebuilds it from every session's ledger."""
    AuthorshipStore(private_dir(agent.engine.repo.git_dir)).path.unlink(missing_ok=True)


def _fresh(agent: Agent) -> Agent:
    """The same session in a new process (no index in memory)."""
    return Agent(agent.repo, agent.agent_dir, agent.session_file)


def test_a_restore_done_again_from_the_same_state_is_rebuilt_as_the_rewind_it_was(
    repo: Path, tmp_path: Path
) -> None:
    """Restore, undo, the same restore again: the second restore's op repeats the first one's
    ``{current, undo}`` pair (both snapshots reused). A rebuild used to skip it as if it were a
    fork's import of a hand-off, so the next capture found its deletion and called it the user's:
    recreating the file then warned about "your own work"."""
    a = Agent.start(repo, tmp_path / "agent")
    b = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("make b", _writes({"b.txt": "by A\n"}))
    second, _ = a.prompt("look", None)
    restore(a.engine, first, "files")
    undo(a.engine)
    again = restore(a.engine, first, "files")
    ops = [r for r in a.records("rewind-op") if r.get("undo") is not None]
    assert len(ops) == 3 and ops[0]["snapshots"] == ops[2]["snapshots"], "the same pair again"
    assert again.changed and not (repo / "b.txt").exists()
    b.prompt("b looks", None)  # a capture after the restore

    plan = restore(_fresh(a).engine, second, "files", dry_run=True)
    assert plan.added == ["b.txt"]
    assert _named(plan) == ([], {}), "the restore deleted b.txt: not the user's"

    _forget_index(a)
    rebuilt = restore(_fresh(a).engine, second, "files", dry_run=True)
    assert _named(rebuilt) == ([], {}), "the rebuilt index says the same"


def test_a_restore_that_changes_nothing_leaves_the_users_own_changes_theirs(
    repo: Path, tmp_path: Path
) -> None:
    """The user deleted by hand the file the agent made, so the files already are the point's:
    the restore changes nothing (no undo snapshot). It used to record a rewind from the
    session's previous point, crediting the user's deletion to the restore, and a later restore
    that recreates the file did not name it; the ledger's op (``current`` without ``undo``)
    rebuilds as a capture, which names it."""
    a = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("make b", _writes({"b.txt": "by A\n"}))
    second, _ = a.prompt("look", None)
    (repo / "b.txt").unlink()  # by hand
    nothing = restore(a.engine, first, "files")
    assert not nothing.changed and nothing.undo is None

    plan = restore(a.engine, second, "files", dry_run=True)
    assert plan.added == ["b.txt"]
    assert _named(plan) == (["b.txt"], {}), "the user deleted it: recreating it undoes their work"

    _forget_index(a)
    rebuilt = restore(_fresh(a).engine, second, "files", dry_run=True)
    assert _named(rebuilt) == (["b.txt"], {}), "the rebuilt index says the same"


def test_a_rebuild_by_another_session_credits_a_forks_copied_turns_to_its_parent(
    repo: Path, tmp_path: Path
) -> None:
    """A fork's file copies its parent's records with their ids. A rebuild started by a third
    session read the session files newest first, so the fork's copies came before the parent's
    records and the parent's own turns were credited to the fork: the parent's next plan named
    its own agent's files as "written by" its fork."""
    a = Agent.start(repo, tmp_path / "agent")
    b = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("make a", _writes({"a.txt": "by A\n"}))
    second, _ = a.prompt("look", None)
    forked = operations.fork(a.engine, second, "conversation")
    assert forked.child.is_file()
    b.prompt("b works", _writes({"b.txt": "by B\n"}))

    plan = restore(_fresh(a).engine, first, "files", dry_run=True)
    theirs = {b.engine.session().id: ["b.txt"]}
    assert _named(plan) == ([], theirs)

    _forget_index(a)
    Attribution.of(_fresh(b).engine)  # B's next plan rebuilds the index from every ledger
    rebuilt = restore(_fresh(a).engine, first, "files", dry_run=True)
    assert _named(rebuilt) == ([], theirs), "A's own agent wrote a.txt, not its fork"
