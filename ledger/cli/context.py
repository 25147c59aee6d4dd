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
from pathlib import Path

from ledger.errors import LedgerError

# Not `from typing import TYPE_CHECKING`: importing typing alone costs ~5 ms of start-up, and
# mypy treats this spelling the same way (docs/capture.md#start-up).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Any

    from ledger.git.repo import GitRepo


class CliContext:
    """Global options and the output channels of one CLI invocation.

    A plain class rather than a dataclass: ``dataclasses`` costs milliseconds at start-up.
    """

    def __init__(
        self,
        repo_option: str | None,
        agent_dir_option: str | None,
        json: bool,
        cwd: Path | None = None,
        stdout: IO[str] | None = None,
        stderr: IO[str] | None = None,
    ) -> None:
        self.repo_option = repo_option
        self.agent_dir_option = agent_dir_option
        self.json = json
        self.cwd = cwd if cwd is not None else Path(os.getcwd())
        self._cwd_given = cwd is not None
        self.stdout: IO[str] = stdout if stdout is not None else sys.stdout
        self.stderr: IO[str] = stderr if stderr is not None else sys.stderr
        self._repo: GitRepo | None = None

    # --- look-ups -------------------------------------------------------------------------

    def repo(self, *, near: Path | None = None) -> GitRepo:
        """The git repository: ``--repo``, else the one containing the cwd, else ``near``.

        Raises ``NotARepositoryError``.
        """
        if self._repo is not None:
            return self._repo
        from ledger.git.repo import GitRepo

        if self.repo_option is not None:
            repo = GitRepo.discover(self.cwd / self.repo_option)
        else:
            try:
                repo = GitRepo.discover(self.cwd)
            except LedgerError:
                if near is None:
                    raise
                repo = GitRepo.discover(near)
        self._repo = repo
        return repo

    def try_repo(self, *, near: Path | None = None) -> GitRepo | None:
        try:
            return self.repo(near=near)
        except LedgerError:
            if self.repo_option is not None:
                raise
            return None

    def agent_dir(self) -> Path:
        from ledger.session.discovery import resolve_agent_dir

        option = self.agent_dir_option
        return resolve_agent_dir(str(self.path(option)) if option else None)

    def path(self, value: str | os.PathLike[str]) -> Path:
        """A path argument as the user meant it: relative paths are relative to ``cwd``.

        Without an explicit ``cwd`` a relative path stays relative (it means the same thing),
        so messages echo the path as the user typed it."""
        path = Path(value).expanduser()
        return self.cwd / path if self._cwd_given else path

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
    import orjson  # here, not at module level: only commands that print JSON pay for it

    return orjson.dumps(payload, default=_default).decode("utf-8")


def _default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")
