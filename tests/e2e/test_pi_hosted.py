"""The real Pi with its sessions hosted by the repository's watcher (docs/capture.md#hosted-sessions):
no bridge process per run, the same records as a bridge of its own, and a session that goes on
with its own bridge when the watcher is gone or declines it.

Which side served a session is seen from outside, as a user would: the bridge command is a
wrapper that logs each start of a bridge process, so a hosted session leaves no line there.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.ledgerview import LedgerView
from ledger.records import TURN
from ledger.session.store import read_session
from tests.e2e.pikit import PiRunner, RpcPi, pi_env, turns, write
from tests.e2e.test_pi_print_mode import AFTER_EACH_ASSISTANT, files_at, three_prompts
from tests.gitkit import ROOT
from tests.watchkit import stop_watch, watch

pytestmark = pytest.mark.needs("peer_credentials")


class CountedRunner(PiRunner):
    """``pi -p`` runs whose bridge processes are counted (one line each in ``log``)."""

    def __init__(self, cli: Path, repo: Path, agent_dir: Path, log: Path) -> None:
        super().__init__(cli, repo, agent_dir)
        self.log = log
        script = f'echo started >> {log}; exec "$0" -m ledger serve --stdio'
        self.env = {
            "REWIND_BRIDGE_CMD": json.dumps(["sh", "-c", script, sys.executable]),
            "PYTHONPATH": str(ROOT),
            "REWIND_FEED_VERIFY": "0",
        }

    def run(self, prompt: str, *extra: str, timeout: float = 180, env=None):  # type: ignore[no-untyped-def]
        return super().run(prompt, *extra, timeout=timeout, env={**self.env, **(env or {})})

    def full_env(self) -> dict[str, str]:
        return {**pi_env(self.agent_dir), **self.env}

    def bridges_started(self) -> int:
        return self.log.read_text().count("started") if self.log.exists() else 0


@pytest.fixture
def counted(pi_cli: Path, project: Path, agent_dir: Path, tmp_path: Path) -> CountedRunner:
    return CountedRunner(pi_cli, project, agent_dir, tmp_path / "bridges.log")


@pytest.fixture
def watcher(counted: CountedRunner, project: Path) -> Iterator[subprocess.Popen[str]]:
    """The repository's watcher, in the environment Pi's runs have (so it hosts them)."""
    with watch(project, env=counted.full_env()) as proc:
        yield proc


def turn_records(path: Path, expected: int) -> int:
    """rewind-turn records once ``expected`` is reached or 5 s have passed (Pi reports idle
    before its extension queue has run the prompt's last events)."""
    deadline = time.monotonic() + 5
    while True:
        count = sum(1 for e in read_session(path).entries if e.custom_type == TURN)
        if count >= expected or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def test_hosted_print_runs_record_each_prompt_exactly_as_an_own_bridge_does(
    counted: CountedRunner, watcher: subprocess.Popen[str]
) -> None:
    three_prompts(counted)
    assert counted.bridges_started() == 0, "every run was hosted: no bridge process started"
    (path,) = counted.sessions()
    session = read_session(path)
    assert sum(1 for e in session.entries if e.custom_type == TURN) == 3
    view = LedgerView.of(session)
    assistants = [e.id for e in session.entries if e.type == "message" and e.role == "assistant"]
    # The same snapshots as the test of print mode with a bridge of its own asserts.
    assert [files_at(counted.repo, view.entry_to_commit[a]) for a in assistants] == (
        AFTER_EACH_ASSISTANT
    )
    assert "hosted 3 Pi sessions" in stop_watch(watcher)


def test_the_run_that_starts_the_shared_watcher_has_its_own_bridge_and_later_runs_are_hosted(
    counted: CountedRunner, agent_dir: Path, project: Path
) -> None:
    # Long enough that a loaded machine starts the next Pi before the idle watcher ends (at 5 s
    # a CI-like run with benchmarks beside it once started a second bridge).
    rewind = {"snapshot": {"autoWatchSeconds": 15}}
    (agent_dir / "settings.json").write_text(json.dumps({"rewind": rewind}))
    socket = project / ".git" / "pi-rewind" / "bridge.sock"
    counted.run("one " + turns([write("a.txt", "1\n")]))
    assert counted.bridges_started() == 1
    deadline = time.monotonic() + 30
    while not socket.exists():
        assert time.monotonic() < deadline, "the shared watcher never listened"
        time.sleep(0.05)
    counted.run("two " + turns([write("b.txt", "2\n")]))
    counted.run("three " + turns([write("c.txt", "3\n")]))
    assert counted.bridges_started() == 1, "the runs after the first were hosted"
    paths = counted.sessions()
    assert len(paths) == 3
    assert [turn_records(p, 1) for p in paths] == [1, 1, 1]
    # Idle for autoWatchSeconds with no session connected: the watcher ends, its socket with it.
    deadline = time.monotonic() + 45
    while socket.exists():
        assert time.monotonic() < deadline, "the idle watcher did not end"
        time.sleep(0.1)


def test_a_session_goes_on_with_its_own_bridge_when_the_watcher_hosting_it_is_killed(
    counted: CountedRunner, watcher: subprocess.Popen[str], pi_cli: Path, project: Path
) -> None:
    rpc = RpcPi(pi_cli, project, counted.agent_dir, env=counted.env)
    try:
        rpc.prompt("one " + turns([write("a.txt", "1\n")]))
        (path,) = counted.sessions()
        assert turn_records(path, 1) == 1
        assert counted.bridges_started() == 0
        watcher.send_signal(signal.SIGKILL)
        watcher.communicate(timeout=30)
        rpc.prompt("two " + turns([write("b.txt", "2\n")]))
        assert turn_records(path, 2) == 2, "the prompt after the watcher died is recorded"
        assert counted.bridges_started() == 1
        view = LedgerView.of(read_session(path))
        users = [
            e.id for e in read_session(path).entries if e.type == "message" and e.role == "user"
        ]
        assert "a.txt" in files_at(project, view.entry_to_commit[users[1]])
    finally:
        rpc.close()


def test_a_session_in_another_environment_is_declined_and_starts_its_own_bridge(
    counted: CountedRunner, watcher: subprocess.Popen[str]
) -> None:
    counted.run("one " + turns([write("a.txt", "1\n")]), env={"REWIND_SOMETHING": "else"})
    assert counted.bridges_started() == 1
    (path,) = counted.sessions()
    assert turn_records(path, 1) == 1
    assert "another environment: 1" in stop_watch(watcher)


def test_a_hosted_interactive_session_shows_the_footer_and_restores_after_the_redraw(
    start_tui, project: Path, agent_dir: Path, tmp_path: Path
) -> None:
    """What a user sees in the real interactive Pi (tmux) is the same when the watcher hosts
    the session: the footer, the /tree menu, the restore's notices after Pi's redraw."""
    from ledger.engine import messages as M
    from tests.e2e.pikit import open_tree
    from tests.e2e.test_pi_interactive import AFTER_FIRST, files, two_prompts

    counted = CountedRunner(Path(), project, agent_dir, tmp_path / "bridges.log")
    with watch(project, env=counted.full_env()) as watcher:
        tui = start_tui(env=counted.env)
        two_prompts(tui, project, agent_dir)  # waits for "◆ 6 points" on the screen
        open_tree(tui, "second")
        tui.choose(M.MENU_TITLE, M.TREE_RESTORE)
        screen = tui.wait_for("Navigated to selected point", "Rewind: files restored to user")
        assert M.UNDO_HINT in screen
        assert files(project) == AFTER_FIRST
        tui.wait_for("◆ 3 points")
        assert counted.bridges_started() == 0, "hosted: no bridge process was started"
        tui.close()
        assert "hosted 1 Pi sessions" in stop_watch(watcher)
