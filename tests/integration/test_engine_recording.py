"""Turn recording, compaction, checkpoints and headless /tree, as behaviours of the engine."""

from __future__ import annotations

from pathlib import Path

from ledger.ledgerview import LedgerView
from ledger.records import FORK_PENDING, OP, TURN
from tests.enginekit import Agent, fresh_index_tree, tree_of_commit
from tests.gitkit import git, source_repo


def write(name: str, text: str):
    return lambda repo: (
        (repo / name).parent.mkdir(parents=True, exist_ok=True) or (repo / name).write_text(text)
    )


def test_first_mutating_turn_records_one_turn_and_a_reachable_store(
    repo: Path, tmp_path: Path
) -> None:
    """Reference case 4."""
    agent = Agent.start(repo, tmp_path / "agent")
    user_id, (assistant_id,) = agent.prompt(
        "Please create the file", write("tests/rewind-smoke/a.txt", "a\n")
    )
    (turn,) = agent.records(TURN)
    assert len(turn["snapshots"]) == 2
    assert turn["bindings"] == [[user_id, 0], [assistant_id, 1]]
    for sha in turn["snapshots"]:
        git(repo, "merge-base", "--is-ancestor", sha, "refs/pi-rewind/store")


def test_each_prompt_binds_its_own_user_entry(repo: Path, tmp_path: Path) -> None:
    """D1: the second prompt's pre-prompt snapshot belongs to the second user entry."""
    agent = Agent.start(repo, tmp_path / "agent")
    (repo / "notes.txt").write_text("v0\n")
    u1, (a1,) = agent.prompt("P1", write("notes.txt", "v1\n"))
    u2, (a2,) = agent.prompt("P2", write("notes.txt", "v2\n"))
    first, second = agent.records(TURN)
    assert [b[0] for b in first["bindings"]] == [u1, a1]
    assert [b[0] for b in second["bindings"]] == [u2, a2]
    view = LedgerView.of(agent.session())
    assert view.entry_to_commit[u2] == view.entry_to_commit[a1], "P2 starts where P1 ended"
    assert view.entry_to_commit[u1] != view.entry_to_commit[u2]


def test_same_text_prompts_and_resumed_sessions_bind_the_new_entry(
    repo: Path, tmp_path: Path
) -> None:
    """D1: the reference bound the latest user entry with the same text, or the previous one."""
    agent = Agent.start(repo, tmp_path / "agent")
    u1, _ = agent.prompt("again", write("f.txt", "1"))
    resumed = agent.resume()
    u2, _ = resumed.prompt("again", write("f.txt", "2"))
    view = LedgerView.of(resumed.session())
    assert u1 != u2
    assert view.entry_to_commit[u2] != view.entry_to_commit[u1]
    assert [r["bindings"][0][0] for r in resumed.records(TURN)] == [u1, u2]


def test_a_multi_turn_prompt_binds_every_assistant_turn(repo: Path, tmp_path: Path) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    user_id, assistants = agent.prompt("three turns", write("a", "1"), write("a", "2"), None)
    (turn,) = agent.records(TURN)
    assert [b[0] for b in turn["bindings"]] == [user_id, *assistants]
    assert len(turn["snapshots"]) == 3, "the unchanged last turn reuses the previous snapshot"


def test_a_prompt_without_snapshots_records_nothing_and_snapshots_are_deduplicated(
    repo: Path, tmp_path: Path
) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    agent.prompt("no change")
    agent.prompt("still no change")
    first, second = agent.records(TURN)
    assert first["snapshots"] == second["snapshots"] and len(first["snapshots"]) == 1
    store = git(repo, "log", "--format=%s", "refs/pi-rewind/store").split("\n")
    assert store.count("pi rewind snapshot") == 1


def test_compaction_reuses_current_only_when_files_still_match(repo: Path, tmp_path: Path) -> None:
    """D11: a compaction after an unrecorded edit gets a new snapshot, not the stale current."""
    agent = Agent.start(repo, tmp_path / "agent")
    _, (a1,) = agent.prompt("P1", write("f.txt", "1"))
    current = LedgerView.of(agent.session()).entry_to_commit[a1]
    agent.engine.compact("c0000001")
    assert agent.records(OP)[-1]["snapshots"] == [current]
    (repo / "f.txt").write_text("edited by hand")
    agent.engine.compact("c0000002")
    fresh = agent.records(OP)[-1]["snapshots"][0]
    assert fresh != current
    assert tree_of_commit(repo, fresh) == fresh_index_tree(repo)


def test_checkpoint_entry_binds_a_custom_message(repo: Path, tmp_path: Path) -> None:
    """Reference case 10 (binding half): restorable, not yet bound, allow-listed source."""
    agent = Agent.start(repo, tmp_path / "agent")
    marker = agent.writer.append_entry(
        {
            "type": "custom_message",
            "customType": "pi-custom-compaction.virtual-summary-marker",
            "content": "marker",
            "display": True,
        }
    )["id"]
    (repo / "notes.txt").write_text("target state\n")
    agent.engine.checkpoint_entry(marker, source="other-extension")
    assert agent.records(OP) == []
    agent.engine.checkpoint_entry(marker, source="pi-custom-compaction")
    (op,) = agent.records(OP)
    assert op["bindings"] == [[marker, 0]]
    assert tree_of_commit(repo, op["snapshots"][0]) == fresh_index_tree(repo)
    agent.engine.checkpoint_entry(marker, source="pi-custom-compaction")
    assert len(agent.records(OP)) == 1, "an entry already bound is left alone"


def test_headless_tree_navigation_keeps_files_and_records_it(repo: Path, tmp_path: Path) -> None:
    """D12 and reference cases 11/12: no menu, one op at the new leaf with the summary bound."""
    agent = Agent.start(repo, tmp_path / "agent")
    u1, (a1,) = agent.prompt("P1", write("f.txt", "1"))
    (repo / "f.txt").write_text("kept")
    result = agent.engine.before_tree(u1, choose=None, has_ui=False)
    assert not result.cancel and result.notices == []
    summary = agent.writer.append_entry(
        {"type": "branch_summary", "fromId": "x", "summary": "s"}, parent_id=None
    )["id"]
    agent.engine.record_navigation(summary, summary_entry_id=summary)
    (op,) = agent.records(OP)
    assert list(op) == ["v", "snapshots", "current", "bindings"]
    assert op["bindings"] == [[summary, 0]]
    assert tree_of_commit(repo, op["snapshots"][0]) == fresh_index_tree(repo)
    session = agent.session()
    assert session.entries[-1].parent_id == summary


def test_boomerang_collapse_keeps_files_without_a_menu(repo: Path, tmp_path: Path) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    u1, _ = agent.prompt("P1", write("f.txt", "1"))
    agent.engine.boomerang_collapse = True
    asked: list[object] = []
    agent.engine.before_tree(u1, choose=lambda title, options: asked.append(options), has_ui=True)
    agent.engine.record_navigation(u1)
    assert asked == [] and len(agent.records(OP)) == 1


def test_after_resume_the_exact_commit_is_reused_only_while_files_are_unchanged(
    repo: Path, tmp_path: Path
) -> None:
    """Reference case 23."""
    (repo / "notes.txt").write_text("aaaa")
    agent = Agent.start(repo, tmp_path / "agent")
    _, (a1,) = agent.prompt("P1", write("notes.txt", "bbbb"))
    turn_commit = LedgerView.of(agent.session()).entry_to_commit[a1]
    count = (
        git(repo, "log", "--format=%s", "refs/pi-rewind/store")
        .split("\n")
        .count("pi rewind snapshot")
    )
    resumed = agent.resume()
    resumed.engine.before_fork(
        a1, choose=lambda title, options: "Conversation only (keep current files)"
    )
    assert resumed.records(FORK_PENDING)[-1]["current"] == turn_commit
    assert (
        git(repo, "log", "--format=%s", "refs/pi-rewind/store")
        .split("\n")
        .count("pi rewind snapshot")
        == count
    )
    (repo / "notes.txt").write_text("cccc")
    resumed.engine.before_fork(
        a1, choose=lambda title, options: "Conversation only (keep current files)"
    )
    new = resumed.records(FORK_PENDING)[-1]["current"]
    assert new != turn_commit and tree_of_commit(repo, new) == fresh_index_tree(repo)


def test_headless_fork_writes_a_pending_record_with_the_current_files(
    repo: Path, tmp_path: Path
) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    u1, _ = agent.prompt("P1", write("f.txt", "1"))
    result = agent.engine.before_fork(u1, has_ui=False)
    assert not result.cancel
    (pending,) = agent.records(FORK_PENDING)
    assert list(pending) == ["v", "current"]
    assert tree_of_commit(repo, pending["current"]) == fresh_index_tree(repo)


def test_the_fork_import_takes_only_the_pending_record_written_for_it(
    repo: Path, tmp_path: Path
) -> None:
    """D13: a stale pending record (the parent went on after it) is not imported by a later fork."""
    agent = Agent.start(repo, tmp_path / "agent")
    u1, _ = agent.prompt("P1", write("f.txt", "1"))
    agent.engine.before_fork(u1, has_ui=False)  # a fork that never happened
    agent.prompt("P2", write("f.txt", "2"))
    stale_child = Agent.start(repo, tmp_path / "agent", parent=agent.session_file)
    stale_child.engine.session_start("fork", str(agent.session_file))
    assert stale_child.records(OP) == []
    agent.engine.before_fork(u1, has_ui=False)
    child = Agent.start(repo, tmp_path / "agent", parent=agent.session_file)
    child.engine.session_start("fork", str(agent.session_file))
    (op,) = child.records(OP)
    assert op == {"v": 2, "snapshots": [agent.records(FORK_PENDING)[-1]["current"]], "current": 0}
    child.engine.session_start("fork", str(agent.session_file))
    assert len(child.records(OP)) == 1, "a reload does not import twice"


def test_a_dirty_submodule_warns_at_turn_start(repo: Path, tmp_path: Path) -> None:
    """Reference cases 17/18: capture fails with the submodule named; the prompt goes on."""
    source = source_repo(tmp_path)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source), "nested")
    git(repo, "commit", "-qm", "add submodule")
    (repo / "nested" / "file.txt").write_text("dirty\n")
    agent = Agent.start(repo, tmp_path / "agent")
    result = agent.engine.turn_start(0)
    assert any("dirty submodule: nested" in n.text for n in result.notices)
    (repo / ".gitmodules").unlink()
    result = agent.engine.turn_start(0)
    assert any("dirty submodule: nested" in n.text for n in result.notices)
