"""Changes the agent did not make (issue 14 part 2): restore plans, menus, ``rewind status`` and
the status-line note name the files changed since the latest rewind point."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.engine import messages as M
from ledger.git.capture.scan import Capturer
from ledger.outside_rules import OutsideChange
from tests.bridgekit import FakePi
from tests.cli.helpers import run_cli
from tests.enginekit import Agent
from tests.gitkit import git


def _create(repo: Path) -> None:
    (repo / "a.txt").write_text("one\n")
    (repo / "b.txt").write_text("b\n")
    (repo / "run.sh").write_text("echo hi\n")
    (repo / "t.txt").write_text("t\n")
    os.symlink("a.txt", repo / "link")


def _edit(repo: Path) -> None:
    (repo / "a.txt").write_text("two\n")


def _by_hand(repo: Path) -> None:
    """One change of every kind, none made by the agent."""
    (repo / "a.txt").write_text("mine\n")  # modified
    (repo / "new.txt").write_text("new\n")  # added
    (repo / "b.txt").unlink()  # deleted
    (repo / "run.sh").chmod(0o755)  # mode +x
    (repo / "link").unlink()
    os.symlink("t.txt", repo / "link")  # symlink target
    (repo / "t.txt").unlink()
    os.symlink("a.txt", repo / "t.txt")  # file → symlink


EVERY_KIND = [
    OutsideChange("a.txt", "modified"),
    OutsideChange("b.txt", "deleted"),
    OutsideChange("link", "symlink", "target"),
    OutsideChange("new.txt", "added"),
    OutsideChange("run.sh", "mode", "+x"),
    OutsideChange("t.txt", "symlink", "type"),
]


@pytest.fixture
def agent(repo: Path, tmp_path: Path) -> Agent:
    agent = Agent.start(repo, tmp_path / "agent")
    agent.prompt("create files", _create)
    agent.prompt("edit a", _edit)
    return agent


def users(agent: Agent) -> list[str]:
    return [e.id for e in agent.session().entries if e.role == "user"]


def cli(capsys: pytest.CaptureFixture[str], agent: Agent, *args: str):
    return run_cli(capsys, "--agent-dir", agent.agent_dir, *args, cwd=agent.repo)


def _json(result) -> dict:
    assert result.code == 0, result.err
    return result.json_lines()[0]


# --- restore plans -----------------------------------------------------------------------------


def test_manual_edits_appear_in_the_dry_run_plan_with_their_kind(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    _by_hand(agent.repo)
    plan = _json(cli(capsys, agent, "restore", "@", users(agent)[1], "--dry-run", "--json"))
    assert plan["changedOutsideAgent"] == [c.to_json() for c in EVERY_KIND]
    text = cli(capsys, agent, "restore", "@", users(agent)[1], "--dry-run").out
    assert (
        "6 files hold your own work, not the agent's, and will be overwritten: a.txt, b.txt, link "
        "(+3 more); 'rewind undo @' brings them back"
    ) in text


def test_only_the_paths_the_restore_overwrites_are_listed(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the first prompt none of the files existed: b.txt, deleted by hand, stays deleted
    (the restore does not touch it), so it is not listed; a file changed by hand to exactly the
    target's content is not overwritten either."""
    _by_hand(agent.repo)
    plan = _json(cli(capsys, agent, "restore", "@", users(agent)[0], "--dry-run", "--json"))
    assert [c["path"] for c in plan["changedOutsideAgent"]] == [
        "a.txt",
        "link",
        "new.txt",
        "run.sh",
        "t.txt",
    ]
    (agent.repo / "a.txt").write_text("one\n")  # by hand, equal to the point after prompt 1
    plan = _json(cli(capsys, agent, "restore", "@", users(agent)[1], "--dry-run", "--json"))
    assert "a.txt" not in [c["path"] for c in plan["changedOutsideAgent"]]
    assert "a.txt" not in plan["modified"]


def test_nothing_extra_when_the_tree_equals_the_last_point(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _json(cli(capsys, agent, "restore", "@", users(agent)[0], "--dry-run", "--json"))
    assert plan["changedOutsideAgent"] == [] and plan["deleted"]
    text = cli(capsys, agent, "restore", "@", users(agent)[0], "--dry-run").out
    assert "agent's last turn" not in text


def test_the_restore_report_says_what_it_overwrote_and_undo_brings_it_back(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    (agent.repo / "a.txt").write_text("mine\n")
    result = cli(capsys, agent, "restore", "@", users(agent)[1], "--mode", "files", "--yes")
    assert result.code == 0, result.err
    assert (
        "overwrote 1 file that held your own work, not the agent's: a.txt; 'rewind undo @' brings it back"
        in result.out
    )
    assert (agent.repo / "a.txt").read_text() == "one\n"
    # After the restore the work tree equals the new latest point: nothing outside any more.
    status = _json(cli(capsys, agent, "status", "@", "--json"))
    assert status["clean"] and status["point"]["snapshot"]
    assert cli(capsys, agent, "undo", "@", "--yes").code == 0
    assert (agent.repo / "a.txt").read_text() == "mine\n"


def test_undo_plan_lists_outside_changes_too(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, agent, "restore", "@", users(agent)[0], "--mode", "files", "--yes").code == 0
    (agent.repo / "scratch.txt").write_text("by hand\n")
    plan = _json(cli(capsys, agent, "undo", "@", "--dry-run", "--json"))
    assert plan["changedOutsideAgent"] == [
        {"path": "scratch.txt", "change": "added", "detail": None, "since": None}
    ]


# --- your own work, not only since the last turn (issue 24) ------------------------------------


def test_a_file_made_by_hand_before_an_earlier_prompt_is_named_before_it_is_deleted(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The user test of issue 24: mine.txt made by hand between P6 and P7, main.py and x.txt
    # edited after P7, then a restore to P6: all three are the user's, mine.txt included.
    agent = Agent.start(repo, tmp_path / "agent")
    agent.prompt("p5", lambda r: (r / "main.py").write_text("v5\n"))
    agent.prompt("p6", lambda r: (r / "x.txt").write_text("x6\n"))
    (repo / "mine.txt").write_text("mine\n")
    agent.prompt("p7", lambda r: (r / "main.py").write_text("v7\n"))
    (repo / "main.py").write_text("edited by hand\n")
    (repo / "x.txt").write_text("edited by hand\n")
    p6, p7 = users(agent)[1], users(agent)[2]
    plan = _json(cli(capsys, agent, "restore", "@", p6, "--mode", "files", "--dry-run", "--json"))
    assert plan["deleted"] == ["mine.txt", "x.txt"]
    owned = {c["path"]: c for c in plan["changedOutsideAgent"]}
    assert set(owned) == {"main.py", "mine.txt", "x.txt"}
    assert owned["mine.txt"] == {"path": "mine.txt", "change": "added", "detail": None, "since": p7}
    assert owned["main.py"]["since"] is None, "changed after the latest point"
    text = cli(capsys, agent, "restore", "@", p6, "--mode", "files", "--dry-run").out
    assert (
        "3 files hold your own work, not the agent's, and will be overwritten: main.py, "
        "mine.txt, x.txt; 'rewind undo @' brings them back"
    ) in text


def test_what_the_agent_wrote_is_never_called_the_users_even_after_a_restore_and_its_undo(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    agent.prompt("first", lambda r: (r / "f.txt").write_text("agent 1\n"))
    agent.prompt("second", lambda r: (r / "f.txt").write_text("agent 2\n"))
    first = users(agent)[0]
    assert cli(capsys, agent, "restore", "@", users(agent)[1], "--mode", "files", "--yes").code == 0
    assert cli(capsys, agent, "undo", "@", "--yes").code == 0  # f.txt is the agent's "agent 2"
    plan = _json(
        cli(capsys, agent, "restore", "@", first, "--mode", "files", "--dry-run", "--json")
    )
    assert plan["deleted"] == ["f.txt"] and plan["changedOutsideAgent"] == []
    (repo / "f.txt").write_text("agent 1\n")  # by hand, but what the agent once wrote there
    plan = _json(
        cli(capsys, agent, "restore", "@", first, "--mode", "files", "--dry-run", "--json")
    )
    assert plan["changedOutsideAgent"] == []


# --- rewind status -----------------------------------------------------------------------------


def test_status_lists_every_kind_with_its_letter(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    _by_hand(agent.repo)
    status = _json(cli(capsys, agent, "status", "@", "--json"))
    assert status["changes"] == [c.to_json() for c in EVERY_KIND] and not status["clean"]
    last_assistant = [e.id for e in agent.session().entries if e.role == "assistant"][-1]
    assert status["point"]["entry"] == last_assistant and status["point"]["timestamp"]
    text = cli(capsys, agent, "status", "@")
    assert text.code == 0
    lines = text.out.splitlines()
    assert lines[0].startswith(f"latest rewind point: entry {last_assistant} (")
    assert lines[1] == (
        "changed since then: 6 files (1 added, 1 modified, 1 deleted, 1 mode change, "
        "2 symlink changes)"
    )
    assert lines[2:] == [
        "  M a.txt",
        "  D b.txt",
        "  L link (target)",
        "  A new.txt",
        "  X run.sh (+x)",
        "  L t.txt (type)",
    ]


def test_status_of_an_unchanged_tree_is_clean(
    agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    status = _json(cli(capsys, agent, "status", "@", "--json"))
    assert status["clean"] and status["changes"] == []
    assert cli(capsys, agent, "status", "@").out.splitlines()[-1] == "nothing changed since then"


def test_status_without_a_point_says_so(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = Agent.start(repo, tmp_path / "agent")
    agent.user("hello")
    status = _json(cli(capsys, agent, "status", "@", "--json"))
    assert status["point"] is None and status["clean"]
    assert "no rewind point" in cli(capsys, agent, "status", "@").out


def test_status_is_read_only(agent: Agent, capsys: pytest.CaptureFixture[str]) -> None:
    _by_hand(agent.repo)
    git_dir = agent.repo / ".git"
    index = (git_dir / "index").read_bytes()
    head = git(agent.repo, "rev-parse", "HEAD")
    store = git(agent.repo, "rev-parse", "refs/pi-rewind/store")
    last = (git_dir / "pi-rewind" / "last-snapshot.json").read_bytes()
    session = agent.session_file.read_bytes()
    assert cli(capsys, agent, "status", "@").code == 0
    assert (git_dir / "index").read_bytes() == index
    assert git(agent.repo, "rev-parse", "HEAD") == head
    assert git(agent.repo, "rev-parse", "refs/pi-rewind/store") == store
    assert (git_dir / "pi-rewind" / "last-snapshot.json").read_bytes() == last
    assert agent.session_file.read_bytes() == session


# --- inside the engine (Pi's menus and status line) --------------------------------------------


def _menu(answer: str | None):
    titles: list[str] = []

    def pick(title: str, options: list[str]) -> str | None:
        titles.append(title)
        return answer

    return pick, titles


def test_the_tree_and_fork_menus_name_the_files_a_restore_would_overwrite(agent: Agent) -> None:
    (agent.repo / "a.txt").write_text("mine\n")
    (agent.repo / "notes.md").write_text("by hand\n")
    pick, titles = _menu(M.TREE_CANCEL)
    agent.engine.before_tree(users(agent)[1], pick)
    warning = (
        "  ⚠ 2 files hold your own work, not the agent's, and will be overwritten: a.txt, "
        'notes.md; "Undo last file rewind" brings them back'
    )
    missing = 'Not offered: "Undo last file rewind" (no file rewind to undo on this branch)'
    assert titles == [
        f"{M.MENU_TITLE}\n"
        f"{M.TREE_RESTORE}: restores 2 files (1 modified, 1 deleted): a.txt, notes.md\n"
        f"{warning}\n{missing}"
    ]
    pick, titles = _menu(None)
    agent.engine.before_fork(users(agent)[1], pick)
    assert titles == [
        f"{M.MENU_TITLE}\n"
        f"{M.FORK_RESTORE_ALL} / {M.FORK_CODE_ONLY}: restores 2 files (1 modified, 1 deleted): "
        f"a.txt, notes.md\n{warning}\n{missing}"
    ]


def test_the_menu_title_says_what_each_choice_restores_and_names_no_own_work_when_none(
    agent: Agent,
) -> None:
    pick, titles = _menu(M.TREE_CANCEL)
    agent.engine.before_tree(users(agent)[0], pick)
    (title,) = titles
    assert title.splitlines() == [
        M.MENU_TITLE,
        f"{M.TREE_RESTORE}: restores 5 files (5 deleted): a.txt, b.txt (+3 more)",
        'Not offered: "Undo last file rewind" (no file rewind to undo on this branch)',
    ]


def test_the_menu_takes_no_capture_without_a_restore_option_and_says_why(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    (agent.repo / "a.txt").write_text("mine\n")
    captures = _count_captures(monkeypatch)
    model = next(e.id for e in agent.session().entries if e.type == "model_change")
    pick, titles = _menu(M.TREE_CANCEL)
    agent.engine.before_tree(model, pick)
    assert captures == []
    assert titles == [
        f"{M.MENU_TITLE}\n"
        f'Not offered: "{M.TREE_RESTORE}" (that entry is not a prompt, reply or summary: it has '
        'no rewind point); "Undo last file rewind" (no file rewind to undo on this branch)'
    ]


def test_when_undo_is_the_only_file_choice_the_way_back_is_choosing_it_again(
    agent: Agent,
) -> None:
    second = agent.session().get(users(agent)[1])
    assert second is not None
    agent.engine.before_tree(second.id, _menu(M.TREE_RESTORE)[0])
    agent.engine.record_navigation(second.parent_id)  # where Pi's /tree puts the leaf
    (agent.repo / "mine.txt").write_text("mine\n")
    model = next(e.id for e in agent.session().entries if e.type == "model_change")
    pick, titles = _menu(M.TREE_CANCEL)
    agent.engine.before_tree(model, pick)
    (title,) = titles
    assert 'choosing "Undo last file rewind" again brings it back' in title
    assert "1 file holds your own work, not the agent's, and will be overwritten: mine.txt" in title


def test_each_warning_sits_under_the_choice_it_is_about_and_the_undos_never_contradicts_it(
    agent: Agent,
) -> None:
    # A file rewind to the second prompt, then the user's own edit: restoring the first prompt's
    # point and undoing the rewind would both overwrite it, each with its own way back.
    second = agent.session().get(users(agent)[1])
    assert second is not None
    agent.engine.before_tree(second.id, _menu(M.TREE_RESTORE)[0])
    agent.engine.record_navigation(second.parent_id)  # where Pi's /tree puts the leaf
    (agent.repo / "a.txt").write_text("mine\n")
    pick, titles = _menu(M.TREE_CANCEL)
    agent.engine.before_tree(users(agent)[0], pick)
    (title,) = titles
    lines = title.splitlines()
    restore = next(i for i, line in enumerate(lines) if line.startswith(f"{M.TREE_RESTORE}:"))
    undo = next(i for i, line in enumerate(lines) if line.startswith(f"{M.UNDO}:"))
    assert restore < undo, lines
    under_restore, under_undo = lines[restore + 1 : undo], lines[undo + 1 :]
    assert any("a.txt" in line and line.startswith("  ⚠ ") for line in under_restore), lines
    assert all('"Undo last file rewind" brings' in line for line in under_restore), lines
    mine = [line for line in under_undo if "your own work" in line]
    assert mine and mine[0].startswith("  ⚠ ") and "a.txt" in mine[0], lines
    # Undoing the rewind cannot be undone by "Undo last file rewind"... except by choosing it
    # again: the warning under it says exactly that.
    assert mine[0].endswith('choosing "Undo last file rewind" again brings it back'), lines


def test_the_pre_prompt_snapshot_keeps_outside_changes_and_says_so_once(agent: Agent) -> None:
    _by_hand(agent.repo)
    engine = agent.engine
    engine.before_agent_start("next")
    result = engine.turn_start(0)
    assert result.status_note == "rewind: kept your 6 changed files as a point before this prompt"
    agent.user("next")
    reply = agent.assistant("done")
    engine.turn_end(0, message=reply["message"])
    engine.agent_end()
    engine.before_agent_start("again")
    assert engine.turn_start(0).status_note is None, "the new point holds them: nothing new"


def _count_captures(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = Capturer.capture

    def counted(self: Capturer):  # type: ignore[no-untyped-def]
        calls.append(1)
        return original(self)

    monkeypatch.setattr(Capturer, "capture", counted)
    return calls


def test_the_outside_check_adds_no_capture_to_a_restore(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.engine import operations

    _by_hand(agent.repo)
    captures = _count_captures(monkeypatch)
    report = operations.restore(agent.engine, users(agent)[1], "files", dry_run=True)
    assert len(report.outside) == 6 and len(captures) == 1, "the plan's own capture only"
    captures.clear()
    operations.restore(agent.engine, users(agent)[1], "files")
    assert len(captures) == 1, "the plan's capture only: the restore re-checks it, no second scan"


# --- the bridge: the footer ----------------------------------------------------------------------


def test_the_footer_shows_the_note_until_the_next_prompt(repo: Path, isolated_env: Path) -> None:
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    try:
        pi.event("session_start", {"reason": "startup"})
        pi.prompt("create", lambda: (repo / "a.txt").write_text("one\n"))
        (repo / "a.txt").write_text("by hand\n")
        (repo / "b.txt").write_text("by hand\n")
        pi.event("before_agent_start", {"prompt": "go on"})
        reply = pi.event("turn_start", {"turnIndex": 0})
        assert reply.status is not None and reply.status.endswith(
            " · rewind: kept your 2 changed files as a point before this prompt"
        )
        pi.user("go on")
        pi.assistant("done")
        pi.event("turn_end", {"turnIndex": 0, "role": "assistant"})
        assert "kept your 2" in (pi.event("agent_end", {}).status or "")
        reply = pi.event("before_agent_start", {"prompt": "third"})
        assert reply.status is not None and "kept your" not in reply.status
    finally:
        pi.close()
