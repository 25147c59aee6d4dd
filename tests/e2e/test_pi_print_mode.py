"""The real Pi CLI in print mode (``pi -p``, no UI) with our extension: recording, our CLI on
Pi's files afterwards, resume and fork lineage, and the startup retention sweep."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.ledgerview import LedgerView
from ledger.records import OP, TURN
from ledger.session.store import read_session
from tests.cli.helpers import run_process
from tests.conftest import git
from tests.e2e.pikit import PiRunner, bash, edit, turns, write


def user_entries(path: Path) -> list[str]:
    return [e.id for e in read_session(path).entries if e.type == "message" and e.role == "user"]


def files_at(repo: Path, commit: str) -> dict[str, str]:
    names = git(repo, "ls-tree", "-r", "--name-only", commit).split()
    return {name: git(repo, "show", f"{commit}:{name}") for name in names}


def work_tree(repo: Path) -> dict[str, str]:
    return {str(p.relative_to(repo)): p.read_text() for p in sorted(repo.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(repo).parts}


def rewind(pi: PiRunner, *args: str | Path):  # noqa: ANN201
    return run_process("--agent-dir", pi.agent_dir, *args, cwd=pi.repo)


BEFORE_ANY = {".gitignore": "build/\n", "README.md": "# e2e\n"}


def three_prompts(pi: PiRunner) -> list[dict[str, str]]:
    """Three prompts whose tools write, edit, delete and rename files (bash included); returns the
    work tree before each prompt."""
    states = [work_tree(pi.repo)]
    pi.run("start " + turns([write("a.txt", "one\n"), write("src/b.py", "print(1)\n")],
                            [bash("echo data > c.txt")]))
    states.append(work_tree(pi.repo))
    pi.run("change " + turns([edit("a.txt", "one", "two")], [bash("rm c.txt && mkdir -p build && echo x > build/out")]), "-c")
    states.append(work_tree(pi.repo))
    pi.run("rename " + turns([bash("mv src/b.py src/renamed.py")], [write("d.txt", "four\n")]), "-c")
    states.append(work_tree(pi.repo))
    return states


def test_each_prompt_records_one_turn_bound_to_its_own_user_entry(pi: PiRunner) -> None:
    states = three_prompts(pi)
    (path,) = pi.sessions()
    session = read_session(path)
    turn_records = [e for e in session.entries if e.custom_type == TURN]
    assert len(turn_records) == 3, "one rewind-turn per prompt"
    view = LedgerView.of(session)
    users = user_entries(path)
    assert len(users) == 3
    for user, before in zip(users, states[:3], strict=True):
        # D1: the user entry's point is the work tree before **its** prompt (ignored build/ aside).
        expected = {k: v for k, v in before.items() if not k.startswith("build/")}
        assert files_at(pi.repo, view.entry_to_commit[user]) == expected
    assistants = [e.id for e in session.entries if e.type == "message" and e.role == "assistant"]
    assert set(assistants) <= set(view.entry_to_commit), "every assistant turn has a post-turn point"
    assert files_at(pi.repo, view.entry_to_commit[assistants[-1]]) == {
        k: v for k, v in states[3].items() if not k.startswith("build/")}


def test_our_cli_restores_an_earlier_prompt_after_pi_exits_and_pi_continues(pi: PiRunner) -> None:
    states = three_prompts(pi)
    (path,) = pi.sessions()
    second_user = user_entries(path)[1]
    index_before = (pi.repo / ".git" / "index").read_bytes()
    result = rewind(pi, "restore", path, second_user, "--mode", "files", "--yes")
    assert result.code == 0, result.err
    expected = {**states[1], "build/out": "x\n"}  # the ignored directory is left alone
    assert work_tree(pi.repo) == expected
    assert (pi.repo / ".git" / "index").read_bytes() == index_before
    # Real Pi resumes the file our CLI appended to, and chains off our record.
    ours = read_session(path).leaf_id
    pi.run("[no-tools] still there?", "--session", str(path))
    after = read_session(path)
    first_new = next(e for e in after.entries if e.type == "message" and e.role == "user" and e.id not in user_entries(path)[:3])
    assert after.by_id[first_new.id].parent_id in {ours, *[e.id for e in after.entries if e.type == "thinking_level_change"]}
    undo = rewind(pi, "undo", path, "--yes")
    assert undo.code == 0, undo.err
    assert work_tree(pi.repo) == states[3]


def test_a_resumed_and_a_forked_session_resolve_earlier_points(pi: PiRunner) -> None:
    states = three_prompts(pi)
    (parent,) = pi.sessions()
    first_user = user_entries(parent)[0]
    pi.run("[no-tools] resumed", "-c")
    assert pi.sessions() == [parent], "pi -c continues the same file"
    assert len([e for e in read_session(parent).entries if e.custom_type == TURN]) == 4
    pi.run("[no-tools] forked", "--fork", str(parent))
    child = next(p for p in pi.sessions() if p != parent)
    assert read_session(child).parent_session is not None
    tree = {row["id"]: row for row in rewind(pi, "tree", child, "--json").json_lines()}
    assert tree[first_user]["point"], "the fork resolves the parent's point through lineage"
    result = rewind(pi, "restore", child, first_user, "--mode", "files", "--yes")
    assert result.code == 0, result.err
    assert work_tree(pi.repo) == {**states[0], "build/out": "x\n"}


def test_a_startup_sweep_runs_with_retention_settings_in_the_agent_dir(pi: PiRunner) -> None:
    three_prompts(pi)
    (path,) = pi.sessions()
    old_tree = git(pi.repo, "write-tree").strip()
    env_date = {"GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z", "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z"}
    orphan = git(pi.repo, "commit-tree", old_tree, "-m", "pi rewind snapshot", env=env_date).strip()
    git(pi.repo, "update-ref", "refs/pi-rewind/store", orphan)  # a stale store: an old orphan only
    (pi.agent_dir / "settings.json").write_text(json.dumps({"rewind": {"retention": {"maxSnapshots": 2}}}))
    pi.run("[no-tools] after settings", "-c")
    kept = git(pi.repo, "log", "--format=%P", "refs/pi-rewind/store").split()
    view = LedgerView.of(read_session(path))
    assert orphan not in kept, "the old unreferenced snapshot was swept"
    assert view.latest_current is None or view.latest_current in kept
    last_turn = [e for e in read_session(path).entries if e.custom_type in (TURN, OP)][-1]
    assert any(sha in kept for sha in last_turn.raw["data"]["snapshots"]), "the newest points are kept"


def test_a_bridge_that_dies_or_hangs_never_blocks_pi(pi: PiRunner) -> None:
    for command, timeout_ms in ((["false"], "120000"), (["sleep", "600"], "1500")):
        result = pi.run("work " + turns([write("w.txt", f"{command[0]}\n")]),
                        env={"REWIND_BRIDGE_CMD": json.dumps(command), "REWIND_BRIDGE_TIMEOUT_MS": timeout_ms},
                        timeout=120)
        assert result.stdout.strip() == "Done: 1 turns"
        assert (pi.repo / "w.txt").read_text() == f"{command[0]}\n", "the agent carried on"
        assert result.stderr.count("Rewind: bridge unavailable") == 1, "one warning, not one per event"
    assert all(TURN not in p.read_text() for p in pi.sessions())
