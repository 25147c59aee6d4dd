"""Finding sessions: the agent dir, the sessions of a repository, and SESSION / ENTRY names.

Why it exists: users name things loosely (``@``, a prefix of an id, a path). This module turns
those names into exactly one session file or entry, or an error that lists the candidates.

Invariants:
- The agent dir is the explicit option, else ``$PI_CODING_AGENT_DIR`` (a leading ``~``
  expanded), else ``~/.pi/agent`` (docs/formats.md#file-location-and-naming).
- A repository's sessions are the ``*.jsonl`` files below ``<agent-dir>/sessions`` whose header
  ``cwd`` lies inside the repository's work tree (compared after resolving symlinks). Files
  without a valid header are skipped, as Pi's own listing skips them; a caller that wants to
  warn about them passes ``skipped`` and gets each one with its reason.
- "Newest" means the newest file mtime (what ``pi -c`` uses), then the header timestamp.
- Reads only headers: the first five lines of each file, never more than
  :data:`~ledger.session.store.MAX_HEADER_BYTES` (1 MiB), each byte once, so one huge file in
  the sessions folder costs a millisecond, not minutes (issue 23). Never writes.
"""

from __future__ import annotations

import os
from pathlib import Path

from ledger.errors import LedgerError, NameResolutionError, SessionFileError
from ledger.plain import FrozenPlain
from ledger.session.model import Session
from ledger.session.store import read_header

NEWEST = "@"


class SessionInfo(FrozenPlain):
    """What a session file's header says, plus the file's mtime."""

    __slots__ = ("cwd", "id", "mtime_ns", "parent_session", "path", "timestamp")
    path: Path
    id: str
    cwd: str | None
    parent_session: str | None
    timestamp: str | None
    mtime_ns: int

    def __init__(
        self,
        path: Path,
        id: str,
        cwd: str | None,
        parent_session: str | None,
        timestamp: str | None,
        mtime_ns: int,
    ) -> None:
        self._init(
            path=path,
            id=id,
            cwd=cwd,
            parent_session=parent_session,
            timestamp=timestamp,
            mtime_ns=mtime_ns,
        )


def iter_session_files(agent_dir: Path) -> list[Path]:
    """Every ``*.jsonl`` below ``<agent-dir>/sessions`` (any depth), in a stable order."""
    return jsonl_files(agent_dir / "sessions")


def jsonl_files(directory: Path) -> list[Path]:
    """Every ``*.jsonl`` below ``directory`` (any depth, symlinked directories not followed),
    sorted by directory then name; none when ``directory`` does not exist."""
    found: list[Path] = []
    for dirpath, subdirs, files in os.walk(directory, followlinks=False):
        subdirs.sort()
        found.extend(Path(dirpath) / name for name in sorted(files) if name.endswith(".jsonl"))
    return found


def read_info(path: Path, skipped: list[tuple[Path, str]] | None = None) -> SessionInfo | None:
    """The header facts of one file, or ``None`` when it is not a readable session file (then
    the file and the reason, without the path, are appended to ``skipped`` when given)."""
    try:
        header = read_header(path)
        mtime_ns = path.stat().st_mtime_ns
    except LedgerError as exc:
        if skipped is not None:
            skipped.append((path, exc.reason if isinstance(exc, SessionFileError) else exc.message))
        return None
    except OSError as exc:
        if skipped is not None:
            skipped.append((path, f"cannot be read: {exc.strerror or exc}"))
        return None
    cwd = header.get("cwd")
    parent = header.get("parentSession")
    stamp = header.get("timestamp")
    return SessionInfo(
        path=path,
        id=str(header.get("id")),
        cwd=cwd if isinstance(cwd, str) else None,
        parent_session=parent if isinstance(parent, str) and parent else None,
        timestamp=stamp if isinstance(stamp, str) else None,
        mtime_ns=mtime_ns,
    )


def is_inside(path: str, root: Path) -> bool:
    resolved = os.path.realpath(path)
    base = os.path.realpath(root)
    return resolved == base or resolved.startswith(base.rstrip(os.sep) + os.sep)


def repo_sessions(
    agent_dir: Path, repo_root: Path, *, skipped: list[tuple[Path, str]] | None = None
) -> list[SessionInfo]:
    """The sessions whose ``cwd`` lies inside ``repo_root``, newest first.

    ``skipped``, when given, receives ``(file, reason)`` for every file that is not a readable
    session (whatever repository it belongs to: that cannot be known without its header), so
    that a listing can warn about it."""
    sessions = []
    for path in iter_session_files(agent_dir):
        info = read_info(path, skipped)
        if info is not None and info.cwd is not None and is_inside(info.cwd, repo_root):
            sessions.append(info)
    sessions.sort(key=lambda s: (s.mtime_ns, s.timestamp or ""), reverse=True)
    return sessions


def looks_like_path(name: str) -> bool:
    return (
        name.endswith(".jsonl") or os.sep in name or (os.altsep is not None and os.altsep in name)
    )


def resolve_session(
    name: str, candidates: list[SessionInfo], *, scope: str, cwd: Path | None = None
) -> Path:
    """A SESSION name: a path to a ``.jsonl`` file, ``@`` (newest), or a unique id prefix.

    A path is taken relative to ``cwd`` (default: the process's working directory)."""
    as_path = cwd / name if cwd is not None else Path(name)
    if looks_like_path(name) or (not candidates and as_path.exists()):
        return as_path
    if name == NEWEST:
        if not candidates:
            raise NameResolutionError("session", name, [], ambiguous=False, scope=scope)
        return candidates[0].path
    exact = [s for s in candidates if s.id == name]
    matches = exact or [s for s in candidates if s.id.startswith(name)]
    unique_paths = {s.path for s in matches}
    if len(unique_paths) == 1:
        return matches[0].path
    if not matches:
        if as_path.is_file():
            return as_path
        raise NameResolutionError(
            "session", name, [s.id for s in candidates], ambiguous=False, scope=scope
        )
    raise NameResolutionError(
        "session", name, [f"{s.id} ({s.path.name})" for s in matches], ambiguous=True, scope=scope
    )


def resolve_entry(session: Session, name: str) -> str:
    """An ENTRY name: an entry id, a unique prefix of one, or ``@`` for the leaf."""
    scope = f"session {session.id}"
    if name == NEWEST:
        if session.leaf_id is None:
            raise NameResolutionError("entry", name, [], ambiguous=False, scope=scope)
        return session.leaf_id
    if name in session.by_id:
        return name
    matches = [entry_id for entry_id in session.by_id if entry_id.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        recent = [entry.id for entry in reversed(session.entries)][:10]
        raise NameResolutionError("entry", name, recent, ambiguous=False, scope=scope)
    raise NameResolutionError("entry", name, matches, ambiguous=True, scope=scope)
