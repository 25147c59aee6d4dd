"""Read-only inspection of sessions and their ledgers: what ``rewind sessions/log/tree`` show.

Why it exists: the CLI must stay thin and a running agent may want the same views, so the
questions are answered here as report values (rows and warnings), never printed.

Invariants: read-only; nothing here writes a session file, a ref or an object. Commit existence
is checked only through the ``exists`` predicate the caller passes (``None`` = not checked).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ledger.errors import LedgerError
from ledger.lineage import LedgerFile, LineageReader
from ledger.session.discovery import SessionInfo
from ledger.session.model import entry_text, kind_of, short
from ledger.session.parse import Entry
from ledger.session.treeview import render_tree


@dataclass(frozen=True)
class SessionSummary:
    id: str
    file: Path
    entries: int
    bound_entries: int
    parent_session: str | None


def summarize_sessions(
    infos: list[SessionInfo], reader: LineageReader
) -> tuple[list[SessionSummary], list[str]]:
    """One summary per readable session (in the given order); unreadable ones become warnings."""
    rows: list[SessionSummary] = []
    warnings: list[str] = []
    for info in infos:
        try:
            link = reader.load(info.path, full=True)
        except LedgerError as exc:
            warnings.append(f"skipped {info.path}: {exc.message}")
            continue
        assert link.session is not None
        rows.append(
            SessionSummary(
                id=link.session_id,
                file=info.path,
                entries=len(link.session.entries),
                bound_entries=link.view.bound_entry_count,
                parent_session=link.parent_session,
            )
        )
    return rows, warnings


@dataclass(frozen=True)
class LogRow:
    entry_id: str | None
    kind: str
    snapshot: str
    record: str
    record_type: str
    session: str
    file: Path
    timestamp: str | None
    role: str | None
    text: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "entryId": self.entry_id,
            "kind": self.kind,
            "snapshot": self.snapshot,
            "record": self.record,
            "recordType": self.record_type,
            "session": self.session,
            "file": str(self.file),
            "timestamp": self.timestamp,
            "role": self.role,
            "text": self.text,
        }


@dataclass
class LogReport:
    rows: list[LogRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def ledger_log(path: Path, reader: LineageReader, *, lineage: bool = False) -> LogReport:
    """Every reference of the session's records (and, with ``lineage``, its ancestors')."""
    report = LogReport()
    start = reader.load(path, full=True)
    links: list[LedgerFile] = [start]
    if lineage:
        chain = reader.lineage(path)
        links = chain.links
        report.warnings.extend(chain.warnings)
    for link in links:
        _warn_about_file(link, report.warnings)
        session = link.session
        for ref in link.view.references:
            entry = session.get(ref.entry_id) if (session is not None and ref.entry_id) else None
            report.rows.append(
                LogRow(
                    entry_id=ref.entry_id,
                    kind=ref.kind,
                    snapshot=ref.snapshot,
                    record=ref.record_id,
                    record_type=ref.record_type,
                    session=link.session_id,
                    file=link.path,
                    timestamp=ref.timestamp,
                    role=kind_of(entry) if entry is not None else None,
                    text=short(entry_text(entry)) if entry is not None else None,
                )
            )
    return report


@dataclass(frozen=True)
class TreeRow:
    id: str
    parent_id: str | None
    type: str
    role: str | None
    text: str
    label: str | None
    leaf: bool
    point: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "parentId": self.parent_id,
            "type": self.type,
            "role": self.role,
            "text": self.text,
            "label": self.label,
            "leaf": self.leaf,
            "point": self.point,
        }


@dataclass
class TreeReport:
    session: str
    rows: list[TreeRow]
    lines: list[str]
    warnings: list[str] = field(default_factory=list)


def session_tree(
    path: Path, reader: LineageReader, exists: Callable[[str], bool] | None
) -> TreeReport:
    """The session's entries in file order, with the rewind point of each through lineage."""
    chain = reader.lineage(reader.load(path, full=True).session or path)
    link = chain.current
    session = link.session
    assert session is not None
    warnings = list(chain.warnings)
    _warn_about_file(link, warnings)
    points = chain.points(exists or (lambda _sha: True))
    labels = session.labels
    leaf_id = session.leaf_id
    rows = []
    for entry in session.entries:
        point = points.get(entry.id)
        rows.append(
            TreeRow(
                id=entry.id,
                parent_id=entry.parent_id,
                type=entry.type,
                role=entry.role,
                text=short(entry_text(entry)),
                label=labels.get(entry.id),
                leaf=entry.id == leaf_id,
                point=point[0] if point else None,
            )
        )

    def describe(entry: Entry) -> str:
        parts = [entry.id, kind_of(entry)]
        text = short(entry_text(entry), 50)
        if text:
            parts.append(text)
        label = labels.get(entry.id)
        if label:
            parts.append(f"[{label}]")
        point = points.get(entry.id)
        if point:
            parts.append(f"◆ {point[0][:8]}")
        if entry.id == leaf_id:
            parts.append("← leaf")
        return "  ".join(parts)

    return TreeReport(session.id, rows, render_tree(session, describe), warnings)


def _warn_about_file(link: LedgerFile, warnings: list[str]) -> None:
    session = link.session
    if session is not None:
        for skipped in session.skipped:
            if skipped.reason != "repeated session header":
                warnings.append(f"{link.path}: line {skipped.line} skipped ({skipped.reason})")
        if session.migrated_from is not None:
            warnings.append(
                f"{link.path}: version {session.migrated_from} file, read as version 3 in memory"
            )
    by_reason: dict[str, list[str]] = {}
    for invalid in link.view.invalid:
        by_reason.setdefault(f"{invalid.custom_type}: {invalid.reason}", []).append(
            invalid.record_id
        )
    for reason, ids in by_reason.items():
        shown = ", ".join(ids[:5]) + (f", … ({len(ids)} in all)" if len(ids) > 5 else "")
        warnings.append(f"{link.path}: ignored invalid record(s) ({reason}): {shown}")
