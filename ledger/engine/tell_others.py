"""The producer of :mod:`ledger.overwrite_notices`: a restore tells each live session whose
agent's files it overwrote (docs/design.md#telling-the-other-session).

Why it exists: every restore (``rewind restore/undo/undo --to/fork``, a recovery, ``/rewind``,
``/tree``, ``/fork``) goes through :meth:`Engine.restore_files
<ledger.engine.engine.Engine.restore_files>` and is recorded by the next
:meth:`~ledger.engine.engine.Engine.append_op` or :meth:`~ledger.engine.engine.Engine.prepare_fork`
(for ``/tree``, an event later). So the engine asks :func:`overwritten_by` right after the
restore, while the branch is still the one the restore started from (the partition of
:func:`~ledger.engine.changes_since.plan_authors` reads it), and :func:`tell` once the record
exists, because the notice names the record: ``rewind undo <session> --to <record>``
(:mod:`ledger.history`) brings back every file as it was just before that restore.

Invariants:
- Only sessions that are live now are told (a notice waits in their own git directory's
  private dir, where their bridge looks); ended sessions are named in the plan only.
- Nothing is computed when no other session is live (one registry listing), so a restore in a
  lone session costs what it did.
- Never raises: a notice is a courtesy and a restore must never fail for it (any exception is
  dropped here, on purpose, with the notice).
- :func:`notices_for` is pure: values in, the notices to post out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.overwrite_notices import OverwriteNotice, make_notice, post
from ledger.plain import FrozenPlain

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext as Engine
    from ledger.engine.neighbours import WrittenByOther
    from ledger.git.restore.run import RestorePlan
    from ledger.work_tree_scope import Member


class Overwritten(FrozenPlain):
    """Whose agents' files one restore overwrote, computed right after it (see the module)."""

    __slots__ = ("groups", "members", "restored")
    groups: tuple[WrittenByOther, ...]
    """Per live other session, the files its agent wrote that the restore changed."""
    restored: tuple[str, ...]
    """Every path the restore changed (relative to this work tree)."""
    members: Mapping[str, Member]
    """Where each of those sessions records: session id → its member of the scope."""

    def __init__(
        self,
        groups: tuple[WrittenByOther, ...],
        restored: tuple[str, ...],
        members: Mapping[str, Member],
    ) -> None:
        self._init(groups=groups, restored=restored, members=members)


def notices_for(
    op: str,
    by_session: str,
    by_label: str,
    by_file: str | None,
    overwritten: Overwritten,
    own_root: Path | None,
    *,
    at_ms: int | None = None,
) -> list[tuple[str, Path, OverwriteNotice]]:
    """``(addressee session id, its git dir, notice)``: one per live other session in
    ``overwritten``, its paths as that session's work tree names them (a session in a nested or
    enclosing directory has another root); a session none of whose paths lie in its own work
    tree gets none."""
    found: list[tuple[str, Path, OverwriteNotice]] = []
    for group in overwritten.groups:
        n = group.neighbour
        member = overwritten.members.get(n.session_id)
        if not n.running or member is None:
            continue
        theirs = _translated(member, own_root, group.paths)
        if not theirs:
            continue
        restored = _translated(member, own_root, overwritten.restored)
        notice = make_notice(op, by_session, by_label, by_file, theirs, restored, at_ms=at_ms)
        found.append((n.session_id, member.git_dir, notice))
    return found


def _translated(member: Member, own_root: Path | None, paths: Sequence[str]) -> list[str]:
    out: list[str] = []
    for path in paths:
        there = member.path_from(own_root, path)
        if there is not None:
            out.append(there)
    return out


def overwritten_by(engine: Engine, plan: RestorePlan) -> Overwritten | None:
    """After a restore that changed files (``plan`` is its plan, whose capture is the files it
    replaced): whose live agents' files it overwrote, or None (nobody, or it cannot be told)."""
    try:
        from ledger.work_tree_scope import live_here

        own = engine.session().id
        members = {
            entry.session_id: member
            for entry, member in live_here(engine.repo.git_dir)
            if entry.session_id != own
        }
        if not members:
            return None  # alone here: nothing to compute
        from ledger.engine.changes_since import plan_authors

        groups = tuple(g for g in plan_authors(engine, plan).others if g.neighbour.running)
        if not groups:
            return None
        restored = tuple(sorted({*plan.added, *plan.modified, *plan.deleted}))
        return Overwritten(groups, restored, members)
    except Exception:  # a courtesy: never fail (or slow down with a traceback) a restore for it
        return None


def tell(engine: Engine, overwritten: Overwritten | None, record: str) -> int:
    """Post the notices of a restore recorded as ``record`` (None: nobody to tell); how many
    were posted."""
    if overwritten is None:
        return 0
    try:
        from ledger.session_names import session_label, session_title

        session = engine.session()
        label = session_label(session.id, session_title(session))
        file = engine.host.session_file
        by_file = os.path.realpath(file) if file is not None else None
        root = Path(os.path.realpath(engine.repo.root)) if engine.repo.root else None
        posted = 0
        for addressee, git_dir, notice in notices_for(
            record, session.id, label, by_file, overwritten, root
        ):
            try:
                posted += post(git_dir, addressee, notice)
            except (OSError, ValueError):
                continue  # that one is not told; the others still are
        return posted
    except Exception:  # a courtesy: the restore and its record stand whatever happens here
        return 0


__all__ = ["Overwritten", "notices_for", "overwritten_by", "tell"]
