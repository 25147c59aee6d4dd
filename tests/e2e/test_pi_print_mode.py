"""The real Pi CLI in print mode (``pi -p``, no UI) with our extension: recording, our CLI on
Pi's files afterwards, resume and fork lineage, and the startup retention sweep."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ledger.ledgerview import LedgerView
from ledger.records import OP, TURN
from ledger.session.store import read_session
from tests.cli.helpers import run_process
from tests.e2e.pikit import PiRunner, bash, edit, store_snapshots, turns, write
from tests.gitkit import git


def user_entries(path: Path) -> list[str]:
    return [e.id for e in read_session(path).entries if e.type == "message" and e.role == "user"]


def files_at(repo: Path, commit: str) -> dict[str, bytes]:
    names = git(repo, "ls-tree", "-r", "--name-only", commit).split()
    return {
        name: subprocess.run(
            ["git", "show", f"{commit}:{name}"], cwd=repo, capture_output=True, check=True
        ).stdout
        for name in names
    }


def work_tree(repo: Path) -> dict[str, bytes]:
    """Every file's exact bytes (ignored ones included)."""
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def rewind(pi: PiRunner, *args: str | Path):
    return run_process("--agent-dir", pi.agent_dir, *args, cwd=pi.repo)


BEFORE_ANY = {".gitignore": b"build/\n", "README.md": b"# e2e\n"}
BINARY = b"crlf\r\nline\n\000\377end"
# The files after each tool turn of three_prompts (assistant messages in order: the final
# answer of a prompt makes no tool call and keeps the files of the turn before it).
T1 = {**BEFORE_ANY, "a.txt": b"one\n", "src/b.py": b"print(1)\n"}
T2 = {**T1, "c.txt": b"data\n", "bin.dat": BINARY}
T3 = {**T2, "a.txt": b"two\n"}
T4 = {k: v for k, v in T3.items() if k != "c.txt"}  # + build/out, ignored
T5 = {**{k: v for k, v in T4.items() if k != "src/b.py"}, "src/renamed.py": b"print(1)\n"}
T6 = {**T5, "d.txt": b"four\n"}
AFTER_EACH_ASSISTANT = [T1, T2, T2, T3, T4, T4, T5, T6, T6]


def three_prompts(pi: PiRunner) -> list[dict[str, bytes]]:
    """Three prompts whose tools write, edit, delete and rename files (bash included, a binary
    file with CRLF and non-UTF-8 bytes); returns the work tree before each prompt and at the end."""
    states = [work_tree(pi.repo)]
    pi.run(
        "start "
        + turns(
            [write("a.txt", "one\n"), write("src/b.py", "print(1)\n")],
            [bash("echo data > c.txt && printf 'crlf\\r\\nline\\n\\000\\377end' > bin.dat")],
        )
    )
    states.append(work_tree(pi.repo))
    pi.run(
        "change "
        + turns(
            [edit("a.txt", "one", "two")],
            [bash("rm c.txt && mkdir -p build && echo x > build/out")],
        ),
        "-c",
    )
    states.append(work_tree(pi.repo))
    pi.run(
        "rename " + turns([bash("mv src/b.py src/renamed.py")], [write("d.txt", "four\n")]), "-c"
    )
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
        assert user in view.entry_to_commit, (
            f"the prompt {user} has no point; records {[r.raw['data'] for r in turn_records]};"
            f" Pi's standard error, run by run: {pi.stderrs}"
        )
        assert files_at(pi.repo, view.entry_to_commit[user]) == expected
    assistants = [e.id for e in session.entries if e.type == "message" and e.role == "assistant"]
    # Each assistant message is bound to the files after its own turn (its tools' changes).
    assert [files_at(pi.repo, view.entry_to_commit[a]) for a in assistants] == AFTER_EACH_ASSISTANT
    assert files_at(pi.repo, view.entry_to_commit[assistants[-1]]) == {
        k: v for k, v in states[3].items() if not k.startswith("build/")
    }
    # The bindings of each record: its prompt's user entry first, then its assistant messages.
    for record, user, prompt_assistants in zip(
        turn_records, users, (assistants[0:3], assistants[3:6], assistants[6:9]), strict=True
    ):
        assert [b[0] for b in record.raw["data"]["bindings"]] == [user, *prompt_assistants]


def test_our_cli_restores_an_earlier_prompt_after_pi_exits_and_pi_continues(pi: PiRunner) -> None:
    states = three_prompts(pi)
    (path,) = pi.sessions()
    second_user = user_entries(path)[1]
    index_before = (pi.repo / ".git" / "index").read_bytes()
    result = rewind(pi, "restore", path, second_user, "--mode", "files", "--yes")
    assert result.code == 0, result.err
    expected = {**states[1], "build/out": b"x\n"}  # the ignored directory is left alone
    assert work_tree(pi.repo) == expected
    assert (pi.repo / ".git" / "index").read_bytes() == index_before
    # Real Pi resumes the file our CLI appended to, and chains off our record.
    ours = read_session(path).leaf_id
    pi.run("[no-tools] still there?", "--session", str(path))
    after = read_session(path)
    first_new = next(
        e
        for e in after.entries
        if e.type == "message" and e.role == "user" and e.id not in user_entries(path)[:3]
    )
    # Pi appends a thinking_level_change before the prompt only when the resumed branch has none;
    # this branch has Pi's own from the first prompt (at its root), so the prompt hangs under the
    # leaf Pi found on open: our rewind-op.
    assert ours is not None and after.by_id[ours].custom_type == OP
    assert after.by_id[first_new.id].parent_id == ours
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
    assert work_tree(pi.repo) == {**states[0], "build/out": b"x\n"}


def test_a_print_mode_run_sweeps_at_its_end_with_retention_settings_in_the_agent_dir(
    pi: PiRunner,
) -> None:
    """A pi -p run starts no startup sweep (docs/design.md#when-sweeps-run); its one sweep, at
    its end, saw the run's own prompt. With no watcher to hand it to (``REWIND_AUTO_WATCH=0``
    in tests) the shutdown answer runs it, so it is done when Pi is."""
    three_prompts(pi)
    (path,) = pi.sessions()
    turn_records = [e.raw["data"] for e in read_session(path).entries if e.custom_type == TURN]
    referenced = {sha for data in turn_records for sha in data["snapshots"]}
    assert set(store_snapshots(pi.repo)) == referenced and len(referenced) > 3, (
        "no sweep without settings"
    )
    # An unreferenced snapshot kept alive by the store (as an orphaned undo point would be).
    old_date = {
        "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
        "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
    }
    stray = git(
        pi.repo,
        "commit-tree",
        git(pi.repo, "write-tree").strip(),
        "-m",
        "pi rewind snapshot",
        env=old_date,
    ).strip()  # old: past the grace the sweep gives unrecorded new snapshots
    empty = git(pi.repo, "hash-object", "-t", "tree", "-w", "/dev/null").strip()
    old = git(pi.repo, "rev-parse", "refs/pi-rewind/store").strip()
    keepalive = git(
        pi.repo, "commit-tree", empty, "-p", old, "-p", stray, "-m", "pi rewind store"
    ).strip()
    git(pi.repo, "update-ref", "refs/pi-rewind/store", keepalive, old)
    (pi.agent_dir / "settings.json").write_text(
        json.dumps({"rewind": {"retention": {"maxSnapshots": 2}}})
    )

    pi.run("[no-tools] after settings", "-c")

    # docs/design.md#retention-plan: no rewind-op, so nothing is pinned; candidates newest first (by their record's
    # timestamp), the first 2 kept: from the last two prompts, nothing older, no stray.
    after = [e.raw["data"] for e in read_session(path).entries if e.custom_type == TURN]
    assert after[:3] == turn_records and len(after) == 4, "session files are never rewritten"
    survivors = set(store_snapshots(pi.repo))
    assert stray not in survivors, "the unreferenced snapshot was swept"
    assert len(survivors) == 2, survivors
    assert set(after[3]["snapshots"]) <= survivors, "the run's own prompt was seen by the sweep"
    assert survivors <= set(after[3]["snapshots"]) | set(turn_records[2]["snapshots"])
    assert not survivors & (
        set(turn_records[0]["snapshots"]) - set(turn_records[2]["snapshots"])
    ), "the oldest went"


def test_a_bridge_that_dies_or_hangs_never_blocks_pi(pi: PiRunner) -> None:
    for command, timeout_ms in ((["false"], "120000"), (["sleep", "600"], "1500")):
        result = pi.run(
            "work " + turns([write("w.txt", f"{command[0]}\n")]),
            env={"REWIND_BRIDGE_CMD": json.dumps(command), "REWIND_BRIDGE_TIMEOUT_MS": timeout_ms},
            timeout=120,
        )
        assert result.stdout.strip() == "Done: 1 turns"
        assert (pi.repo / "w.txt").read_text() == f"{command[0]}\n", "the agent carried on"
        assert result.stderr.count("Rewind: bridge unavailable") == 1, (
            "one warning, not one per event"
        )
    assert all(TURN not in p.read_text() for p in pi.sessions())
