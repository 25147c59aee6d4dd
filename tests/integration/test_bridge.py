"""``rewind serve --stdio`` as a real process, driven the way the Pi extension drives it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ledger.engine import messages as M
from ledger.records import FORK_PENDING, OP, TURN
from ledger.session.store import read_session
from tests.bridgekit import FakePi, fork_child
from tests.gitkit import git


@pytest.fixture
def pi(repo: Path, isolated_env: Path) -> FakePi:
    fake = FakePi(repo, isolated_env / ".pi" / "agent")
    reply = fake.event("session_start", {"reason": "startup"})
    assert reply.error is None and reply.status == "◆ 0 points / 0 snapshots"
    yield fake
    fake.close()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _three_prompts(pi: FakePi) -> list[tuple[str, str]]:
    repo = pi.cwd
    return [
        pi.prompt("create", lambda: _write(repo / "a.txt", "one\n")),
        pi.prompt("edit", lambda: _write(repo / "a.txt", "two\n")),
        pi.prompt("delete", lambda: (repo / "a.txt").unlink()),
    ]


def _tree_of(repo: Path, commit: str) -> str:
    return git(repo, "rev-parse", f"{commit}^{{tree}}").strip()


def test_each_prompt_records_one_turn_bound_to_its_own_user_entry(pi: FakePi) -> None:
    prompts = _three_prompts(pi)
    turns = pi.custom(TURN)
    assert len(turns) == 3
    for (user, assistant), turn in zip(prompts, turns, strict=True):
        bound = {entry: turn["snapshots"][index] for entry, index in turn["bindings"]}
        assert set(bound) == {user, assistant}, (
            "D1: the pre-prompt snapshot is bound to this prompt's user entry"
        )
    bound = {e: t["snapshots"][i] for t in turns for e, i in t["bindings"]}
    # The second prompt's user entry holds the files as they were before it ran.
    assert git(pi.cwd, "show", f"{bound[prompts[1][0]]}:a.txt") == "one\n"
    # Deleting a.txt brings back the files from before the first prompt. Dedup compares a capture
    # with the latest exact snapshot only (a.txt "two"), so that state is committed again: a
    # parentless commit with the same tree, message and identity, which is the first commit byte
    # for byte only when both fall in the same second (commit times are whole seconds).
    assert _tree_of(pi.cwd, bound[prompts[2][1]]) == _tree_of(pi.cwd, bound[prompts[0][0]])


def test_the_footer_counts_points_and_snapshots(pi: FakePi) -> None:
    repo = pi.cwd
    pi.prompt("create", lambda: _write(repo / "a.txt", "one\n"))
    pi.prompt("edit", lambda: _write(repo / "a.txt", "two\n"))
    pi.prompt("edit again", lambda: _write(repo / "a.txt", "three\n"))
    reply = pi.event("ping")
    commits = [t["snapshots"][i] for t in pi.custom(TURN) for _, i in t["bindings"]]
    # Six points: each prompt's user entry (files before it) and assistant entry (files after
    # its turn). Four snapshots: the files before prompts 2 and 3 equal the latest exact
    # snapshot (the previous turn's), which is reused, not committed again. No prompt brings
    # back older files: that state would be a new commit or the old one depending on the clock
    # (see the test above).
    assert len(commits) == 6 and len(set(commits)) == 4
    assert reply.status == "◆ 6 points / 4 snapshots"


def test_records_go_through_the_host_never_the_session_file(pi: FakePi) -> None:
    _three_prompts(pi)
    assert not pi.session_file.exists(), "Pi owns the session file; the bridge must not write it"


def test_tree_restore_brings_back_the_files_and_records_the_op(pi: FakePi) -> None:
    prompts = _three_prompts(pi)
    pi.choices = [M.TREE_RESTORE]
    reply = pi.event("session_before_tree", {"targetId": prompts[1][1]})
    assert (
        reply.result == {} and {"level": "info", "text": M.FILES_RESTORED_TO_POINT} in reply.notices
    )
    title, options = pi.menus[-1]
    assert options == [M.TREE_KEEP, M.TREE_RESTORE, M.TREE_CANCEL]
    assert title.splitlines()[0] == M.MENU_TITLE and M.TREE_RESTORE + ": restores" in title
    assert (pi.cwd / "a.txt").read_text() == "two\n"
    pi.leaf = prompts[1][1]
    pi.event("session_tree", {"newLeafId": prompts[1][1], "oldLeafId": prompts[2][1]})
    op = pi.custom(OP)[-1]
    assert list(op) == ["v", "snapshots", "current", "undo"]
    assert pi.entries[-1]["parentId"] == prompts[1][1]
    # Undo of the rewind is offered next, and swaps the files back.
    pi.choices = [M.UNDO]
    reply = pi.event("session_before_tree", {"targetId": prompts[0][1]})
    assert M.UNDO in pi.menus[-1][1] and reply.result == {"cancel": True}
    assert not (pi.cwd / "a.txt").exists()


def test_a_cancelled_menu_cancels_the_navigation(pi: FakePi) -> None:
    prompts = _three_prompts(pi)
    pi.choices = [None]
    reply = pi.event("session_before_tree", {"targetId": prompts[0][1]})
    assert reply.result == {"cancel": True}
    assert {"level": "info", "text": M.NAVIGATION_CANCELLED} in reply.notices


def test_headless_tree_keeps_files_and_records_them(pi: FakePi) -> None:
    prompts = _three_prompts(pi)
    pi.has_ui = False
    reply = pi.event("session_before_tree", {"targetId": prompts[0][1]})
    assert reply.result == {} and not pi.menus
    pi.leaf = prompts[0][1]
    pi.event("session_tree", {"newLeafId": prompts[0][1]})
    assert not (pi.cwd / "a.txt").exists()
    assert list(pi.custom(OP)[-1]) == ["v", "snapshots", "current"]


def test_fork_restore_all_hands_its_state_to_the_child(pi: FakePi) -> None:
    prompts = _three_prompts(pi)
    pi.choices = [M.FORK_RESTORE_ALL]
    reply = pi.event("session_before_fork", {"entryId": prompts[2][0], "position": "before"})
    assert reply.result == {}
    assert (pi.cwd / "a.txt").read_text() == "two\n"
    pending = pi.custom(FORK_PENDING)[-1]
    pi.event("session_shutdown", {"reason": "fork"})
    assert pi.close() == 0
    copied = [e for e in pi.entries if e["id"] != pi.entries[-1]["id"]]
    child = fork_child(
        pi, copied[: copied.index(next(e for e in copied if e["id"] == prompts[2][0]))]
    )
    try:
        reply = child.event(
            "session_start", {"reason": "fork", "previousSessionFile": str(pi.session_file)}
        )
        assert reply.error is None
        assert reply.status == "◆ 4 points / 3 snapshots", (
            "D14: the footer counts points through lineage"
        )
        # What the fork's restore changed, with counts and names, as every panel says it.
        assert reply.panel == [f"{M.PANEL_FORK_RESTORED}: 1 added", "  A a.txt", M.UNDO_HINT]
        (op,) = child.custom(OP)
        assert (
            op["snapshots"][op["current"]] == pending["current"]
            and op["snapshots"][op["undo"]] == pending["undo"]
        )
        child.choices = [M.UNDO]
        child.event("session_before_tree", {"targetId": prompts[0][1]})
        assert not (pi.cwd / "a.txt").exists(), "the child can undo the parent's fork restore"
    finally:
        child.close()


def test_fork_code_only_restores_here_and_cancels_the_fork(pi: FakePi) -> None:
    prompts = _three_prompts(pi)
    pi.choices = [M.FORK_CODE_ONLY]
    reply = pi.event("session_before_fork", {"entryId": prompts[2][0], "position": "before"})
    assert reply.result == {"cancel": True}, (
        "Pi 0.73.1 ignores skipConversationRestore: cancel the fork"
    )
    assert (pi.cwd / "a.txt").read_text() == "two\n"
    assert pi.custom(FORK_PENDING) == []
    assert list(pi.custom(OP)[-1]) == ["v", "snapshots", "current", "undo"]
    assert reply.panel is not None and reply.panel[0].startswith(
        'Rewind: files restored to user "delete"'
    )
    assert "1 added; no fork made" in reply.panel[0]
    pi.choices = [M.UNDO]
    reply = pi.event("session_before_fork", {"entryId": prompts[2][0], "position": "before"})
    assert reply.result == {"cancel": True} and not (pi.cwd / "a.txt").exists(), (
        "undo works in the same session"
    )
    assert reply.panel is not None and "last file rewind undone: 1 deleted" in reply.panel[0]
    assert pi.event("before_agent_start", {"prompt": "next"}).panel == [], (
        "a new prompt clears the panel"
    )


def test_the_footer_counts_the_branch_the_user_is_on(pi: FakePi) -> None:
    prompts = _three_prompts(pi)
    full = pi.event("ping").status
    assert full is not None and full.startswith("◆ 6 points / ")
    pi.choices = [M.TREE_KEEP]
    pi.event("session_before_tree", {"targetId": prompts[0][1]})
    pi.leaf = prompts[0][1]
    reply = pi.event("session_tree", {"newLeafId": prompts[0][1], "oldLeafId": prompts[2][1]})
    assert reply.status == "◆ 2 points / 2 snapshots", (
        "after /tree: only the points up to the new position"
    )
    pi.leaf = prompts[2][1]
    assert pi.event("ping").status == full


def test_another_writer_of_ledger_records_is_detected_and_we_stand_aside(pi: FakePi) -> None:
    """pi-rewind-hook (or a second copy of ours) also loaded: one warning, one record per prompt."""
    pi.prompt("mine", lambda: _write(pi.cwd / "a.txt", "one\n"))
    assert len(pi.custom(TURN)) == 1
    pi.event("before_agent_start", {"prompt": "both"})
    pi.event("turn_start", {"turnIndex": 0})
    user = pi.user("both")
    assistant = pi.assistant("done")
    pi.event("turn_end", {"turnIndex": 0, "role": "assistant"})
    # The other extension's agent_end handler ran first and wrote its record of this prompt.
    pi.foreign(
        TURN,
        {"v": 2, "snapshots": ["0" * 40], "current": 0, "bindings": [[user, 0], [assistant, 0]]},
    )
    reply = pi.event("agent_end", {})
    warnings = [n["text"] for n in reply.notices if n["level"] == "warning"]
    assert (
        len(warnings) == 1 and "another rewind extension is recording this session" in warnings[0]
    )
    assert "pi remove" in warnings[0]
    assert len(pi.custom(TURN)) == 2, "ours did not record this prompt a second time"
    assert not reply.has_status, "the footer is left to the other extension"
    pi.choices = [M.TREE_RESTORE]
    reply = pi.event("session_before_tree", {"targetId": user})
    assert reply.result == {} and reply.notices == [] and pi.menus == [], "no second menu"
    pi.prompt("later", lambda: _write(pi.cwd / "a.txt", "three\n"))
    assert len(pi.custom(TURN)) == 2 and not pi.event("ping").has_status


def test_another_writer_that_records_after_us_is_detected_at_the_next_prompt(pi: FakePi) -> None:
    """pi-rewind-hook loaded after ours: its record of a prompt follows ours; we notice at the
    next prompt, warn once and record nothing more (that first prompt keeps two records)."""
    user, assistant = pi.prompt("both", lambda: _write(pi.cwd / "a.txt", "one\n"))
    pi.foreign(
        TURN,
        {"v": 2, "snapshots": ["0" * 40], "current": 0, "bindings": [[user, 0], [assistant, 0]]},
    )
    assert pi.event("before_agent_start", {"prompt": "next"}).notices == []
    reply = pi.event("turn_start", {"turnIndex": 0})
    assert [n["level"] for n in reply.notices] == [
        "warning"
    ] and "another rewind extension" in reply.notices[0]["text"]
    pi.user("next")
    pi.assistant("done")
    pi.event("turn_end", {"turnIndex": 0, "role": "assistant"})
    assert pi.event("agent_end", {}).notices == [], "warned once"
    assert len(pi.custom(TURN)) == 2, "ours and the other's for the first prompt, none more from us"


def test_cli_version_and_plural_hints(tmp_path: Path) -> None:
    """Small CLI items of the Pi work: ``rewind --version`` and ``known entries:``."""
    import subprocess
    import sys

    from ledger.errors import NameResolutionError

    done = subprocess.run(
        [sys.executable, "-m", "ledger", "--version"], capture_output=True, text=True, check=False
    )
    assert (
        done.returncode == 0
        and done.stdout.startswith("rewind ")
        and done.stdout.split()[1][0].isdigit()
    )
    assert NameResolutionError("entry", "x", ["a1"], ambiguous=False).hint == "known entries: a1"
    assert (
        NameResolutionError("session", "x", [], ambiguous=False).hint
        == "there are no sessions to choose from"
    )


def test_a_resumed_session_resolves_points_from_its_file(pi: FakePi, repo: Path) -> None:
    prompts = _three_prompts(pi)
    pi.event("session_shutdown", {"reason": "quit"})
    pi.close()
    path = pi.write_file()
    resumed = FakePi(
        repo,
        pi.agent_dir,
        entries=[e for e in (orjson.loads(line) for line in path.read_bytes().splitlines()[1:])],
        session_file=path,
    )
    resumed.header = read_session(path).header
    try:
        resumed.event("session_start", {"reason": "startup"})
        resumed.choices = [M.TREE_RESTORE]
        resumed.event("session_before_tree", {"targetId": prompts[0][1]})
        assert (repo / "a.txt").read_text() == "one\n"
    finally:
        resumed.close()


def test_every_protocol_event_has_a_handler() -> None:
    from ledger.bridge.dispatch import ROUTES
    from ledger.bridge.protocol import EVENT_NAMES

    # ping and session_start are answered before an engine exists; every other event is routed.
    assert set(ROUTES) | {"ping", "session_start"} == EVENT_NAMES
    assert "ping" not in ROUTES and "session_start" not in ROUTES


def test_bad_messages_get_errors_and_the_bridge_keeps_serving(pi: FakePi) -> None:
    pi.send_raw(b"{not json")
    assert pi.read()["error"]["code"] == "bad-json"
    pi.send_raw(b"[1, 2]")
    assert pi.read()["error"]["code"] == "bad-message"
    pi.send_raw(orjson.dumps({"type": "event", "id": 7, "event": "no_such_event"}))
    assert pi.read() == {
        "type": "error",
        "id": 7,
        "error": {"code": "unknown-event", "message": "unknown event: 'no_such_event'"},
    }
    pi.send_raw(
        orjson.dumps(
            {
                "type": "event",
                "id": 8,
                "event": "turn_start",
                "payload": {},
                "ctx": {"hasUI": "maybe"},
            }
        )
    )
    error = pi.read()
    assert (
        error["id"] == 8
        and error["error"]["code"] == "bad-message"
        and "hasUI" in error["error"]["message"]
    )
    pi.send_raw(orjson.dumps({"type": "reply", "id": "c99", "result": {}}))
    assert pi.read()["error"]["code"] == "bad-message"
    assert pi.event("ping").error is None


def test_an_error_reply_to_a_call_fails_that_event_only(pi: FakePi) -> None:
    pi.send_raw(
        orjson.dumps(
            {
                "type": "event",
                "id": 50,
                "event": "turn_start",
                "payload": {"turnIndex": 0},
                "ctx": {"hasUI": True, "cwd": str(pi.cwd), "leafId": None},
            }
        )
    )
    call = pi.read()
    assert call["type"] == "call" and call["method"] == "session"
    pi.send_raw(
        orjson.dumps({"type": "reply", "id": call["id"], "error": "session manager is stale"})
    )
    error = pi.read()
    assert (
        error["id"] == 50
        and error["error"]["code"] == "failed"
        and "stale" in error["error"]["message"]
    )
    assert pi.event("ping").error is None


def test_outside_git_with_shadow_repositories_off_every_event_is_a_no_op(
    tmp_path: Path, isolated_env: Path
) -> None:
    (tmp_path / "plain").mkdir()
    agent_dir = isolated_env / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "settings.json").write_text(
        '{"rewind": {"snapshot": {"shadowRepositories": false}}}'
    )
    fake = FakePi(tmp_path / "plain", agent_dir)
    try:
        reply = fake.event("session_start", {"reason": "startup"})
        assert reply.error is None and reply.status is None and not reply.calls
        assert fake.prompt("hi") and fake.custom(TURN) == []
    finally:
        assert fake.close() == 0


def test_silent_checkpoints_hide_the_footer_and_info_notices(
    repo: Path, isolated_env: Path
) -> None:
    agent_dir = isolated_env / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "settings.json").write_text('{"rewind": {"silentCheckpoints": true}}')
    fake = FakePi(repo, agent_dir)
    try:
        fake.event("session_start", {"reason": "startup"})
        user, _assistant = fake.prompt("create", lambda: _write(repo / "b.txt", "b\n"))
        fake.choices = [M.TREE_RESTORE]
        reply = fake.event("session_before_tree", {"targetId": user})
        assert reply.status is None and reply.notices == [] and reply.panel is None, (
            "no chatter when silent"
        )
        assert not (repo / "b.txt").exists()
    finally:
        fake.close()


def test_end_of_input_ends_the_bridge_cleanly(pi: FakePi) -> None:
    assert pi.close() == 0
