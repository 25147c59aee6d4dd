"""Lineage: following ``parentSession`` links from a session to its ancestors.

Why it exists: ``/fork`` copies entries with their ids into a child file, while their bindings
stay in the parent's records. To find the exact rewind point of an entry in a forked or resumed
session, look in the session itself, then its parent, grandparent, … (docs/design.md#lineage).

Invariants:
- The walk is cycle-safe: a visited set of canonical (realpath) file paths; the first repeat
  ends the walk with a warning (defect D4 fixed).
- A missing or unreadable ancestor ends the walk with a warning; it is never an error.
- A relative ``parentSession`` (``pi --fork`` writes the path as typed) is resolved against the
  session's header ``cwd``, then against the session file's directory.
- Files are cached by canonical path and invalidated by (mtime, size, inode). A file whose text
  has no ``"rewind-`` is not fully parsed: only its header is read (the reference's fast path).
- A file's start is checked before the whole file is read
  (:func:`~ledger.session.store.probe_header`): no header within its first MiB and its first
  five lines means an unreadable ancestor (a warning), never a multi-GiB read.
- Commit existence is the caller's business: resolution takes an ``exists`` predicate so that a
  pruned commit is skipped and the walk goes on, as the reference does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ledger.errors import LedgerError, SessionFileError
from ledger.ledgerview import LedgerView
from ledger.plain import FrozenPlain, Plain
from ledger.session.model import Session
from ledger.session.parse import NoHeaderError, parse_header_only, parse_session_bytes
from ledger.session.store import probe_header, read_bytes

REWIND_MARKER = b'"rewind-'


class LedgerFile(FrozenPlain):
    """One session file of a lineage, reduced to what rewind needs."""

    __slots__ = ("cwd", "fast_path", "parent_session", "path", "session", "session_id", "view")
    path: Path
    session_id: str
    cwd: str | None
    parent_session: str | None
    view: LedgerView
    session: Session | None
    fast_path: bool

    def __init__(
        self,
        path: Path,
        session_id: str,
        cwd: str | None,
        parent_session: str | None,
        view: LedgerView,
        session: Session | None,
        fast_path: bool,
    ) -> None:
        self._init(
            path=path,
            session_id=session_id,
            cwd=cwd,
            parent_session=parent_session,
            view=view,
            session=session,
            fast_path=fast_path,
        )


class Lineage(Plain):
    """A session and its ancestors, nearest first."""

    __slots__ = ("links", "warnings")
    links: list[LedgerFile]
    warnings: list[str]

    def __init__(self, links: list[LedgerFile], warnings: list[str] | None = None) -> None:
        self.links = links
        self.warnings = [] if warnings is None else warnings

    @property
    def current(self) -> LedgerFile:
        return self.links[0]

    def resolve(
        self, entry_id: str, exists: Callable[[str], bool]
    ) -> tuple[str, LedgerFile] | None:
        """The first existing snapshot bound to ``entry_id``, nearest session first."""
        for link in self.links:
            sha = link.view.entry_to_commit.get(entry_id)
            if sha is not None and exists(sha):
                return sha, link
        return None

    def points(self, exists: Callable[[str], bool]) -> dict[str, tuple[str, LedgerFile]]:
        """Every entry id with an exact rewind point through the lineage."""
        found: dict[str, tuple[str, LedgerFile]] = {}
        for link in self.links:
            for entry_id, sha in link.view.entry_to_commit.items():
                if entry_id not in found and exists(sha):
                    found[entry_id] = (sha, link)
        return found


_Key = tuple[int, int, int]


class LineageReader:
    """Reads ledger files with an mtime-keyed cache and walks ``parentSession`` chains."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[_Key, LedgerFile]] = {}

    def load(self, path: Path | str, *, full: bool = False) -> LedgerFile:
        """One file's ledger. ``full=True`` always parses the whole file (and keeps the Session)."""
        canonical = os.path.realpath(path)
        try:
            stat = os.stat(canonical)
        except OSError:
            stat = None
        key: _Key | None = (stat.st_mtime_ns, stat.st_size, stat.st_ino) if stat else None
        cached = self._cache.get(canonical)
        if (
            cached is not None
            and key is not None
            and cached[0] == key
            and (cached[1].session or not full)
        ):
            return cached[1]
        # Bounded first: a file whose first MiB holds no header (one huge line, a sparse file)
        # is refused here instead of being read whole (up to 2 GiB) to find that out.
        probe_header(Path(canonical))
        data = read_bytes(Path(canonical))
        if not full and REWIND_MARKER not in data:
            try:
                header = parse_header_only(data)
            except NoHeaderError:
                header = None
            if header is not None:
                result = _ledger_file(
                    Path(canonical),
                    header,
                    LedgerView.empty(str(header.get("id")), _str(header.get("parentSession"))),
                    None,
                    True,
                )
                if key is not None:
                    self._cache[canonical] = (key, result)
                return result
        session = _session_from(Path(canonical), data)
        result = _ledger_file(
            Path(canonical), session.header, LedgerView.of(session), session, False
        )
        if key is not None:
            self._cache[canonical] = (key, result)
        return result

    def lineage(self, start: Session | Path | str) -> Lineage:
        """The start session and its ancestors. ``start`` may be an in-memory Session."""
        if isinstance(start, Session):
            first = _ledger_file(
                Path(os.path.realpath(start.path)) if start.path else Path("<memory>"),
                start.header,
                LedgerView.of(start),
                start,
                False,
            )
        else:
            first = self.load(start, full=False)
        lineage = Lineage([first])
        visited = {str(first.path)}
        link = first
        while link.parent_session:
            parent_path = _resolve_parent(link)
            canonical = os.path.realpath(parent_path)
            if canonical in visited:
                lineage.warnings.append(
                    f"parentSession cycle: {link.path} points back to {canonical}; stopped following parents"
                )
                break
            visited.add(canonical)
            try:
                link = self.load(canonical)
            except LedgerError as exc:
                lineage.warnings.append(
                    f"parent session of {link.session_id} is unreadable ({exc.message}); stopped following parents"
                )
                break
            lineage.links.append(link)
        return lineage


def _session_from(path: Path, data: bytes) -> Session:
    try:
        return Session(parse_session_bytes(data), path)
    except NoHeaderError as exc:
        raise SessionFileError(
            path,
            f"not a Pi session file ({exc})",
            hint='a Pi session file starts with a {"type":"session","id":…} header line',
        ) from exc


def _ledger_file(
    path: Path, header: dict, view: LedgerView, session: Session | None, fast: bool
) -> LedgerFile:
    return LedgerFile(
        path,
        str(header.get("id")),
        _str(header.get("cwd")),
        _str(header.get("parentSession")),
        view,
        session,
        fast,
    )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _resolve_parent(link: LedgerFile) -> Path:
    parent = Path(os.path.expanduser(link.parent_session or ""))
    if parent.is_absolute():
        return parent
    if link.cwd:
        candidate = Path(link.cwd) / parent
        if candidate.exists():
            return candidate
    return link.path.parent / parent
