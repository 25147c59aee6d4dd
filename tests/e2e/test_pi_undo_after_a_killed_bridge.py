"""The real Pi 0.73.1 (``pi --mode rpc``): its bridge is killed with SIGKILL in the middle of a
restore (``/rewind files``), the extension restarts it, and "Undo last file rewind" inside Pi
(``/rewind undo``, then the ``/tree`` menu) brings back every byte, as ``rewind undo`` does
(docs/design.md#crash-safe-restore, issue 32 item 4).

The bridge is started through a wrapper that, the first time only, SIGKILLs itself when its
restore has deleted what it deletes and before it writes anything: the work tree is really
left mixed. The restarted bridge is the ordinary one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from ledger.engine import messages as M
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import open_journals
from ledger.session.store import read_session
from tests.e2e.pikit import RpcPi, turns, write
from tests.e2e.test_pi_rpc_session import wait_for

StartRpc = Callable[..., RpcPi]


def killed_once_at(step: str, marker: Path) -> dict[str, str]:
    """``REWIND_BRIDGE_CMD`` for a bridge that SIGKILLs itself at ``step`` of a restore, unless
    ``marker`` exists (it is written just before the kill: the restarted bridge lives)."""
    code = (
        "import os, signal, sys\n"
        f"marker = {str(marker)!r}\n"
        "if not os.path.exists(marker):\n"
        "    from ledger.git.restore.apply import Steps\n"
        "    original = Steps.reach\n"
        "    def reach(self, step):\n"
        f"        if step == {step!r}:\n"
        "            open(marker, 'w').close()\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "        return original(self, step)\n"
        "    Steps.reach = reach\n"
        "from ledger.cli import main\n"
        "sys.exit(main(['serve', '--stdio']))\n"
    )
    return {"REWIND_BRIDGE_CMD": json.dumps([sys.executable, "-c", code])}


def files(project: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(project)): p.read_bytes()
        for p in sorted(project.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(project).parts
    }


def test_undo_inside_pi_after_its_bridge_was_killed_mid_restore_brings_every_byte_back(
    start_rpc: StartRpc, project: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "killed"
    rpc = start_rpc(env=killed_once_at("after-delete", marker))
    rpc.prompt("first " + turns([write(f"f{n}.txt", f"one {n}\n") for n in range(12)]))
    rpc.prompt(
        "second "
        + turns(
            [write(f"f{n}.txt", f"two {n}\n") for n in range(8)]
            + [write(f"g{n}.txt", f"new {n}\n") for n in range(4)]
        )
    )
    path = Path(rpc.state()["sessionFile"])
    users = [e.id for e in read_session(path).entries if e.type == "message" and e.role == "user"]
    (project / "f0.txt").write_text("edited by hand\n")
    before = files(project)

    # /rewind's "files" action to the second prompt's point: g*.txt go, then the bridge dies.
    rpc.command({"type": "prompt", "message": f"/rewind files {users[1]}"})
    repo = GitRepo.discover(project)
    wait_for(
        lambda: marker.exists() and [j.owner_alive() for j in open_journals(repo)[0]] == [False],
        "the bridge to die in its restore",
    )
    (journal,) = open_journals(repo)[0]
    mixed = files(project)
    assert mixed != before and "g0.txt" not in mixed, "the kill landed after the deletions"

    # "Undo last file rewind" inside Pi: the restarted bridge finishes the interrupted restore.
    rpc.run_command("/rewind undo", M.FILES_RESTORED_BEFORE_REWIND, timeout=60)
    assert files(project) == before
    said = [text for level, text in rpc.notices if level == "warning" and "interrupted" in text]
    assert said and f'"{M.UNDO}" (in /rewind, /tree or /fork)' in said[0], said
    assert not [text for _, text in rpc.notices if "nothing to undo" in text]
    assert open_journals(GitRepo.discover(project)) == ([], [])

    # The recovery is recorded and undoable: /tree's menu offers the undo, and it swaps back.
    rpc.choices = [M.UNDO]
    rpc.run_command(f"/e2e-tree {users[0]}", "e2e-tree:", timeout=60)
    assert M.UNDO in rpc.menus[-1][1], rpc.menus[-1]
    assert files(project) == mixed
    rpc.choices = [M.UNDO]
    rpc.run_command(f"/e2e-tree {users[0]}", "e2e-tree:", timeout=60)
    assert files(project) == before
    assert journal.undo in read_session(path).entries[-1].raw["data"]["snapshots"]
