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
        self._repo_writer = False
        self.exit_without_teardown = False
        """Set by a command whose process has nothing left to finish when it returns (the
        bridge): ``main`` then ends the process without the interpreter's teardown."""

    # --- look-ups -------------------------------------------------------------------------

    def repo(
        self, *, near: Path | None = None, create: bool = False, migrate: bool = False
    ) -> GitRepo:
        """The repository: ``--repo``, else the one containing the cwd, else ``near``; outside
        git, the directory's shadow repository (docs/shadow.md).

        ``create``: a capturing command may create a shadow (only when neither place has a
        repository or a shadow; at ``near`` when given, the session's own directory);
        ``migrate``: a writing command may move a shadow's snapshots into a repository that
        appeared there (``git init``). Raises ``NotARepositoryError``.
        """
        from ledger.errors import NoShadowError
        from ledger.git.shadow import open_work_tree
        from ledger.git.shadow_upkeep import migrate_if_needed

        writer = create or migrate
        if self._repo is not None:
            if writer and not self._repo_writer:
                self._repo_writer = True
                for notice in migrate_if_needed(self._repo, self.agent_dir()):
                    self.warn(notice)
            return self._repo
        if self.repo_option is not None:
            starts = [self.cwd / self.repo_option]
        else:
            starts = [self.cwd] + ([near] if near is not None else [])
        error: LedgerError | None = None
        opened = None
        for start in starts:
            try:
                opened = open_work_tree(start, self.agent_dir(), create=False, migrate=writer)
                break
            except LedgerError as exc:
                error = exc
        if opened is None and create and isinstance(error, NoShadowError):
            opened = open_work_tree(starts[-1], self.agent_dir(), create=True)
        if opened is None:
            assert error is not None
            raise error
        for notice in opened.notices:
            self.warn(notice)
        self._repo, self._repo_writer = opened.repo, writer
        return self._repo

    def try_repo(self, *, near: Path | None = None) -> GitRepo | None:
        try:
            return self.repo(near=near)
        except LedgerError:
            if self.repo_option is not None:
                raise
            return None

    def agent_dir(self) -> Path:
        from ledger.session.agent_dir import resolve_agent_dir

        option = self.agent_dir_option
        return resolve_agent_dir(str(self.path(option)) if option else None)

    def path(self, value: str | os.PathLike[str]) -> Path:
        """A path argument as the user meant it: relative paths are relative to ``cwd``.

        Without an explicit ``cwd`` a relative path stays relative (it means the same thing),
        so messages echo the path as the user typed it."""
        path = Path(value).expanduser()
        return self.cwd / path if self._cwd_given else path

    # --- output ---------------------------------------------------------------------------

    def emit(self, payload: Any, text: str | Callable[[], str], *, small: bool = False) -> None:
        """One result: ``payload`` as one JSON object with ``--json``, else ``text``.

        ``small``: a few plain values (str, int, bool, short float, lists and dicts of them),
        encoded by the standard library: the same bytes as orjson for such values, without
        orjson's ~20 ms import (docs/capture.md#start-up)."""
        if self.json:
            self.stdout.write((dumps_small(payload) if small else dumps(payload)) + "\n")
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


def dumps_small(payload: Any) -> str:
    import json

    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")
