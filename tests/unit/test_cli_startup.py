"""The CLI starts fast: each command imports only its own module, and the hot paths import no
pydantic (docs/capture.md#start-up)."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.cli import COMMANDS, build_parser
from tests.gitkit import ROOT


def _registered(module: str) -> dict[str, str | None]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    importlib.import_module(module).register(sub, argparse.ArgumentParser(add_help=False))
    helps = {action.dest: action.help for action in sub._choices_actions}
    return {name: helps.get(name) for name in sub.choices}


def test_the_command_table_lists_exactly_what_each_module_registers() -> None:
    by_module: dict[str, dict[str, str]] = {}
    for name, module, help_line in COMMANDS:
        by_module.setdefault(module, {})[name] = help_line
    for module, listed in by_module.items():
        assert _registered(module) == listed, module


def test_every_command_is_real_when_its_module_is_loaded_and_a_placeholder_otherwise() -> None:
    for name, _module, _help in COMMANDS:
        parser = build_parser([name])
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        assert callable(sub.choices[name].get_default("run")), name
        others = [n for n, m, _ in COMMANDS if m != _module]
        assert all(sub.choices[o].get_default("run") is None for o in others), name


def _modules_after(argv: list[str], cwd: Path) -> set[str]:
    script = (
        "import sys\n"
        "from ledger.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write('\\n'.join(sorted(sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        # No watcher left behind (main() called by a program starts none; and none is wanted).
        env={
            "PYTHONPATH": str(ROOT),
            "PATH": "/usr/bin:/bin",
            "HOME": str(cwd),
            "REWIND_AUTO_WATCH": "0",
        },
    )
    return set(proc.stderr.split("\n"))


def test_help_imports_no_command_module_and_no_heavy_library(tmp_path: Path) -> None:
    loaded = _modules_after(["--help"], tmp_path)
    assert not {"pydantic", "pygit2", "orjson", "typing", "dataclasses"} & loaded
    allowed = {"ledger.cli.app", "ledger.cli.context"}  # the parser itself, and its context
    assert not [m for m in loaded if m.startswith("ledger.cli.") and m not in allowed]


@pytest.mark.parametrize("command", ["snapshot", "log", "sessions", "status", "doctor"])
def test_hot_commands_import_no_pydantic(tmp_path: Path, command: str) -> None:
    if command not in {name for name, _, _ in COMMANDS}:
        pytest.skip(f"no '{command}' command in this build")
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    args = [command] if command in {"snapshot", "doctor"} else [command, "nosuchsession"]
    loaded = _modules_after(
        ["--repo", str(tmp_path / "r"), "--agent-dir", str(tmp_path), *args], tmp_path
    )
    assert "pydantic" not in loaded, command
