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

from ledger.quoting import display_name, display_names


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


def _plural(kind: str) -> str:
    """``entry`` → ``entries``, ``session`` → ``sessions``."""
    return kind[:-1] + "ies" if kind.endswith("y") and kind[-2:-1] not in "aeiou" else kind + "s"


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
                more = (
                    f" (and {len(self.candidates) - 10} more)" if len(self.candidates) > 10 else ""
                )
                hint = f"known {_plural(kind)}: {shown}{more}"
            else:
                hint = f"there are no {_plural(kind)} to choose from"
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


class UnsafeLayoutError(NotARepositoryError):
    """The repository's layout is one rewind refuses to work in (its git directory inside the
    work tree under another name than ``.git``, or a work tree that does not hold the directory
    rewind was started from): a capture would read, and a restore could delete, git's own files."""

    def __init__(
        self, path: Path | str, reason: str, *, root: Path | str, git_dir: Path | str
    ) -> None:
        self.reason = reason
        self.root = Path(root)
        self.git_dir = Path(git_dir)
        LedgerError.__init__(
            self,
            f"{Path(path)}: {reason} (work tree {self.root}, git dir {self.git_dir})",
            hint="rewind works in a work tree whose git directory is its .git or lies outside it; "
            "see 'git rev-parse --show-toplevel --absolute-git-dir'",
        )
        self.path = Path(path)


class GitError(LedgerError):
    """A git operation failed. ``operation`` names it; ``detail`` is git's own message."""

    def __init__(self, operation: str, detail: str, *, hint: str | None = None) -> None:
        self.operation = operation
        self.detail = detail.strip()
        super().__init__(
            f"{operation} failed: {self.detail}" if self.detail else f"{operation} failed",
            hint=hint,
        )


class DirtySubmoduleError(GitError):
    """A submodule (or embedded repository) has uncommitted changes; capture refuses it."""

    def __init__(self, path: str) -> None:
        self.path = path
        shown = display_name(path)
        super().__init__(
            "snapshot",
            f"dirty submodule: {shown}",
            hint=f"commit or stash the changes inside {shown}, then try again",
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
        """The paths, exact (``os.fsdecode`` of their bytes); the message quotes them as git
        does where needed (:func:`ledger.quoting.display_name`)."""
        shown = display_names(self.paths)
        super().__init__(
            f"restore refused: {reason}" + (f": {shown}" if shown else ""),
            hint=hint or "nothing was changed; choose another rewind point",
        )


class RestoreFailedError(LedgerError):
    """A restore failed part-way and the work tree was rolled back to the state before it."""

    def __init__(self, detail: str, *, rolled_back_to: str | None, hint: str | None = None) -> None:
        self.detail = detail
        self.rolled_back_to = rolled_back_to
        where = f" (work tree restored to {rolled_back_to[:12]})" if rolled_back_to else ""
        super().__init__(
            f"restore failed: {detail}{where}",
            hint=hint or "your files are as they were before the restore; nothing was recorded",
        )


class InterruptedRestoreError(LedgerError):
    """A restore of this repository was interrupted (killed, a full disk, a failed rollback): its
    journal is still open, so the work tree may be between two states. Its undo snapshot holds
    every byte from before that restore and is kept from sweeps until the journal is closed."""

    def __init__(
        self,
        undo: str,
        target: str,
        *,
        session: str | None,
        entry: str | None,
        started: str,
        state: str,
    ) -> None:
        self.undo = undo
        self.target = target
        self.session = session
        self.entry = entry
        self.state = state
        where = f" of session {session}" if session else ""
        # A done journal's files were all written and verified: only its record is missing, so
        # the tree is not between two states (saying so sent users to undo a complete restore).
        what = (
            "recorded: its files were written, but no record of it was found"
            if state == "done"
            else "finished: the work tree may be between two states"
        )
        super().__init__(
            f"a restore{where} (to {target[:12]}, started {started}) was interrupted before it was {what}",
            hint=f"'rewind undo {session or 'SESSION'}' brings back every file as it was before that restore "
            f"(snapshot {undo[:12]}); 'rewind doctor' shows the details",
        )


class RestoreRunningError(LedgerError):
    """Another process is restoring this repository right now (its restore journal's owner is
    alive): not an interruption. Raised when waiting for it took longer than rewind waits."""

    def __init__(
        self,
        pid: int,
        repository: Path | str,
        *,
        target: str | None = None,
        started: str | None = None,
        waited_s: float | None = None,
    ) -> None:
        self.pid = pid
        self.repository = Path(repository)
        self.target = target
        self.waited_s = waited_s
        what = f" (to {target[:12]}, started {started})" if target and started else ""
        waited = f"; it did not finish within {waited_s:.0f} s" if waited_s is not None else ""
        super().__init__(
            f"a restore is running (pid {pid}) in {self.repository}{what}{waited}",
            hint=f"nothing was changed; run the command again once it has finished ('rewind doctor' "
            f"shows it). If process {pid} hangs, stop it ('kill {pid}'); 'rewind doctor' then says "
            "whether 'rewind undo' is needed",
        )


class InsufficientSpaceError(LedgerError):
    """A restore needs more free space than the file system has; nothing was changed."""

    def __init__(self, path: Path | str, needed: int, available: int) -> None:
        self.path = Path(path)
        self.needed = needed
        self.available = available
        super().__init__(
            f"not enough free space under {self.path}: the restore writes {needed:,} bytes, {available:,} are free",
            hint="free some space and try again; nothing was changed",
        )


class LockTimeoutError(LedgerError):
    """A lock stayed held (or stale) for longer than rewind waits."""

    def __init__(self, lock: Path | str, age_s: float | None, *, remedy: str) -> None:
        self.lock = Path(lock)
        self.age_s = age_s
        age = f" (it is {age_s:.0f} s old)" if age_s is not None else ""
        super().__init__(f"timed out waiting for the lock {self.lock}{age}", hint=remedy)


class NoRewindPointError(LedgerError):
    """The entry has no exact rewind point (none bound through lineage, or its commit is pruned)."""

    def __init__(self, entry: str, *, reason: str | None = None, hint: str | None = None) -> None:
        self.entry = entry
        super().__init__(
            f"entry {entry} has no exact rewind point" + (f" ({reason})" if reason else ""),
            hint=hint or "see 'rewind tree SESSION' for the entries marked ◆",
        )


class PlanOutgrownError(UnsafeRestoreError):
    """A bounded restore (the agent's tool's) found, under its lock, files to change that its
    plan did not hold: they changed since (the user is at work). Nothing was written."""

    def __init__(self, paths: Sequence[str]) -> None:
        super().__init__(
            "files changed since the restore was planned",
            paths,
            hint="nothing was changed; plan the restore again",
        )


class UnknownPointError(LedgerError):
    """The agent's ``rewind`` tool was given a point that names no point of this conversation's
    branch (docs/pi.md#the-agents-rewind-tool)."""

    def __init__(self, ref: str, reason: str, hint: str) -> None:
        self.ref = ref
        super().__init__(f'no point "{ref}": {reason}', hint=hint)


class NothingToUndoError(LedgerError):
    """No file rewind on this branch has an undo point (or its commit was pruned)."""

    def __init__(self, session: str, *, reason: str | None = None) -> None:
        self.session = session
        super().__init__(
            f"nothing to undo in session {session}" + (f" ({reason})" if reason else ""),
            hint="an undo point exists after a restore that changed files",
        )


class NoStateBeforeError(LedgerError):
    """``rewind undo --to OP``: the operation has no state before it to go back to (it changed
    no file, so it recorded none) or that snapshot was pruned."""

    def __init__(self, operation: str, session: str, *, reason: str, hint: str) -> None:
        self.operation = operation
        self.session = session
        super().__init__(
            f"cannot undo to before operation {operation} of session {session}: {reason}",
            hint=hint,
        )


# --- review and portability ----------------------------------------------------------------


class CorruptArchiveError(LedgerError):
    """A session archive (or a remote's export) is truncated, corrupt or not an archive; nothing was written."""

    def __init__(self, reason: str, *, hint: str | None = None) -> None:
        self.reason = reason
        super().__init__(
            f"archive refused: {reason}",
            hint=hint or "nothing was written; export the session again with 'rewind export'",
        )


class HostileArchiveError(LedgerError):
    """A session archive holds something that could escape or is not a snapshot; nothing was written."""

    def __init__(self, reason: str, *, hint: str | None = None) -> None:
        self.reason = reason
        super().__init__(
            f"archive refused: {reason}",
            hint=hint or "nothing was written; only archives made by 'rewind export' are accepted",
        )


class ImportConflictError(LedgerError):
    """An imported session file would replace a different file already in the agent dir."""

    def __init__(self, path: Path | str, *, hint: str | None = None) -> None:
        self.path = Path(path)
        super().__init__(
            f"{self.path} already exists with other content",
            hint=hint or "nothing was written; move that file away to import this archive again",
        )


class UnrelatedRepositoryError(LedgerError):
    """An import whose archive comes from a repository that shares no history with this one:
    its snapshots are another project's files. Nothing was written."""

    def __init__(self, reason: str, *, repository: Path | str) -> None:
        self.reason = reason
        self.repository = Path(repository)
        super().__init__(
            f"import refused: {reason}",
            hint="nothing was written; import into a clone of that repository, or pass --force "
            "to import anyway",
        )


class WatchRefusedError(LedgerError):
    """``rewind serve --watch`` cannot serve ``path``: it is not a git work tree on Linux,
    another ``rewind serve`` already serves its snapshots, or its private dir is not safe for
    sockets (another user's, a symlink, writable by others)."""

    def __init__(self, path: Path | str, reason: str, *, hint: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}", hint=hint)


class CaptureIndexError(GitError):
    """The private capture index under ``<git-dir>/pi-rewind/`` cannot be written or read (a full
    disk, a read-only or unwritable git directory): nothing was captured."""

    def __init__(self, directory: Path | str, detail: str, *, no_space: bool = False) -> None:
        self.directory = Path(directory)
        self.no_space = no_space
        hint = (
            f"free some disk space on the file system holding {self.directory}, then try again"
            if no_space
            else f"check that {self.directory} is writable (permissions, read-only mount), then try again"
        )
        super().__init__(
            "snapshot", f"cannot use the capture index in {self.directory}: {detail}", hint=hint
        )


class CaptureTooLargeError(LedgerError):
    """A first capture (no private index yet) would add more untracked files or bytes than
    ``rewind.snapshot.firstCaptureMaxFiles`` / ``firstCaptureMaxBytes``: refused before any
    object was written (docs/design.md#first-capture-limits). ``biggest`` names the directories
    holding most of it, as ``(path, files, bytes)`` (``path`` ends with ``/``; ``./`` is the
    top level's own files)."""

    def __init__(
        self,
        root: Path | str,
        *,
        files: int,
        size: int,
        setting: str,
        limit: int,
        biggest: Sequence[tuple[str, int, int]],
        shadow: bool = False,
    ) -> None:
        self.root = Path(root)
        self.files = files
        self.size = size
        self.setting = setting
        self.limit = limit
        self.biggest = list(biggest)
        amount = self.amount
        shown = f"{limit:,} files" if setting.endswith("Files") else amount(limit)
        where = "; most of it in " + ", ".join(
            f"{display_name(path)} ({count:,} files, {amount(total)})"
            for path, count, total in biggest
        )
        exclude = (
            "add them to rewind.snapshot.shadowExcludes"
            if shadow
            else "ignore them in .gitignore or name them in rewind.snapshot.protectedDirs"
        )
        super().__init__(
            f"a first snapshot of {self.root} would add {files:,} untracked files "
            f"({amount(size)}), more than {setting} allows ({shown}){where if biggest else ''}",
            hint=f"nothing was written; {exclude} to leave them out, or raise {setting} "
            "(0 = no limit) if all of it belongs in every snapshot",
        )

    @staticmethod
    def amount(size: int) -> str:
        """``300 B``, ``12.0 KiB``, ``1.5 GiB``."""
        if size < 1024:
            return f"{size} B"
        value, unit = size / 1024, "KiB"
        for bigger in ("MiB", "GiB", "TiB"):
            if value < 1024:
                break
            value, unit = value / 1024, bigger
        return f"{value:.1f} {unit}"


class ShadowRefusedError(NotARepositoryError):
    """A directory outside any git repository that rewind will not keep snapshots for (``/``,
    the home directory, the agent dir's surroundings): a shadow repository there would capture
    far too much or itself (docs/shadow.md#refusals)."""

    def __init__(self, path: Path | str, reason: str, *, git_dir: Path | str | None = None) -> None:
        self.reason = reason
        self.git_dir = Path(git_dir) if git_dir is not None else None
        if self.git_dir is not None:
            # A git directory (bare, --separate-git-dir): git's own data, never a work tree.
            message = f"{Path(path)} is git's own data, not a work tree: {reason}"
            hint = (
                f"rewind snapshots work trees; run in a work tree of that repository (one "
                f"checked out with 'git --git-dir={self.git_dir} worktree add DIR', or a clone) "
                "or pass --repo with it"
            )
        else:
            message = (
                f"{Path(path)} is not inside a git repository, and rewind keeps no shadow "
                f"repository for it: {reason}"
            )
            hint = "run in a project directory (or a git work tree), or pass --repo DIR"
        LedgerError.__init__(self, message, hint=hint)
        self.path = Path(path)


class NoShadowError(NotARepositoryError):
    """A directory outside any git repository for which no snapshot was ever taken: it has no
    shadow repository yet, and read-only commands do not create one (docs/shadow.md)."""

    def __init__(self, path: Path | str) -> None:
        LedgerError.__init__(
            self,
            f"{Path(path)} is not inside a git repository and has no rewind snapshots yet",
            hint="run inside a git work tree or pass --repo DIR; 'rewind snapshot' there (or a Pi "
            "session with rewind-ledger) starts a shadow repository for it",
        )
        self.path = Path(path)


class AuthorshipIndexError(LedgerError):
    """The authorship index could not be written (it is rebuilt at its next use)."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(
            f"{self.path}: {reason}",
            hint="nothing of your files changed; the index is rebuilt from the sessions",
        )


class AlreadyRecoveredError(LedgerError):
    """The interrupted restore an undo chose was recovered (or recorded) since; nothing changed."""

    def __init__(self, target: str, started: str, *, by_pid: int | None = None) -> None:
        self.target, self.started, self.by_pid = target, started, by_pid
        by = f" by process {by_pid}" if by_pid else " (or found recorded) since this undo chose it"
        super().__init__(
            f"nothing to undo: the interrupted restore to {target[:12]} (started {started}) "
            f"was already recovered{by}",
            hint="nothing was changed; run the undo again: it now undoes what was recorded since "
            "(that recovery)",
        )


__all__ = [
    "AlreadyRecoveredError",
    "AuthorshipIndexError",
    "CaptureIndexError",
    "CaptureTooLargeError",
    "CorruptArchiveError",
    "DirtySubmoduleError",
    "GitError",
    "HostileArchiveError",
    "ImportConflictError",
    "InsufficientSpaceError",
    "InterruptedRestoreError",
    "LedgerError",
    "LockTimeoutError",
    "MissingCommitError",
    "NameResolutionError",
    "NoRewindPointError",
    "NoShadowError",
    "NoStateBeforeError",
    "NotARepositoryError",
    "NothingToUndoError",
    "RestoreFailedError",
    "RestoreRunningError",
    "SessionAppendError",
    "SessionFileError",
    "ShadowRefusedError",
    "StoreUpdateError",
    "UnrelatedRepositoryError",
    "UnsafeLayoutError",
    "UnsafeRestoreError",
    "WatchRefusedError",
]
