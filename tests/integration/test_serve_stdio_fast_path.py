"""``rewind serve --stdio``, as Pi's extension spawns it, starts without the command-line parser
(issue 34: the spawned bridge answers ``session_start`` in ~100 ms; building the parser of 23
commands cost ~10 ms of it, asking a watcher whether it runs the command ~3 ms).

A launcher runs the real ``main()`` with ``sys.argv`` as the ``rewind`` script sees it, counts
the parser builds and records ``sys.modules`` when the first ``result`` is written.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from ledger.cli.app import SERVE_STDIO, _parse, _serve_stdio_args
from tests.bridgekit import FakePi
from tests.gitkit import ROOT

_LAUNCHER = """
import json, sys
out = sys.argv.pop(1)
import ledger.cli as cli
import ledger.cli.app as app
import ledger.bridge.server as server
builds = []
build = app.build_parser
def counted(*args, **kwargs):
    builds.append(1)
    return build(*args, **kwargs)
app.build_parser = counted
original = server.BridgeServer._send
def _send(self, message):
    if message.get("type") == "result" and not getattr(server, "_seen", False):
        server._seen = True
        with open(out, "w") as f:
            json.dump({"builds": len(builds), "modules": sorted(sys.modules)}, f)
    original(self, message)
server.BridgeServer._send = _send
sys.argv = ["rewind", *sys.argv[1:]]
sys.exit(cli.main())
"""


def _observed(cwd: Path, agent: Path, out: Path) -> FakePi:
    return FakePi(
        cwd, agent, bridge_argv=[sys.executable, "-c", _LAUNCHER, str(out), "serve", "--stdio"]
    )


def test_the_spawned_bridge_answers_without_building_the_parser_or_asking_a_watcher(
    repo: Path, isolated_env: Path, tmp_path: Path
) -> None:
    out = tmp_path / "seen.json"
    pi = _observed(repo, isolated_env / ".pi" / "agent", out)
    try:
        reply = pi.event("session_start", {"reason": "startup"})
        assert reply.error is None and reply.status == "◆ 0 points / 0 snapshots"
        seen = json.loads(out.read_text())
        assert "ledger.bridge.server" in seen["modules"]  # taken inside the bridge
        assert seen["builds"] == 0
        assert "ledger.cli.served" not in seen["modules"]
    finally:
        assert pi.close() == 0


def test_the_fast_path_namespace_is_the_one_the_parser_gives() -> None:
    assert vars(_serve_stdio_args()) == vars(_parse(list(SERVE_STDIO)))


def test_the_extension_spawns_exactly_the_fast_path_command_line() -> None:
    """Every argv the extension builds for its bridge ends in the fast path's words."""
    source = (ROOT / "tools" / "pi-extension" / "rewind-ledger.ts").read_text("utf-8")
    spawned = re.findall(r"argv: \[([^\]]*)\]", source)
    assert spawned
    for argv in spawned:
        words = [w.strip().strip('"') for w in argv.split(",")]
        assert tuple(words[-2:]) == SERVE_STDIO, argv


def test_other_command_lines_still_go_through_the_parser(tmp_path: Path) -> None:
    """``serve --stdio --json`` (or any other words) is parsed as before."""
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "serve", "--stdio", "--bogus"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 2 and "unrecognized arguments: --bogus" in proc.stderr
