"""The command line's client of the watcher decides, before importing anything of ours but the
standard library, which commands to ask the watcher to run (ledger/cli/served.py)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.cli import served
from tests.gitkit import ROOT


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["restore", "@", "abc", "--yes"], ("restore", None)),
        (["--json", "status", "@"], ("status", None)),
        (["--repo", "/x", "diff", "@", "e"], ("diff", "/x")),
        (["--repo=/y", "--agent-dir", "/a", "undo", "@"], ("undo", "/y")),
        (["--agent-dir=/a", "status"], ("status", None)),
        (["--agent", "/a", "status"], (None, None)),  # abbreviated: the parser decides, here
        (["--version"], (None, None)),
        (["--repo"], (None, None)),
        ([], (None, None)),
    ],
)
def test_the_command_is_found_as_the_parser_finds_it_or_not_guessed(
    argv: list[str], expected: tuple[str | None, str | None]
) -> None:
    assert served.command_of(argv) == expected


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_only_served_commands_without_a_question_or_help_are_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REWIND_SERVED", raising=False)
    monkeypatch.setattr(sys, "stdin", _Tty())
    monkeypatch.setattr(sys, "stderr", _Tty())
    assert served.wanted(["restore", "@", "e"]) is None  # it will ask: answered here
    assert served.wanted(["undo", "@"]) is None
    assert served.wanted(["restore", "@", "e", "-y"]) is not None
    assert served.wanted(["restore", "@", "e", "--dry-run"]) is not None
    assert served.wanted(["status", "@"]) is not None  # never asks
    assert served.wanted(["status", "--help"]) is None
    assert served.wanted(["log", "@"]) is None
    assert served.wanted(["fork", "@", "e", "--yes"]) is None
    monkeypatch.setattr(sys, "stdin", io.StringIO())  # not a terminal: no question either way
    assert served.wanted(["undo", "@"]) is not None
    monkeypatch.setenv("REWIND_SERVED", "0")
    assert served.wanted(["status", "@"]) is None


def test_the_umask_is_read_without_being_changed() -> None:
    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc here: commands are never served (no umask to compare)")
    code = (
        "import os; from ledger.cli.served import current_umask; "
        "os.umask(0o027); print(oct(current_umask())); print(oct(os.umask(0)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT)},
    ).stdout.split()
    assert out == ["0o27", "0o27"]


def test_the_client_imports_only_the_standard_library_until_it_is_declined(repo: Path) -> None:
    """A repository without a watcher: the client finds it, nobody listens, and ``rewind
    status`` runs here; before that, nothing heavy was loaded (what a served command's client
    pays is interpreter start-up only)."""
    code = (
        "import sys; from ledger.cli.served import run_by_watcher; "
        "r = run_by_watcher(['status', '@']); "
        "print(r, sorted(m for m in ('pygit2', 'orjson', 'pydantic', 'ledger.engine', "
        "'ledger.git.repo') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    ).stdout.strip()
    assert out == "None []"
