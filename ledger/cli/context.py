"""What every CLI command receives: parsed global options and the shared look-ups.

Why it exists: commands stay thin (parse, call the library, format). The context resolves the
repository and the agent dir once, and owns the two output channels: ``emit`` for results
(JSON with ``--json``, text otherwise) and ``warn`` for notices on stderr.

Invariants: commands never print directly; they call ``emit``/``emit_line``/``warn``. With
``--json``, stdout carries JSON only, and it is always valid UTF-8 whatever the file names:
paths are ``str`` decoded with ``surrogateescape`` (the raw bytes of a name that is not UTF-8
survive as lone surrogates), which no JSON encoder accepts. :func:`json_safe` writes such a
string as git quotes it (C-style, ``core.quotePath``'s default: ``"caf\\351.txt"``) and adds
its exact bytes, base64, under the same key plus ``Bytes`` (``path`` → ``pathBytes``; for a
list, a parallel list with ``null`` for the strings that needed nothing). Only when needed, and
only on that path: a payload without such a string is encoded once, untouched. Text output
writes such bytes back as they were (``surrogateescape``), as git does with
``core.quotePath=false``.
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
    from ledger.git.shadow.open import OpenedWorkTree


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
        served: bool = False,
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
        self.own_process = False
        """A real ``rewind`` process (not ``main()`` called by a program, the demo or a test):
        only then may a command leave a watcher running in the background."""
        self.served = served
        """Run by the repository's watcher for a client (:mod:`ledger.bridge.served_commands`):
        where the command would wait, it raises :class:`RunLocally` instead."""

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
        from ledger.git.shadow.open import open_work_tree
        from ledger.git.shadow.upkeep import migrate_if_needed

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
            pending = None
            if self.served:  # the watcher keeps what it opened while discovery's files stay
                from ledger.cli import served_repos

                held = served_repos.kept(start, self.agent_dir())
                if held is not None and not isinstance(held, served_repos.Pending):
                    opened = _reopened(held, self.agent_dir(), writer)
                    break
                pending = held
            try:
                opened = open_work_tree(start, self.agent_dir(), create=False, migrate=writer)
                if pending is not None and not opened.notices:
                    served_repos.keep(pending, opened.repo)
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
                if not rendered.isascii():
                    tolerate_raw_bytes(self.stdout)
                self.stdout.write(rendered if rendered.endswith("\n") else rendered + "\n")

    def emit_line(self, payload: Any, text: str) -> None:
        """One of many results (JSON lines with ``--json``)."""
        self.emit(payload, text)

    def warn(self, message: str) -> None:
        self.stderr.write(f"warning: {message}\n")


class RunLocally(BaseException):
    """A command run by the watcher would wait here (for another session's turn, a running
    restore): it stops before changing anything and the client runs it in its own process,
    where the wait is shown and Ctrl-C cancels it. A ``BaseException``: no handler of
    ``Exception`` may turn it into an error report."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _reopened(repo: GitRepo, agent_dir: Path, writer: bool) -> OpenedWorkTree:
    """A kept repository as :func:`~ledger.git.shadow.open.open_work_tree` would open it again:
    for a writer, with the shadow migration check it makes (:mod:`ledger.cli.served_repos`)."""
    from ledger.git.shadow.open import OpenedWorkTree
    from ledger.git.shadow.upkeep import migrate_if_needed

    return OpenedWorkTree(repo, migrate_if_needed(repo, agent_dir) if writer else [])


def tolerate_raw_bytes(stream: IO[str]) -> None:
    """Let ``stream`` write strings holding raw bytes (lone surrogates) back as those bytes."""
    reconfigure = getattr(stream, "reconfigure", None)  # io.TextIOWrapper's; a pipe may lack it
    if reconfigure is not None and getattr(stream, "errors", None) != "surrogateescape":
        try:
            reconfigure(errors="surrogateescape")
        except (ValueError, OSError):
            pass


def dumps(payload: Any) -> str:
    import orjson  # here, not at module level: only commands that print JSON pay for it

    try:
        return orjson.dumps(payload, default=_default).decode("utf-8")
    except TypeError:  # orjson.JSONEncodeError: e.g. "str is not valid UTF-8: surrogates"
        safe, changed = json_safe(payload)
        if not changed:
            raise
        return orjson.dumps(safe, default=_default).decode("utf-8")


def dumps_small(payload: Any) -> str:
    import json

    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if not text.isascii() and not _is_utf8(text):
        text = json.dumps(json_safe(payload)[0], ensure_ascii=False, separators=(",", ":"))
    return text


def _is_utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def raw_bytes(value: str) -> bytes:
    """The bytes a ``surrogateescape``-decoded string came from (a lone surrogate that is no
    escaped byte, from a JSON ``\\udXXX`` escape, as its WTF-8 bytes)."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")


def git_quote(value: str | bytes) -> str:
    """git's C-style quoting of a path (``quote_c_style`` with ``core.quotePath`` on, its
    default): :func:`ledger.quoting.quote_c_style`."""
    from ledger.quoting import quote_c_style

    return quote_c_style(raw_bytes(value) if isinstance(value, str) else value)


def display_path(path: str) -> str:
    """A path for a text line, as every message shows one (:func:`ledger.quoting.display_name`):
    as it is when it is printable UTF-8 without ``"`` or ``\\``, else as git quotes it (so a
    newline or a raw byte can never break or forge a line, and ``status`` agrees with ``restore``
    and ``diff``)."""
    from ledger.quoting import display_name

    return display_name(path)


def json_safe(value: Any) -> tuple[Any, bool]:
    """``value`` with every string that is not valid UTF-8 git-quoted, its bytes added under
    ``<key>Bytes`` (base64), see the module; and whether anything changed."""
    if isinstance(value, str):
        return (value, False) if value.isascii() or _is_utf8(value) else (git_quote(value), True)
    if isinstance(value, Path):
        return json_safe(str(value))
    if hasattr(value, "model_dump"):
        return json_safe(value.model_dump(mode="json"))
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        changed = False
        for key, item in value.items():
            if isinstance(key, str):
                key, key_changed = json_safe(key)
                changed |= key_changed
            safe, item_changed, raw = _with_raw(item)
            out[key] = safe
            if raw is not None and isinstance(key, str) and f"{key}Bytes" not in value:
                out[f"{key}Bytes"] = raw
            changed |= item_changed
        return out, changed
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        pairs = [json_safe(item) for item in items]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    return value, False


def _with_raw(item: Any) -> tuple[Any, bool, Any]:
    """``json_safe(item)`` and the raw-bytes field for it (``None``: none needed)."""
    import base64

    if isinstance(item, Path):
        item = str(item)
    if isinstance(item, str):
        safe, changed = json_safe(item)
        return safe, changed, base64.b64encode(raw_bytes(item)).decode() if changed else None
    if isinstance(item, (list, tuple)) and any(isinstance(i, (str, Path)) for i in item):
        texts = [str(i) if isinstance(i, Path) else i for i in item]
        safe_items = [json_safe(i) for i in texts]
        raws = [
            base64.b64encode(raw_bytes(t)).decode() if isinstance(t, str) and c else None
            for t, (_, c) in zip(texts, safe_items)
        ]
        changed = any(c for _, c in safe_items)
        return [s for s, _ in safe_items], changed, raws if changed else None
    safe, changed = json_safe(item)
    return safe, changed, None


def _default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")
