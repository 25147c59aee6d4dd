"""The error hierarchy of rewind-ledger.

Why it exists: the library never prints. Every failure a user can cause or meet is raised as a
subclass of :class:`LedgerError` carrying the values a person needs to act on it (the path, the
session, the entry, the candidates). Only the CLI turns these into ``error: …`` / ``hint: …``
lines and exit codes, so the same errors serve a running agent that shows them its own way.

Invariants:
- ``str(err)`` is a one-line, human-readable message with no traceback material.
- ``err.hint`` is a short suggestion or ``None``.
- An operation that raises a ``LedgerError`` has changed nothing (operations that must roll back
  do so before raising).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class LedgerError(Exception):
    """Root of every error rewind-ledger raises on purpose."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else type(self).__name__


# --- session files ------------------------------------------------------------------------


class SessionFileError(LedgerError):
    """A session file cannot be used: missing, a directory, unreadable, or without a header."""

    def __init__(self, path: Path | str, reason: str, *, hint: str | None = None) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}", hint=hint)


class SessionAppendError(SessionFileError):
    """Appending to a session file failed; nothing was written."""


# --- names on the command line or in the API ----------------------------------------------


class NameResolutionError(LedgerError):
    """A SESSION or ENTRY name matched nothing, or more than one thing."""

    def __init__(
        self,
        kind: str,
        name: str,
        candidates: Sequence[str],
        *,
        ambiguous: bool,
        scope: str | None = None,
    ) -> None:
        self.kind = kind
        self.name = name
        self.candidates = list(candidates)
        self.ambiguous = ambiguous
        self.scope = scope
        where = f" in {scope}" if scope else ""
        if ambiguous:
            message = f"{kind} name {name!r} is ambiguous{where}: it matches {len(self.candidates)}"
            hint = "use a longer prefix; candidates: " + ", ".join(self.candidates[:10])
        else:
            message = f"no {kind} matches {name!r}{where}"
            if self.candidates:
                shown = ", ".join(self.candidates[:10])
                more = f" (and {len(self.candidates) - 10} more)" if len(self.candidates) > 10 else ""
                hint = f"known {kind}s: {shown}{more}"
            else:
                hint = f"there are no {kind}s to choose from"
        super().__init__(message, hint=hint)


# --- git ----------------------------------------------------------------------------------


class NotARepositoryError(LedgerError):
    """The directory is not inside a git work tree."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        super().__init__(
            f"{self.path} is not inside a git repository",
            hint="run inside a git work tree or pass --repo DIR",
        )


class GitError(LedgerError):
    """A git operation failed. ``operation`` names it; ``detail`` is git's own message."""

    def __init__(self, operation: str, detail: str, *, hint: str | None = None) -> None:
        self.operation = operation
        self.detail = detail.strip()
        super().__init__(f"{operation} failed: {self.detail}" if self.detail else f"{operation} failed", hint=hint)


class DirtySubmoduleError(GitError):
    """A submodule (or embedded repository) has uncommitted changes; capture refuses it."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            "snapshot",
            f"dirty submodule: {path}",
            hint=f"commit or stash the changes inside {path}, then try again",
        )


class StoreUpdateError(GitError):
    """``refs/pi-rewind/store`` could not be updated after the bounded retries."""


class MissingCommitError(LedgerError):
    """A snapshot commit named by the ledger is not in the object database (pruned)."""

    def __init__(self, sha: str, *, entry: str | None = None) -> None:
        self.sha = sha
        self.entry = entry
        where = f" (bound to entry {entry})" if entry else ""
        super().__init__(
            f"snapshot {sha[:12]}{where} is missing from the repository",
            hint="it was probably pruned by git gc; choose another rewind point",
        )


# --- restore ------------------------------------------------------------------------------


class UnsafeRestoreError(LedgerError):
    """A restore was refused before anything changed (hostile tree, submodule change, …)."""

    def __init__(self, reason: str, paths: Sequence[str] = (), *, hint: str | None = None) -> None:
        self.reason = reason
        self.paths = list(paths)
        shown = ", ".join(self.paths[:5]) + (f" (and {len(self.paths) - 5} more)" if len(self.paths) > 5 else "")
        super().__init__(f"restore refused: {reason}" + (f": {shown}" if shown else ""),
                         hint=hint or "nothing was changed; choose another rewind point")


class RestoreFailedError(LedgerError):
    """A restore failed part-way and the work tree was rolled back to the state before it."""

    def __init__(self, detail: str, *, rolled_back_to: str | None, hint: str | None = None) -> None:
        self.detail = detail
        self.rolled_back_to = rolled_back_to
        where = f" (work tree restored to {rolled_back_to[:12]})" if rolled_back_to else ""
        super().__init__(f"restore failed: {detail}{where}",
                         hint=hint or "your files are as they were before the restore; nothing was recorded")


class NoRewindPointError(LedgerError):
    """The entry has no exact rewind point (none bound through lineage, or its commit is pruned)."""

    def __init__(self, entry: str, *, reason: str | None = None, hint: str | None = None) -> None:
        self.entry = entry
        super().__init__(f"entry {entry} has no exact rewind point" + (f" ({reason})" if reason else ""),
                         hint=hint or "see 'rewind tree SESSION' for the entries marked ◆")


class NothingToUndoError(LedgerError):
    """No file rewind on this branch has an undo point (or its commit was pruned)."""

    def __init__(self, session: str, *, reason: str | None = None) -> None:
        self.session = session
        super().__init__(f"nothing to undo in session {session}" + (f" ({reason})" if reason else ""),
                         hint="an undo point exists after a restore that changed files")


__all__ = [
    "NothingToUndoError",
    "NoRewindPointError",
    "RestoreFailedError",
    "UnsafeRestoreError",
    "DirtySubmoduleError",
    "GitError",
    "LedgerError",
    "MissingCommitError",
    "NameResolutionError",
    "NotARepositoryError",
    "SessionAppendError",
    "SessionFileError",
    "StoreUpdateError",
]
