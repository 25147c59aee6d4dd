"""A bridge killed with ``kill -9`` in the middle of a restore leaves an open restore journal; the
next bridge on the same session offers "Undo last file rewind" in ``/rewind``'s list and in the
``/tree`` and ``/fork`` menus, and that undo brings every byte back exactly as ``rewind undo``
does: one recovery for every undo (docs/design.md#crash-safe-restore, issue 32 item 4).

Real processes throughout: each bridge is a real ``rewind serve --stdio`` driven by
:class:`tests.bridgekit.FakePi`; the first one SIGKILLs itself when its restore reaches a chosen
step (after its deletions, before its writes), so the work tree is really left mixed.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import tests.bridgekit as bridgekit
from ledger.engine import messages as M
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import Journal, open_journals
from ledger.ledgerview import LedgerView
from ledger.recovery import journal_states
from ledger.session.store import read_session
from tests.bridgekit import FakePi
from tests.enginekit import Agent

Files = dict[str, bytes]

BRIDGE = [sys.executable, "-m", "ledger", "serve", "--stdio"]


def _killing_bridge(step: str, nth: int) -> list[str]:
    """The real bridge, in a process that SIGKILLs itself when a restore reaches ``step`` for
    the ``nth`` time."""
    code = (
        "import os, signal, sys\n"
        "from ledger.git.restore.apply import Steps\n"
        "original = Steps.reach\n"
        "seen = []\n"
        "def reach(self, step):\n"
        f"    if step == {step!r}:\n"
        "        seen.append(step)\n"
        f"        if len(seen) == {nth}:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return original(self, step)\n"
        "Steps.reach = reach\n"
        "from ledger.cli import main\n"
        "sys.exit(main(['serve', '--stdio']))\n"
    )
    return [sys.executable, "-c", code]


def killing_pi(
    monkeypatch: pytest.MonkeyPatch, cwd: Path, agent_dir: Path, step: str, nth: int = 1
) -> FakePi:
    """A :class:`FakePi` whose bridge dies at ``step`` of its ``nth`` restore."""

    def popen(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(_killing_bridge(step, nth) if args == BRIDGE else args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(bridgekit, "subprocess", SimpleNamespace(Popen=popen, PIPE=subprocess.PIPE))
        return FakePi(cwd, agent_dir)


def same_session(dead: FakePi) -> FakePi:
    """The next bridge on the same Pi session (the extension restarts it): Pi still holds the
    session's entries, the file on disk holds them too."""
    dead.write_file()
    fresh = FakePi(dead.cwd, dead.agent_dir, entries=dead.entries, session_file=dead.session_file)
    fresh.header = dead.header
    fresh._ids = dead._ids + 1000
    assert fresh.event("session_start", {"reason": "resume"}).error is None
    return fresh


def files(root: Path) -> Files:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def _work(pi: FakePi) -> tuple[str, str]:
    """Two prompts: the first writes 40 files, the second rewrites 30 and replaces 10 by new ones.
    Returns the user entries (the second one's point is the first prompt's result)."""
    repo = pi.cwd

    def first() -> None:
        for n in range(40):
            (repo / f"f{n:03}.txt").write_bytes(f"v1 {n}\n".encode() * 50)

    def second() -> None:
        for n in range(30):
            (repo / f"f{n:03}.txt").write_bytes(f"v2 {n}\n".encode() * 70)
        for n in range(30, 40):
            (repo / f"f{n:03}.txt").unlink()
            (repo / f"g{n:03}.txt").write_bytes(f"new {n}\n".encode())

    one, _ = pi.prompt("write forty files", first)
    two, _ = pi.prompt("rewrite them", second)
    return one, two


def killed_mid_restore(
    monkeypatch: pytest.MonkeyPatch, repo: Path, agent_dir: Path, how: str, *, swapped: bool = False
) -> tuple[FakePi, Files, Journal]:
    """A session whose bridge was killed after the deletions of a restore started by ``how``
    (``rewind``: /rewind's files action, ``tree``: /tree's restore, ``fork``: /fork's Restore
    all); returns the dead session, every file before that restore, and its open journal.
    ``swapped``: the same restore was made and undone through /rewind first (so the branch's
    last file action is an undo)."""
    pi = killing_pi(monkeypatch, repo, agent_dir, "after-delete", nth=3 if swapped else 1)
    assert pi.event("session_start", {"reason": "startup"}).error is None
    _, second = _work(pi)
    (repo / "f000.txt").write_bytes(b"edited by hand after the last prompt\n")
    before = files(repo)
    if swapped:
        assert pi.event("rewind_apply", {"action": "files", "entryId": second}).error is None
        assert pi.event("rewind_apply", {"action": "undo"}).error is None
        assert files(repo) == before
    pi.write_file()  # Pi has written its session file since the first assistant message
    with pytest.raises(EOFError):
        if how == "rewind":
            pi.event("rewind_apply", {"action": "files", "entryId": second})
        elif how == "tree":
            pi.choices = [M.TREE_RESTORE]
            pi.event("session_before_tree", {"targetId": second})
        else:
            pi.choices = [M.FORK_RESTORE_ALL]
            pi.event("session_before_fork", {"entryId": second})
    assert pi.proc.wait(timeout=30) == -9
    # The earlier restores are recorded in the file: their journals close; the killed one is
    # the only one left, interrupted (its owner is gone).
    interrupted, running = journal_states(GitRepo.discover(repo))
    assert running == [] and [j.state for j in interrupted] == ["writing"]
    assert open_journals(GitRepo.discover(repo)) == (interrupted, [])
    mixed = files(repo)
    assert mixed != before and "g030.txt" not in mixed, "the kill landed after the deletions"
    return pi, before, interrupted[0]


def undo(pi: FakePi, how: str, entry: str) -> list[str]:
    """ "Undo last file rewind" through ``how``: /rewind's undo action, or /tree's or /fork's
    menu; the panel it shows."""
    if how == "rewind":
        reply = pi.event("rewind_apply", {"action": "undo"})
        assert reply.error is None, reply.error
        return reply.panel or []
    pi.choices = [M.UNDO]
    if how == "tree":
        reply = pi.event("session_before_tree", {"targetId": entry})
    else:
        reply = pi.event("session_before_fork", {"entryId": entry})
    assert M.UNDO in pi.menus[-1][1], pi.menus[-1]
    assert reply.error is None and reply.result.get("cancel") is True, reply
    assert not [n for n in reply.notices if n["level"] == "error"], reply.notices
    return reply.panel or []


def recorded_ops(pi: FakePi) -> list[tuple[str | None, str | None]]:
    """(current, undo) of each op record, as the session file holds them."""
    view = LedgerView.of(read_session(pi.write_file()))
    return [(r.current, r.undo) for r in view.records if r.current is not None]


def first_user(pi: FakePi) -> str:
    return next(
        e["id"] for e in pi.entries if e["type"] == "message" and e["message"]["role"] == "user"
    )


@pytest.fixture
def closing() -> Iterator[list[FakePi]]:
    started: list[FakePi] = []
    yield started
    for pi in started:
        with contextlib.suppress(OSError):
            pi.close()


@pytest.mark.parametrize("how", ["rewind", "tree", "fork"])
def test_undo_after_a_bridge_killed_mid_restore_brings_every_byte_back(
    monkeypatch: pytest.MonkeyPatch,
    repo: Path,
    agent_dir: Path,
    closing: list[FakePi],
    how: str,
) -> None:
    dead, before, journal = killed_mid_restore(monkeypatch, repo, agent_dir, how)
    mixed = files(repo)
    pi = same_session(dead)
    closing.extend([dead, pi])
    entry = first_user(pi)

    listing = pi.event("rewind_list").result["list"]
    assert listing["undo"] is not None, "the /rewind list offers the undo"
    assert listing["undo"]["snapshot"] == journal.undo
    assert listing["undo"]["label"] == M.UNDO

    panel = undo(pi, how, entry)
    assert any("had been interrupted" in line for line in panel), panel
    assert files(repo) == before
    assert open_journals(GitRepo.discover(repo)) == ([], [])
    # The recovery is recorded (files now = the pre-restore snapshot) and is undoable in turn.
    current, undone = recorded_ops(pi)[-1]
    assert current == journal.undo and undone is not None
    assert pi.event("rewind_list").result["list"]["undo"]["snapshot"] == undone
    undo(pi, how, entry)
    assert files(repo) == mixed
    undo(pi, how, entry)
    assert files(repo) == before


def test_the_bridge_and_rewind_undo_choose_the_same_recovery(
    monkeypatch: pytest.MonkeyPatch, repo: Path, agent_dir: Path, closing: list[FakePi]
) -> None:
    """A restore killed inside the bridge: the bridge's /rewind list and ``rewind undo`` on the
    session file (the CLI, a dry run) name the same target, the snapshot from before it."""
    dead, _, journal = killed_mid_restore(monkeypatch, repo, agent_dir, "rewind")
    mixed = files(repo)
    pi = same_session(dead)
    closing.extend([dead, pi])
    assert pi.event("rewind_list").result["list"]["undo"]["snapshot"] == journal.undo
    plan = subprocess.run(
        [sys.executable, "-m", "ledger", "--json", "undo", str(pi.session_file), "--dry-run"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["target"] == journal.undo
    assert files(repo) == mixed


def test_a_restore_still_running_is_never_offered_as_an_interrupted_one(
    repo: Path, agent_dir: Path
) -> None:
    """While a restore runs (its journal's owner alive, here a thread of this process), the
    undo another engine of the same session offers is the recorded one, never a recovery of
    that restore; once it is recorded, the undo is that restore's."""
    agent = Agent.start(repo, agent_dir)
    for n in range(3):
        (repo / f"f{n}.txt").write_text("v1\n")
    first, _ = agent.prompt("one")
    for n in range(3):
        (repo / f"f{n}.txt").write_text("v2\n")
    agent.prompt("two")
    target = agent.engine.resolve_point(first)
    assert target is not None

    from ledger.engine import operations
    from ledger.engine.undo_target import find_undo

    reached, go_on = threading.Event(), threading.Event()

    def pause(step: str) -> None:
        if step == "after-delete":
            reached.set()
            assert go_on.wait(30)

    agent.engine.restore_fault = pause
    worker = threading.Thread(target=operations.restore, args=(agent.engine, first, "files"))
    worker.start()
    try:
        assert reached.wait(30)
        other = agent.resume().engine
        assert find_undo(other) is None, "a running restore is not an interrupted one"
        (journal,) = open_journals(GitRepo.discover(repo))[0]
        assert journal.owner_alive()
    finally:
        go_on.set()
        worker.join(30)
    found = find_undo(agent.resume().engine)
    assert found is not None and found.interrupted is None and found.snapshot == journal.undo


def test_the_undo_of_an_interrupted_restore_is_offered_as_an_undo_not_a_redo(
    monkeypatch: pytest.MonkeyPatch, repo: Path, agent_dir: Path, closing: list[FakePi]
) -> None:
    """The branch's last recorded file action was an undo (a restore, then its undo); then a
    restore was killed. The list offers the undo of the killed restore, labelled as an undo
    (not "Redo"), and it brings back the files from before it, not the recorded swap."""
    dead, before, journal = killed_mid_restore(monkeypatch, repo, agent_dir, "rewind", swapped=True)
    pi = same_session(dead)
    closing.extend([dead, pi])
    offered = pi.event("rewind_list").result["list"]["undo"]
    assert offered["snapshot"] == journal.undo and offered["label"] == M.UNDO
    assert not offered["redo"]
    undo(pi, "rewind", first_user(pi))
    assert files(repo) == before
