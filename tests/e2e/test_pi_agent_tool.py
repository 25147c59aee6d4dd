"""The model's own ``rewind`` tool in the real Pi 0.73.1 (issue 36, docs/pi.md#the-agents-rewind-tool),
called by the scripted model as a real model would: checkpoint, edits, a failing check, ``diff``,
``restore``. Over RPC and in a real terminal (tmux), asserting on what a person sees (the tool's
result in the session, the notices and panel, the screen) and on the files' bytes and modes.

The rule under test: a restore changes only files whose current content this conversation's
agent produced; the user's and another session's files are left alone, byte-exact, and named; it
writes nothing while another session's turn runs; the user undoes it from ``/rewind``; and
``"rewind": {"agentTool": false}`` leaves the tool unregistered.
"""

from __future__ import annotations

import json
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.engine import messages as M
from ledger.records import OP
from ledger.session.store import read_session
from tests.e2e.pikit import RpcPi, TmuxPi, bash, edit, turns, write
from tests.e2e.test_pi_rewind import open_rewind
from tests.e2e.test_pi_rpc_session import StartRpc, turn_count, wait_for
from tests.e2e.test_pi_two_sessions import _live, _rewind

StartTui = Callable[..., TmuxPi]


def rewind(action: str, point: str | None = None, label: str | None = None) -> dict[str, Any]:
    """One call of the model's ``rewind`` tool (as the scripted model issues it)."""
    args: dict[str, Any] = {"action": action}
    if point is not None:
        args["point"] = point
    if label is not None:
        args["label"] = label
    return {"name": "rewind", "args": args}


def work_tree(project: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the work tree but ``.git``: its bytes and its git mode (644 or 755)."""
    found: dict[str, tuple[bytes, int]] = {}
    for path in sorted(project.rglob("*")):
        rel = path.relative_to(project).as_posix()
        if rel == ".git" or rel.startswith(".git/") or not path.is_file():
            continue
        executable = path.stat().st_mode & stat.S_IXUSR
        found[rel] = (path.read_bytes(), 0o100755 if executable else 0o100644)
    return found


def snapshot_files(project: Path, commit: str) -> dict[str, tuple[bytes, int]]:
    """A snapshot's files as git stores them (``ls-tree`` modes, ``cat-file`` bytes)."""
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "-z", commit],
        cwd=project,
        capture_output=True,
        check=True,
    ).stdout
    found: dict[str, tuple[bytes, int]] = {}
    for row in listed.split(b"\0"):
        if not row:
            continue
        meta, name = row.split(b"\t", 1)
        mode, _kind, blob = meta.split()
        data = subprocess.run(
            ["git", "cat-file", "blob", blob.decode()], cwd=project, capture_output=True, check=True
        ).stdout
        found[name.decode()] = (data, int(mode, 8))
    return found


def raw_entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tool_results(path: Path, name: str = "rewind") -> list[dict[str, Any]]:
    """The ``toolResult`` messages of tool ``name`` in the session file, oldest first."""
    return [
        e["message"]
        for e in raw_entries(path)
        if e.get("type") == "message"
        and e["message"].get("role") == "toolResult"
        and e["message"].get("toolName") == name
    ]


def text_of(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result["content"] if c.get("type") == "text")


def ops(path: Path) -> list[dict[str, Any]]:
    return [e.raw["data"] for e in read_session(path).entries if e.custom_type == OP]


def results_after(path: Path, count: int, name: str = "rewind", timeout: float = 30) -> list[dict]:
    """The tool's results once there are ``count`` of them (Pi writes the session as it goes)."""
    deadline = time.monotonic() + timeout
    while len(found := tool_results(path, name)) < count:
        assert time.monotonic() < deadline, found
        time.sleep(0.05)
    return found


class PanelRpc(RpcPi):
    """:class:`RpcPi` that also keeps the panel (``setWidget``) rewind last showed."""

    panel: list[str] | None = None

    def _ui(self, request: dict[str, Any]) -> None:
        if request.get("method") == "setWidget" and request.get("widgetKey") == "rewind":
            self.panel = request.get("widgetLines")
        super()._ui(request)


@pytest.fixture
def start_panel_rpc(pi_cli: Path, project: Path, agent_dir: Path):
    clients: list[PanelRpc] = []

    def start(env: dict[str, str] | None = None) -> PanelRpc:
        client = PanelRpc(pi_cli, project, agent_dir, env=env)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.close()


APP_V1 = "def app():\n    return 1\n"
SET_UP = "set up [[done: setup-ok]] " + turns(
    [write("app.py", APP_V1), write("util.py", "HELPER = 1\n")],
    [write("run.sh", "#!/bin/sh\necho ok\n"), write("check.sh", "#!/bin/sh\nexit 0\n")],
    [
        bash("chmod 755 run.sh check.sh")
    ],  # a turn of its own: Pi runs one message's tools in parallel
)
BROKEN_APP = "def app():\n    return 2  # broken\n"
NEW = "import nothing_here\n"


def attempt(*, restore: bool) -> str:
    """A prompt whose agent checkpoints, then rewrites one file, edits one, adds one, deletes
    one, drops a file's executable bit and rewrites a committed file, runs a check that fails,
    and (``restore``) calls ``diff`` and ``restore``, as its description tells it to."""
    steps = [
        [rewind("checkpoint", label="before")],
        [
            write("app.py", BROKEN_APP),
            edit("util.py", "HELPER = 1", "HELPER = 2"),
            write("new.py", NEW),
        ],
        [bash("rm run.sh && chmod 644 check.sh && printf 'x\\n' > README.md")],
        [bash("python3 -B -c 'import new' || exit 1")],
    ]
    if restore:
        steps += [[rewind("diff", point="before")], [rewind("restore", point="before")]]
    return "refactor [[done: refactor-done]] " + turns(*steps)


GO_BACK = "go back [[done: back-done]] " + turns(
    [rewind("diff", point="before")], [rewind("restore", point="before")]
)


def checkpoint_of(path: Path) -> dict[str, Any]:
    """The ``point`` of the tool's first checkpoint in this session (its id and snapshot)."""
    made = next(r for r in tool_results(path) if r["details"]["action"] == "checkpoint")
    point: dict[str, Any] = made["details"]["point"]
    return point


def test_checkpoint_failing_check_diff_restore_puts_back_the_checkpoints_files_byte_exact(
    start_panel_rpc: Callable[..., PanelRpc], project: Path
) -> None:
    rpc = start_panel_rpc()
    rpc.prompt(SET_UP)
    at_checkpoint = work_tree(project)
    assert at_checkpoint["run.sh"][1] == at_checkpoint["check.sh"][1] == 0o100755
    rpc.prompt(attempt(restore=True))
    path = Path(rpc.state()["sessionFile"])
    made, shown, done = results_after(path, 3)

    # The files: byte-exact and mode-exact as they were, and as the checkpoint's snapshot holds.
    assert work_tree(project) == at_checkpoint
    point = made["details"]["point"]
    assert snapshot_files(project, point["snapshot"]) == at_checkpoint
    # The check really failed before the model went back.
    check = tool_results(path, "bash")[-1]
    assert check["isError"] is True and "exited with code 1" in text_of(check)

    # What the model read: its checkpoint, the diff with each file's author, what was restored.
    assert made["isError"] is False
    assert 'Checkpoint "before" saved as ' + point["id"] in text_of(made)
    diff_text = text_of(shown)
    assert (
        'Restoring checkpoint "before"' in diff_text
        and "would change 6 file(s) of yours" in diff_text
    )
    assert "-    return 2  # broken" in diff_text and "+    return 1" in diff_text
    assert "not your work" not in diff_text
    restored = text_of(done)
    assert done["isError"] is False
    assert restored.startswith(f'Restored your files to checkpoint "before" ({point["id"]})')
    for line in ("M README.md", "M app.py", "M check.sh", "D new.py", "A run.sh", "M util.py"):
        assert f"\n  {line}\n" in restored + "\n", restored
    assert "Left alone" not in restored
    assert "The user can undo this restore from /rewind." in restored

    # The session: the checkpoint's entry (the message that called the tool) bound and
    # labelled; the restore one files-only rewind-op with current and undo, as /rewind's.
    entries = raw_entries(path)
    caller = next(e for e in entries if e.get("id") == point["id"])
    assert caller["message"]["role"] == "assistant"
    assert any(
        c.get("type") == "toolCall" and c.get("name") == "rewind"
        for c in caller["message"]["content"]
    )
    labels = [e for e in entries if e["type"] == "label"]
    assert [(e["targetId"], e["label"]) for e in labels] == [(point["id"], "before")]
    checkpoint_op, restore_op = ops(path)
    assert [b[0] for b in checkpoint_op["bindings"]] == [point["id"]]
    assert checkpoint_op["snapshots"][checkpoint_op["bindings"][0][1]] == point["snapshot"]
    assert list(restore_op) == ["v", "snapshots", "current", "undo"]
    # A snapshot of its own (told apart from a user's rewind to the same point), with the
    # checkpoint's files exactly.
    current = restore_op["snapshots"][restore_op["current"]]
    assert current != point["snapshot"]
    assert snapshot_files(project, current) == snapshot_files(project, point["snapshot"])
    undo = restore_op["snapshots"][restore_op["undo"]]
    assert undo == done["details"]["undo"]
    before_restore = snapshot_files(project, undo)
    assert before_restore["app.py"][0] == BROKEN_APP.encode() and "run.sh" not in before_restore
    assert before_restore["check.sh"][1] == 0o100644
    # The conversation did not move: the model's last answer hangs under the restore's result.
    by_id = {e["id"]: e for e in entries if "id" in e}
    final = next(
        e
        for e in entries
        if e["type"] == "message" and "Done: refactor-done" in json.dumps(e["message"]["content"])
    )
    ancestors, at = [], final.get("parentId")
    while at:
        ancestors.append(at)
        at = by_id[at].get("parentId")
    restore_entry = next(
        e
        for e in entries
        if e["type"] == "message" and e["message"] is not None and e["message"] == done
    )
    assert restore_entry["id"] in ancestors and point["id"] in ancestors

    # What the user saw: a notice and the panel with the way back.
    assert (
        "info",
        f'Rewind: the agent restored its own files to checkpoint "before" ({point["id"]})',
    ) in rpc.notices
    assert rpc.panel is not None and "the agent restored files" in rpc.panel[0]
    assert rpc.panel[-1] == M.REWIND_UNDO_HINT


def test_a_file_the_user_edited_between_prompts_is_left_alone_and_named_and_the_cli_undoes(
    start_panel_rpc: Callable[..., PanelRpc], project: Path, agent_dir: Path
) -> None:
    rpc = start_panel_rpc()
    rpc.prompt(SET_UP)
    at_checkpoint = work_tree(project)
    rpc.prompt(attempt(restore=False))
    # Between the prompts the user fixes the agent's app.py by hand and writes notes.
    (project / "app.py").write_text("def app():\n    return 3  # the user's fix\n")
    (project / "notes.md").write_bytes(b"the user's notes\r\nno newline at the end")
    users = {name: work_tree(project)[name] for name in ("app.py", "notes.md")}
    rpc.prompt(GO_BACK)
    path = Path(rpc.state()["sessionFile"])
    _made, shown, done = results_after(path, 3)

    now = work_tree(project)
    assert {name: now[name] for name in users} == users, "the user's files, byte-exact"
    assert {k: v for k, v in now.items() if k not in users} == {
        k: v for k, v in at_checkpoint.items() if k not in users
    }, "the agent's files are back at the checkpoint"
    assert "new.py" not in now
    diff_text = text_of(shown)
    assert "and leave alone 2 file(s) that are not your work:" in diff_text
    assert "  M app.py  (the user's own work)" in diff_text
    assert "  D notes.md  (the user's own work)" in diff_text
    assert "return 3" not in diff_text, "the diff shows the agent's files only"
    restored = text_of(done)
    assert (
        "Left alone, not your work: app.py (the user's own work); notes.md (the user's own work)."
        in restored
    ), restored
    assert sorted(f["path"] for f in done["details"]["restored"]) == [
        "README.md",
        "check.sh",
        "new.py",
        "run.sh",
        "util.py",
    ]
    assert "  left alone: app.py (your own work)" in (rpc.panel or [])
    assert "  left alone: notes.md (your own work)" in (rpc.panel or [])

    # The user undoes the agent's restore from the CLI: the agent's attempt comes back, and the
    # user's files still do not move.
    undone = _rewind(agent_dir, project, "undo", str(path), "--yes")
    assert undone.returncode == 0, undone.stderr
    again = work_tree(project)
    assert {name: again[name] for name in users} == users
    assert again["new.py"][0] == NEW.encode() and again["util.py"][0] == b"HELPER = 2\n"
    assert "run.sh" not in again and again["check.sh"][1] == 0o100644


def test_another_sessions_file_is_left_alone_and_named_and_no_restore_runs_during_its_turn(
    start_rpc: StartRpc, project: Path, agent_dir: Path
) -> None:
    first = start_rpc()
    first.prompt(SET_UP)
    first.prompt(attempt(restore=False))
    first_file = Path(first.state()["sessionFile"])
    second = start_rpc()
    second.prompt(
        "theirs "
        + turns([write("theirs.txt", "by the second agent\n"), write("app.py", "# B's\n")])
    )
    second_id = read_session(Path(second.state()["sessionFile"])).header["id"]
    theirs = {name: work_tree(project)[name] for name in ("theirs.txt", "app.py")}

    # The second agent runs a slow tool: the first agent's restore is refused, nothing written.
    second.command({"type": "prompt", "message": "slow " + turns([bash("sleep 10")])})

    def second_in_a_turn() -> bool:
        entries = _live(agent_dir, project, first_file)
        return any(e["busy"] for e in entries if e["sessionId"] == second_id)

    wait_for(second_in_a_turn, "the second session's turn to be in flight")
    during = work_tree(project)
    first.prompt("now " + turns([rewind("restore", point="before")]))
    assert second.state()["isStreaming"], "the other turn was still running (else retry slower)"
    (refused,) = results_after(first_file, 2)[1:]
    assert refused["details"]["refused"] is True
    text = text_of(refused)
    assert f"…{second_id[-8:]})" in text and "is in a turn in this work tree" in text, text
    assert "Nothing was changed." in text
    assert work_tree(project) == during
    assert len(ops(first_file)) == 1, "only the checkpoint's record"

    second.wait_idle()
    # Pi's `isStreaming` is false as soon as its agent loop ends, but it hands agent events to
    # extensions from a queue: under load our agent_end (which lets the gate go) comes later, and
    # a restore in between is rightly refused (CI saw it once). The entry says "not busy" only
    # after the gate is let go (bridge/dispatch.py: _turn_ends).
    wait_for(lambda: not second_in_a_turn(), "the second session's turn to have ended")
    first.prompt(GO_BACK)
    *_, done = results_after(first_file, 4)
    now = work_tree(project)
    assert {name: now[name] for name in theirs} == theirs, "the other session's files stay"
    assert "new.py" not in now and now["util.py"][0] == b"HELPER = 1\n"
    left = {f["path"]: f["author"] for f in done["details"]["leftAlone"]}
    assert sorted(left) == ["app.py", "theirs.txt"]
    restored = text_of(done)
    # Each is named with the session that wrote it: its first prompt's words and its id's tail.
    # It reads `the work of session "theirs …" (…1a2b3c4d) (still running)`.
    for name in ("app.py", "theirs.txt"):
        assert left[name].startswith('the work of session "theirs ')
        assert f"(…{second_id[-8:]})" in left[name]
        assert f"{name} ({left[name]})" in restored, restored
    assert restored.count("Left alone, not your work: ") == 1


def test_in_a_terminal_the_panel_shows_the_agents_restore_and_the_user_undoes_it_from_rewind(
    start_tui: StartTui, project: Path, agent_dir: Path
) -> None:
    tui = start_tui()
    tui.wait_for("◆ 0 points / 0 snapshots")
    tui.prompt(SET_UP, "Done: setup-ok")
    at_checkpoint = work_tree(project)
    tui.prompt(attempt(restore=False), "Done: refactor-done")
    tried = work_tree(project)
    (project / "notes.md").write_text("mine\n")  # the user's, between prompts
    tui.prompt(GO_BACK, "Done: back-done")
    screen = tui.wait_for("the agent restored files", M.REWIND_UNDO_HINT)
    assert 'Rewind: the agent restored files to checkpoint "before"' in screen, screen
    assert "the conversation is unchanged" in screen
    assert "left alone: notes.md (your own work)" in screen, screen
    assert work_tree(project) == {**at_checkpoint, "notes.md": (b"mine\n", 0o100644)}

    screen = open_rewind(tui)
    assert "↶ Undo the last file rewind" in screen, screen
    # The row names the agent's own rewind, after the checkpoint it chose.
    assert """checkpoint "before" (the agent's rewind)""" in screen, screen
    tui.keys("Enter")  # the undo is the first row
    screen = tui.wait_for("Rewind: last file rewind undone")
    assert "Rewind: last file rewind undone: 1 added, 4 modified, 1 deleted" in screen, screen
    assert "  A new.py  M README.md  M app.py  M check.sh (+2 more)" in screen, screen
    # The agent's files are back as its failed attempt left them; the user's notes stay.
    assert work_tree(project) == {**tried, "notes.md": (b"mine\n", 0o100644)}
    now = work_tree(project)
    assert now["app.py"][0] == BROKEN_APP.encode() and now["new.py"][0] == NEW.encode()
    assert "run.sh" not in now and now["check.sh"][1] == 0o100644
    (path,) = list((agent_dir / "sessions").rglob("*.jsonl"))
    undo_op, restore_op = ops(path)[-1], ops(path)[-2]
    assert "undo" in restore_op and "undo" in undo_op, "the undo is a files-only op itself"


@pytest.mark.parametrize("where", ["agent dir", "project"])
def test_agent_tool_false_leaves_the_tool_unregistered(
    start_rpc: StartRpc, project: Path, agent_dir: Path, where: str
) -> None:
    settings = json.dumps({"rewind": {"agentTool": False}})
    if where == "agent dir":
        (agent_dir / "settings.json").write_text(settings)
    else:
        (project / ".pi").mkdir()
        (project / ".pi" / "settings.json").write_text(settings)
    rpc = start_rpc()
    rpc.prompt("try " + turns([rewind("checkpoint", label="before")], [write("a.txt", "a\n")]))
    path = Path(rpc.state()["sessionFile"])
    (result,) = tool_results(path)
    assert result["isError"] is True and text_of(result) == "Tool rewind not found"
    assert (project / "a.txt").read_text() == "a\n"
    assert turn_count(path, 1) == 1, "the rest of the extension still records"
    assert not [e for e in raw_entries(path) if e["type"] == "label"]
