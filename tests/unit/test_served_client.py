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


# --- the client's own light copies of the bridge's guesses (issue 34: no `socket`, `pathlib`
# or bridge module on a served command's path) give the same answers as the originals ---------


def _layouts(tmp_path: Path) -> list[Path]:
    """Starting points of every kind: a work tree and a subdirectory of it, a `.git` file (a
    linked work tree), a broken `.git` file, a directory outside any repository."""
    plain = tmp_path / "plain"
    (plain / ".git").mkdir(parents=True)
    (plain / "a" / "b").mkdir(parents=True)
    linked = tmp_path / "linked"
    (linked / "sub").mkdir(parents=True)
    (tmp_path / "gitdirs" / "linked").mkdir(parents=True)
    (linked / ".git").write_text("gitdir: ../gitdirs/linked\n")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / ".git").write_text("not a gitdir line\n")
    alias = tmp_path / "alias"
    alias.symlink_to(plain / "a")
    outside = tmp_path / "outside"
    outside.mkdir()
    return [plain, plain / "a" / "b", linked / "sub", broken, alias, outside]


def test_the_client_guesses_the_repository_as_the_snapshot_client_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.bridge import snapshot_socket

    for name in snapshot_socket._DISCOVERY_ENV:
        monkeypatch.delenv(name, raising=False)
    assert served._DISCOVERY_ENV == snapshot_socket._DISCOVERY_ENV
    for start in _layouts(tmp_path):
        theirs = snapshot_socket.find_repository(start)
        expected = None if theirs is None else (str(theirs[0]), str(theirs[1]))
        if start.name != "outside":  # outside: whatever tmp_path's parents hold, the same
            assert expected is not None or start.name == "broken", start
        assert served.find_repository(str(start)) == expected, start
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "plain" / ".git"))
    assert served.find_repository(str(tmp_path / "plain")) is None


def test_the_client_needs_the_peer_credentials_the_watcher_needs() -> None:
    from ledger.facilities import facilities

    assert served.supported() == facilities().peer_credentials


def test_the_client_connects_only_to_this_users_socket_in_a_private_directory(
    tmp_path: Path,
) -> None:
    """The checks of :func:`ledger.bridge.private_socket.connect_private`, on a bare socket: a
    listening socket of this user's in a private directory is reached (whatever the length of
    its path); one in a directory others may write, a file that is no socket and a missing
    socket are not."""
    from ledger.bridge.private_socket import listen_private

    if not served.supported():
        pytest.skip("no peer credentials here: commands are never served")
    short = tmp_path / "p"
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    for private in (short, deep):
        private.mkdir(parents=True, mode=0o700)
        listener = listen_private(private / "bridge.sock")
        try:
            conn = served.connect_private(str(private / "bridge.sock"), 2.0)
            assert conn is not None
            accepted, _ = listener.accept()
            conn.sendall(b"hi\n")
            assert accepted.recv(3) == b"hi\n"
            accepted.close()
            conn.close()
            private.chmod(0o777)
            assert served.connect_private(str(private / "bridge.sock"), 2.0) is None
            private.chmod(0o700)
        finally:
            listener.close()
    (short / "plain").write_text("")
    assert served.connect_private(str(short / "plain"), 2.0) is None
    assert served.connect_private(str(short / "absent.sock"), 2.0) is None
    assert served.connect_private(str(tmp_path / "none" / "bridge.sock"), 2.0) is None


def test_the_package_spells_the_spawned_bridges_command_line_as_the_parser_does() -> None:
    import ledger.cli
    from ledger.cli.app import SERVE_STDIO

    assert SERVE_STDIO == ledger.cli._SERVE_STDIO_WORDS


def test_a_served_command_imports_nothing_but_the_client_before_it_is_declined(repo: Path) -> None:
    """What the ``rewind`` script imports (``ledger.cli``) and the client up to the watcher's
    answer: no parser, no bridge module but the environment's rule, no socket module."""
    code = (
        "import sys; before = set(sys.modules); import ledger.cli; "
        "from ledger.cli.served import run_by_watcher; r = run_by_watcher(['status', '@']); "
        "print(r, sorted(m for m in set(sys.modules) - before "
        "if m.startswith('ledger') or m in ('argparse', 'socket', 'threading', 'selectors')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    ).stdout.strip()
    assert out == (
        "None ['ledger', 'ledger.bridge', 'ledger.bridge.session_env', 'ledger.cli', "
        "'ledger.cli.served']"
    )
