"""Running the CLI in-process (fast) and as a real process (to see exactly what a user sees)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ledger.cli import main
from tests.gitkit import ROOT


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json_lines(self) -> list[dict]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


def run_cli(
    capsys: pytest.CaptureFixture[str], *args: str | Path, cwd: Path | None = None
) -> Result:
    capsys.readouterr()
    code = main([str(a) for a in args], cwd=cwd)
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def run_process(*args: str | Path, cwd: Path, stdin: str | None = None) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)
