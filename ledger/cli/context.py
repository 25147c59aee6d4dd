"""What every CLI command receives: parsed global options and the shared look-ups.

Why it exists: commands stay thin (parse, call the library, format). The context resolves the
repository and the agent dir once, and owns the two output channels: ``emit`` for results
(JSON with ``--json``, text otherwise) and ``warn`` for notices on stderr.

Invariants: commands never print directly; they call ``emit``/``emit_line``/``warn``. With
``--json``, stdout carries JSON only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from ledger.errors import LedgerError


@dataclass
class CliContext:
    repo_option: str | None
    agent_dir_option: str | None
    json: bool
    cwd: Path = field(default_factory=lambda: Path(os.getcwd()))
    stdout: IO[str] = field(default_factory=lambda: sys.stdout)
    stderr: IO[str] = field(default_factory=lambda: sys.stderr)
    _repo: Any = None

    # --- look-ups -------------------------------------------------------------------------

    def repo(self, *, near: Path | None = None) -> Any:
        """The git repository: ``--repo``, else the one containing the cwd, else ``near``.

        Returns a :class:`ledger.git.repo.GitRepo`; raises ``NotARepositoryError``.
        """
        if self._repo is not None:
            return self._repo
        from ledger.git.repo import GitRepo

        if self.repo_option is not None:
            self._repo = GitRepo.discover(Path(self.repo_option))
            return self._repo
        try:
            self._repo = GitRepo.discover(self.cwd)
        except LedgerError:
            if near is None:
                raise
            self._repo = GitRepo.discover(near)
        return self._repo

    def try_repo(self, *, near: Path | None = None) -> Any | None:
        try:
            return self.repo(near=near)
        except LedgerError:
            if self.repo_option is not None:
                raise
            return None

    def agent_dir(self) -> Path:
        from ledger.session.discovery import resolve_agent_dir

        return resolve_agent_dir(self.agent_dir_option)

    # --- output ---------------------------------------------------------------------------

    def emit(self, payload: Any, text: str | Callable[[], str]) -> None:
        """One result: ``payload`` as one JSON object with ``--json``, else ``text``."""
        if self.json:
            self.stdout.write(dumps(payload) + "\n")
        else:
            rendered = text() if callable(text) else text
            if rendered:
                self.stdout.write(rendered if rendered.endswith("\n") else rendered + "\n")

    def emit_line(self, payload: Any, text: str) -> None:
        """One of many results (JSON lines with ``--json``)."""
        self.emit(payload, text)

    def warn(self, message: str) -> None:
        self.stderr.write(f"warning: {message}\n")


def dumps(payload: Any) -> str:
    return orjson.dumps(payload, default=_default).decode("utf-8")


def _default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")
