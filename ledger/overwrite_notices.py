"""Notices to another live session: "a restore here overwrote files your agent wrote"
(issue 33, docs/design.md#telling-the-other-session).

Why it exists: two Pi sessions (or Pi and a CLI restore) share one work tree. When session A
restores (``rewind restore``/``undo``, ``/rewind``, ``/tree``, ``/fork``), it may overwrite or
delete files whose current content session B's agent wrote. A's plan names B's files
(:mod:`ledger.engine.neighbours`), but B was never told: its next footer even said "kept your 6
changed files as a point". A therefore leaves B a notice here, and B's bridge shows it at its
next event (:mod:`ledger.bridge.overwrites`): who restored, which files, and the command that
brings them back.

The store: ``<git-dir>/pi-rewind/notices/<addressee>/`` (``<addressee>``: the addressed session's
id, or a hash of it when it has other characters than ``[0-9A-Za-z-]``), one file per notice:

- ``<ms>-<token>.json``: posted, not seen yet. Written whole into ``.<name>.tmp`` and renamed
  into place, so a reader sees a notice whole or not at all (append-only: a posted notice is
  never rewritten).
- ``<ms>-<token>.seen``: taken by the addressee. Taking is a rename of the ``.json`` to its
  ``.seen`` name *before* it is read: of two takers (a bridge and its healed successor) exactly
  one wins the rename, and a notice posted meanwhile is another file, left for the next take.

Invariants:
- The pure part (:class:`OverwriteNotice`, :func:`parse_notice`, the wording) touches no file;
  the adapter (:func:`post`, :func:`take`) touches only the ``notices`` directory.
- Bounded: a notice file is at most :data:`MAX_NOTICE_BYTES` (paths beyond what fits are counted,
  not listed), checked on the opened descriptor before it is read into memory; at most
  :data:`MAX_PENDING` unseen notices per addressee (a post beyond it is dropped: the addressee
  is not reading them); a take looks at most :data:`MAX_LISTED` names and keeps the newest
  :data:`MAX_SEEN` seen notices (older ones are removed, and temporaries older than
  :data:`STALE_TMP_S` whose writer holds no ``flock`` on them: a stopped writer's is kept).
- A damaged notice (not JSON, wrong fields, too large, not a regular file) is taken and counted,
  never shown as a notice and never read again.
- A notice is a courtesy: every failure here is an ``OSError`` the caller swallows (a restore
  never fails for it, an event never fails for it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ledger.digests import sha256
from ledger.git.liveness import remove_if_unlocked
from ledger.git.private import make_private_dir, private_dir
from ledger.plain import FrozenPlain, Plain
from ledger.quoting import display_name
from ledger.safe_read import open_regular
from ledger.session_names import clean_line

NOTICE_VERSION = 1
NOTICES_DIR_NAME = "notices"
MAX_NOTICE_BYTES = 64 * 1024
"""A notice file's size limit (paths beyond it are counted, not listed)."""
MAX_PATHS = 200
"""Paths listed per list of a notice at most (the count says how many there were)."""
MAX_PENDING = 64
"""Unseen notices per addressee: a post beyond it is dropped."""
MAX_LISTED = 512
"""Names looked at per listing of an addressee's directory."""
MAX_SEEN = 16
"""Seen notices kept per addressee (the newest)."""
STALE_TMP_S = 600.0
"""A temporary this old belongs to a writer that died (a post takes milliseconds)."""
SHOWN_PATHS = 8
"""Paths named in a panel (the rest are counted)."""

_PENDING = re.compile(r"^[0-9]{13}-[0-9a-f]{12}\.json$")
_SEEN = re.compile(r"^[0-9]{13}-[0-9a-f]{12}\.seen$")
_SAFE_ID = re.compile(r"^[0-9A-Za-z-]{1,64}$")


# --- the model (pure) -------------------------------------------------------------------------


class OverwriteNotice(FrozenPlain):
    """One restore of another session that overwrote or deleted files this session's agent
    wrote. Paths are relative to the addressee's work tree."""

    __slots__ = (
        "at_ms",
        "by_file",
        "by_label",
        "by_session",
        "kind",
        "op",
        "restored",
        "restored_count",
        "theirs",
        "theirs_count",
    )
    op: str
    """The restore's operation id (its record's entry id, as ``rewind history`` lists it)."""
    by_session: str
    by_label: str
    """``"fix the login bug" (…7f3a9c2e)`` (:func:`ledger.session_names.session_label`)."""
    by_file: str | None
    """The restoring session's file (``rewind undo`` takes it), when it has one."""
    theirs: tuple[str, ...]
    """Files this session's agent wrote that the restore overwrote or deleted (at most
    :data:`MAX_PATHS`; ``theirs_count`` counts them all)."""
    theirs_count: int
    restored: tuple[str, ...]
    """Every file the restore changed (bounded the same way; ``restored_count`` counts them)."""
    restored_count: int
    at_ms: int
    kind: str
    """``restore`` or ``undo`` (an undo is a restore too, to the snapshot before one)."""

    def __init__(
        self,
        op: str,
        by_session: str,
        by_label: str,
        by_file: str | None,
        theirs: tuple[str, ...],
        theirs_count: int,
        restored: tuple[str, ...] = (),
        restored_count: int = 0,
        at_ms: int = 0,
        kind: str = "restore",
    ) -> None:
        self._init(
            op=op,
            by_session=by_session,
            by_label=by_label,
            by_file=by_file,
            theirs=theirs,
            theirs_count=theirs_count,
            restored=restored,
            restored_count=restored_count,
            at_ms=at_ms,
            kind=kind,
        )

    @property
    def command(self) -> str:
        """What brings every file back as it was just before that restore (and is itself one
        more undoable operation): ``rewind undo <session> --to <op>``."""
        # A file name that a terminal would not show as it is: the id names the session too.
        printable = self.by_file is not None and self.by_file.isprintable()
        where = self.by_file if printable and self.by_file else self.by_session
        import shlex  # only when a notice is shown

        return f"rewind undo {shlex.quote(where)} --to {shlex.quote(self.op)}"

    def _what(self) -> str:
        n = self.theirs_count
        files = f"{n} file{'s' if n != 1 else ''}"
        verb = "undid a restore" if self.kind == "undo" else "restored files"
        return f"session {self.by_label} {verb}: overwrote {files} your agent wrote"

    def line(self) -> str:
        """One line for the footer and the warning notice."""
        shown = ", ".join(display_name(p) for p in self.theirs[:3])
        more = self.theirs_count - min(3, len(self.theirs))
        if more > 0:
            shown += f" (+{more} more)"
        return f"Rewind: {self._what()}: {shown} · get them back: {self.command}"

    def panel(self) -> list[str]:
        """The panel's lines: what happened, the files, the command."""
        lines = [f"Rewind: {self._what()}:"]
        lines.extend(f"  {display_name(path)}" for path in self.theirs[:SHOWN_PATHS])
        more = self.theirs_count - min(SHOWN_PATHS, len(self.theirs))
        if more > 0:
            lines.append(f"  … and {more} more")
        lines.append(f"  get them back (every file as just before that restore): {self.command}")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "v": NOTICE_VERSION,
            "op": self.op,
            "kind": self.kind,
            "by": {"session": self.by_session, "label": self.by_label, "file": self.by_file},
            "atMs": self.at_ms,
            "theirs": list(self.theirs),
            "theirsCount": self.theirs_count,
            "restored": list(self.restored),
            "restoredCount": self.restored_count,
        }


def make_notice(
    op: str,
    by_session: str,
    by_label: str,
    by_file: str | None,
    theirs: Sequence[str],
    restored: Sequence[str] = (),
    *,
    kind: str = "restore",
    at_ms: int | None = None,
) -> OverwriteNotice:
    """A notice with its lists bounded (:data:`MAX_PATHS` each, sorted) and its counts kept."""
    mine, changed = sorted(set(theirs)), sorted(set(restored))
    return OverwriteNotice(
        op=op,
        by_session=by_session,
        by_label=clean_line(by_label),
        by_file=by_file,
        theirs=tuple(mine[:MAX_PATHS]),
        theirs_count=len(mine),
        restored=tuple(changed[:MAX_PATHS]),
        restored_count=len(changed),
        at_ms=int(time.time() * 1000) if at_ms is None else at_ms,
        kind=kind,
    )


def encode(notice: OverwriteNotice) -> bytes:
    """The notice's file content, at most :data:`MAX_NOTICE_BYTES`: listed paths are dropped
    (the counts stay) until it fits."""
    current = notice
    while True:
        # ASCII escapes: a path that is not UTF-8 (surrogate-escaped bytes) survives the trip.
        data = json.dumps(current.to_json(), ensure_ascii=True, sort_keys=True).encode("ascii")
        if len(data) <= MAX_NOTICE_BYTES:
            return data
        if current.restored:
            current = _replace_lists(
                current, current.theirs, current.restored[: len(current.restored) // 2]
            )
        elif current.theirs:
            current = _replace_lists(current, current.theirs[: len(current.theirs) // 2], ())
        else:
            raise ValueError("a notice without paths does not fit")  # a label is bounded


def _replace_lists(
    notice: OverwriteNotice, theirs: tuple[str, ...], restored: tuple[str, ...]
) -> OverwriteNotice:
    return OverwriteNotice(
        notice.op,
        notice.by_session,
        notice.by_label,
        notice.by_file,
        theirs,
        notice.theirs_count,
        restored,
        notice.restored_count,
        notice.at_ms,
        notice.kind,
    )


def _strs(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("a list of paths expected")
    return tuple(value[:MAX_PATHS])


def _count(value: Any, listed: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < listed:
        raise ValueError("a count expected")
    return value


def parse_notice(raw: bytes) -> OverwriteNotice:
    """A notice from its file's bytes; ``ValueError`` when it is not one."""
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict) or data.get("v") != NOTICE_VERSION:
        raise ValueError("not a notice of this version")
    by = data.get("by")
    if not isinstance(by, dict):
        raise ValueError("no restoring session")
    op, session, label = data.get("op"), by.get("session"), by.get("label")
    file, kind, at_ms = by.get("file"), data.get("kind", "restore"), data.get("atMs", 0)
    if not all(isinstance(v, str) and v for v in (op, session, label)):
        raise ValueError("op, session and label must be strings")
    if file is not None and not isinstance(file, str):
        raise ValueError("file must be a string")
    if kind not in ("restore", "undo") or not isinstance(at_ms, int):
        raise ValueError("bad kind or time")
    theirs, restored = _strs(data.get("theirs")), _strs(data.get("restored", []))
    assert isinstance(op, str) and isinstance(session, str) and isinstance(label, str)
    return OverwriteNotice(
        op=clean_line(op),
        by_session=clean_line(session),
        by_label=clean_line(label),
        by_file=file,
        theirs=theirs,
        theirs_count=_count(data.get("theirsCount"), len(theirs)),
        restored=restored,
        restored_count=_count(data.get("restoredCount", len(restored)), len(restored)),
        at_ms=at_ms,
        kind=kind,
    )


# --- the adapter: files in <git-dir>/pi-rewind/notices/ ---------------------------------------


def addressee_dir(git_dir: Path, session_id: str) -> Path:
    """The directory of the notices addressed to ``session_id``."""
    name = (
        session_id
        if _SAFE_ID.match(session_id)
        else "h-" + sha256(session_id.encode("utf-8", "surrogateescape")).hexdigest()[:40]
    )
    return private_dir(git_dir) / NOTICES_DIR_NAME / name


def _names(directory: Path) -> list[str]:
    """At most :data:`MAX_LISTED` names of ``directory``; none when it does not exist."""
    names: list[str] = []
    try:
        with os.scandir(directory) as listing:
            for item in listing:
                names.append(item.name)
                if len(names) >= MAX_LISTED:
                    break
    except (FileNotFoundError, NotADirectoryError):
        return []
    return names


def post(git_dir: Path, session_id: str, notice: OverwriteNotice) -> bool:
    """Leave ``notice`` for ``session_id`` (whole or not at all); False when it was dropped
    because :data:`MAX_PENDING` notices wait unseen. Raises ``OSError`` (a full disk, a
    read-only directory): the caller decides that a notice is not worth failing for."""
    directory = addressee_dir(git_dir, session_id)
    make_private_dir(git_dir, NOTICES_DIR_NAME)
    directory.mkdir(mode=0o700, exist_ok=True)
    if sum(1 for name in _names(directory) if _PENDING.match(name)) >= MAX_PENDING:
        return False
    data = encode(notice)
    name = f"{int(time.time() * 1000):013d}-{os.urandom(6).hex()}.json"
    tmp = directory / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            # The temporary is its own lock (ledger/git/owned.py): held until it is renamed,
            # so that a taker's tidying never removes it while this writer lives, however long
            # it is stopped. Without flock here, nobody removes it (it is kept, never judged).
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            done = 0
            while done < len(data):  # a short write (a nearly full disk) is continued
                done += os.write(fd, data[done:])
            if os.fstat(fd).st_size != len(data):
                raise OSError(f"{tmp}: written {os.fstat(fd).st_size} of {len(data)} bytes")
            # The rename publishes it: a taker never sees a half-written notice.
            os.rename(tmp, directory / name)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


class Taken(Plain):
    """What one :func:`take` found: the notices (oldest first) and how many were damaged."""

    __slots__ = ("damaged", "notices")
    notices: list[OverwriteNotice]
    damaged: int

    def __init__(self, notices: list[OverwriteNotice] | None = None, damaged: int = 0) -> None:
        self.notices = [] if notices is None else notices
        self.damaged = damaged


def take(git_dir: Path, session_id: str, *, now: float | None = None) -> Taken:
    """Every notice addressed to ``session_id`` not seen yet, marked seen (each is returned by
    exactly one take). Cheap when there are none: one failed directory listing."""
    directory = addressee_dir(git_dir, session_id)
    names = _names(directory)
    taken = Taken()
    if not names:
        return taken
    for name in sorted(n for n in names if _PENDING.match(n)):
        path, seen = directory / name, directory / (name[: -len(".json")] + ".seen")
        # Opened before the claim: the descriptor reads it even if another take's tidying
        # removes the seen file in between; not a regular file: claimed and counted damaged.
        try:
            fd, st = open_regular(path)
        except FileNotFoundError:
            continue  # another taker had it
        except OSError:
            fd, st = None, None
        try:
            try:
                os.rename(path, seen)  # the claim: exactly one taker wins, before any read
            except FileNotFoundError:
                continue
            notice = _read(fd, st) if fd is not None and st is not None else None
        finally:
            if fd is not None:
                os.close(fd)
        if notice is None:
            taken.damaged += 1
        else:
            taken.notices.append(notice)
    _tidy(directory, names, time.time() if now is None else now)
    return taken


def _read(fd: int, st: os.stat_result) -> OverwriteNotice | None:
    """The notice on ``fd``, or None when it is too large (known before reading) or no notice."""
    if st.st_size > MAX_NOTICE_BYTES:
        return None
    chunks: list[bytes] = []
    total = 0
    while total <= MAX_NOTICE_BYTES:
        chunk = os.read(fd, MAX_NOTICE_BYTES + 1 - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > MAX_NOTICE_BYTES:
        return None  # grew after the check: not a notice we wrote
    try:
        return parse_notice(b"".join(chunks))
    except (ValueError, UnicodeDecodeError):
        return None


def _tidy(directory: Path, names: list[str], now: float) -> None:
    """Keep the newest :data:`MAX_SEEN` seen notices; remove temporaries of dead writers."""
    seen = sorted(_seen_now(directory))  # listed again: this take renamed some
    for name in seen[:-MAX_SEEN] if len(seen) > MAX_SEEN else []:
        with contextlib.suppress(OSError):
            os.unlink(directory / name)
    for name in names:
        if name.startswith(".") and name.endswith(".tmp"):
            with contextlib.suppress(OSError):
                # Age alone proves nothing (a stopped writer): only an unlocked temporary is
                # removed, judged on a descriptor holding its flock (ledger/git/liveness.py).
                if now - os.lstat(directory / name).st_mtime > STALE_TMP_S:
                    remove_if_unlocked(directory / name)


def _seen_now(directory: Path) -> set[str]:
    return {n for n in _names(directory) if _SEEN.match(n)}


def pending_count(git_dir: Path, session_id: str) -> int:
    """How many notices wait unseen for ``session_id`` (bounded by :data:`MAX_LISTED`)."""
    return sum(1 for n in _names(addressee_dir(git_dir, session_id)) if _PENDING.match(n))


__all__ = [
    "MAX_LISTED",
    "MAX_NOTICE_BYTES",
    "MAX_PATHS",
    "MAX_PENDING",
    "MAX_SEEN",
    "OverwriteNotice",
    "Taken",
    "addressee_dir",
    "encode",
    "make_notice",
    "parse_notice",
    "pending_count",
    "post",
    "take",
]
