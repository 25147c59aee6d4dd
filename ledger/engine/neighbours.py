"""Other sessions' agents in this work tree: which of them wrote a file (docs/design.md#attribution).

Why it exists: two Pi sessions (or Pi and a CLI restore) share one checkout. A restore in
session A overwrites whatever session B's agent wrote since, and before this module A could only
call that "your own work, not the agent's". B's ledger knows better: every prompt's pre-prompt
snapshot and every turn's post-turn snapshot of B are recorded, so B's agent steps (the changes
into an assistant entry's point) say exactly which ``(path, mode, blob)`` B's agent produced,
by the same rule :mod:`ledger.engine.ownership` applies to A's own agent.

Which sessions are neighbours (never this session itself, bounded):

- every **live** session of the work tree, from the presence registries of its scope
  (:mod:`ledger.work_tree_scope`: in a plain directory, also the sessions of nested or
  enclosing directories with shadows of their own), with the session file it announced;
- the **recent** siblings of this session's file (Pi keeps one directory of session files per
  working directory): those changed within :data:`RECENT_S`, newest first, so that the work of a
  session that ended an hour ago is still named (as ``ended``).

At most :data:`MAX_NEIGHBOURS` in all; a file that cannot be read is skipped (it names nothing).

The rule, a partition: a file a restore would change is **this session's agent's** when an agent
step of this branch produced its current state (checked first, so inherited history stays
ours); otherwise **another session's** when an agent step on any branch of that session
produced it (the first such neighbour: live before ended, then newest first); otherwise the
**user's** own. Content identity, as in :mod:`ledger.engine.ownership`: a rewind and its undo do
not change authorship.

A neighbour in a **nested or enclosing directory** records into its own shadow repository,
with paths relative to its own root: its snapshots are read from that repository (opened by
its git directory, objects never copied) and each path is translated between the two roots
(``sub/work.txt`` here is ``work.txt`` there; a path outside its tree is never its work). Blob
ids are content hashes, the same in both repositories, so content identity still decides.

Invariants: read-only; reads other session files through the engine's bounded, mtime-keyed
:class:`~ledger.lineage.LineageReader`; no capture; a neighbour's work is memoised per file
state (mtime, size), and each tree diff on the engine (they never change).
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.engine.authorship_log import sibling_files
from ledger.engine.ownership import AgentWork, recorded_changes
from ledger.errors import LedgerError
from ledger.git.trees import Change, Entry, entry_at, leaf_changes
from ledger.ledgerview import LedgerView
from ledger.plain import FrozenPlain
from ledger.records import OP
from ledger.session.model import Session, is_restorable
from ledger.session_names import head_title, session_label, session_title
from ledger.work_tree_scope import Member, live_here, scope

if TYPE_CHECKING:
    from ledger.engine.context import EngineContext as Engine
    from ledger.git.repo import GitRepo

RECENT_S = 24 * 3600.0
"""A sibling session file changed this recently is a neighbour (its agent's files may still be
in the work tree)."""
MAX_NEIGHBOURS = 8
PER_PATH_LIMIT = 16
"""Distinct paths a neighbour answers by lookups before it diffs every step once instead."""
MAX_SIBLINGS_LISTED = 4096
"""Names looked at in this session's directory (a listing, never the files themselves)."""


class Neighbour(FrozenPlain):
    """Another session of this work tree and what its agent wrote."""

    __slots__ = (
        "busy",
        "forked_from",
        "pid",
        "running",
        "session_file",
        "session_id",
        "title",
        "work",
    )
    session_id: str
    session_file: str
    running: bool
    """Live now (the presence registry); ``False``: ended, its file changed recently."""
    busy: bool
    """A turn of it is in flight (the registry's word: advisory)."""
    pid: int | None
    """The Pi process's pid when it runs (as its presence entry records it)."""
    work: StepsWork | None
    """Its agent steps, for a session recording into another shadow (nested or enclosing);
    ``None`` for a session of this repository, which the authorship index answers for."""
    title: str | None
    """Its name, else its first prompt's first words (:mod:`ledger.session_names`)."""
    forked_from: bool
    """The session this conversation was forked from (its turns after the fork)."""

    def __init__(
        self,
        session_id: str,
        session_file: str,
        running: bool,
        busy: bool,
        pid: int | None,
        work: StepsWork | None,
        title: str | None = None,
        forked_from: bool = False,
    ) -> None:
        self._init(
            session_id=session_id,
            session_file=session_file,
            running=running,
            busy=busy,
            pid=pid,
            work=work,
            title=title,
            forked_from=forked_from,
        )

    @property
    def label(self) -> str:
        """``session "fix the login bug" (…7f3a9c2e) (still running)``: never the id's
        time-ordered prefix, which sessions started close together share."""
        state = "turn running" if self.busy else "still running" if self.running else "ended"
        who = "the session this one was forked from" if self.forked_from else "session"
        return f"{who} {session_label(self.session_id, self.title)} ({state})"


class WrittenByOther(FrozenPlain):
    """The files a restore would change whose current state one neighbour's agent wrote."""

    __slots__ = ("neighbour", "paths")
    neighbour: Neighbour
    paths: tuple[str, ...]

    def __init__(self, neighbour: Neighbour, paths: tuple[str, ...]) -> None:
        self._init(neighbour=neighbour, paths=paths)

    def to_json(self) -> dict[str, Any]:
        n = self.neighbour
        return {
            "sessionId": n.session_id,
            "sessionFile": n.session_file,
            "running": n.running,
            "busy": n.busy,
            "paths": list(self.paths),
        }


# The memo: per engine (weakly: an engine that ends takes its memo with it), per session file
# and repository, the file's state and the neighbour's work then.
_MEMO: weakref.WeakKeyDictionary[
    Engine, dict[tuple[str, str], tuple[tuple[int, int], str | None, StepsWork]]
] = weakref.WeakKeyDictionary()
# The other repositories of the scope an engine read neighbours from (opened once per engine).
_REPOS: weakref.WeakKeyDictionary[Engine, dict[Path, GitRepo | None]] = weakref.WeakKeyDictionary()


def live_neighbours(engine: Engine) -> dict[str, Neighbour]:
    """The other live sessions of this repository (its presence registry), by id: named from
    what they announced (no session file is read)."""
    own_id = engine.session().id
    found: dict[str, Neighbour] = {}
    for entry, member in live_here(engine.repo.git_dir):
        if entry.session_id == own_id or not member.own:
            continue
        found[entry.session_id] = Neighbour(
            entry.session_id,
            entry.session_file or "",
            True,
            entry.busy,
            entry.shown_pid,
            None,
            entry.title,
        )
    return found


def describe(engine: Engine, session_id: str, *, forked_from: bool = False) -> Neighbour:
    """Another session that is not live, named: its file found among this session's lineage
    or beside this session's file (Pi names a file ``<time>_<id>.jsonl``), its title read from
    it; without a file, by its id alone."""
    session = engine.session()
    for link in engine.reader.lineage(session).links[1:]:
        if link.session_id == session_id:
            title = session_title(link.session) if link.session is not None else None
            return Neighbour(
                session_id, str(link.path), False, False, None, None, title, forked_from
            )
    own_file = engine.host.session_file
    if own_file is not None:
        for path in _named_siblings(Path(os.path.realpath(own_file)), session_id):
            # Its first lines only: naming costs the same however long that session is.
            title = head_title(path)
            return Neighbour(session_id, str(path), False, False, None, None, title, forked_from)
    return Neighbour(session_id, "", False, False, None, None, None, forked_from)


def nested_neighbours(engine: Engine, *, now: float | None = None) -> list[Neighbour]:
    """:func:`neighbours` recording into another shadow (nested or enclosing): the authorship
    index of this repository does not see their captures, so their agent steps are asked."""
    if len(scope(engine.repo.git_dir)) <= 1:
        return []
    return [n for n in neighbours(engine, now=now, nested_only=True) if n.work is not None]


def neighbours(
    engine: Engine, *, now: float | None = None, nested_only: bool = False
) -> list[Neighbour]:
    """The other sessions of this work tree whose agents may have written its files (see the
    module): live ones first (oldest first), then recently ended ones (newest first).
    ``nested_only``: only those recording into another shadow."""
    own_id = engine.session().id
    own_file = engine.host.session_file
    own_path = os.path.realpath(own_file) if own_file is not None else None
    seen: set[str] = {own_id}
    found: list[Neighbour] = []
    for entry, member in live_here(engine.repo.git_dir):
        if entry.session_id in seen or entry.session_file is None:
            continue
        if own_path is not None and os.path.realpath(entry.session_file) == own_path:
            continue
        if nested_only and member.own:
            continue
        work = _work_of(engine, Path(entry.session_file), member)
        if work is None:
            continue
        seen.add(entry.session_id)
        file, pid = entry.session_file, entry.shown_pid
        title = work[1] or entry.title  # its file, read anyway, is the fresher
        found.append(Neighbour(entry.session_id, file, True, entry.busy, pid, work[2], title))
        if len(found) >= MAX_NEIGHBOURS:
            return found
    if own_path is None:
        return found
    members = scope(engine.repo.git_dir)
    since = (now if now is not None else time.time()) - RECENT_S
    for path in sibling_files(Path(own_path), limit=MAX_NEIGHBOURS, changed_since=since):
        if len(found) >= MAX_NEIGHBOURS:
            break
        work = _work_of(engine, path, members, nested_only=nested_only)
        if work is None or work[0] in seen:
            continue
        seen.add(work[0])
        found.append(Neighbour(work[0], str(path), False, False, None, work[2], work[1]))
    return found


def _named_siblings(own: Path, session_id: str) -> list[Path]:
    """The ``*.jsonl`` files beside ``own`` whose name holds ``session_id`` (a listing only)."""
    found: list[Path] = []
    try:
        with os.scandir(own.parent) as listing:
            for count, item in enumerate(listing):
                if count >= MAX_SIBLINGS_LISTED or len(found) >= 4:
                    break
                if item.name.endswith(".jsonl") and session_id in item.name:
                    found.append(Path(item.path))
    except OSError:
        return []
    return found


def _work_of(
    engine: Engine, path: Path, where: Member | list[Member], *, nested_only: bool = False
) -> tuple[str, str | None, StepsWork] | None:
    """``(session id, its title, what its agent wrote)`` for the session file at ``path``, whose snapshots
    are in ``where`` (a member of the scope; or, given the scope, the member whose root holds
    the session's directory most closely); ``None`` when it cannot be read as a session or
    its repository cannot be opened (it then names nothing)."""
    try:
        stat = os.stat(path)
        ledger = engine.reader.load(path, full=True)
    except (OSError, LedgerError):
        return None
    session = ledger.session
    if session is None:
        return None
    member = where if isinstance(where, Member) else _member_of(session, where)
    if nested_only and member.own:
        return None
    repo = _repo_of(engine, member)
    if repo is None:
        return None
    memo = _MEMO.setdefault(engine, {})
    key = (stat.st_mtime_ns, stat.st_size)
    name = (str(path), str(member.git_dir))
    cached = memo.get(name)
    if cached is not None and cached[0] == key:
        return session.id, cached[1], cached[2]
    work = session_agent_work(engine, session, repo=repo, member=member)
    memo[name] = (key, session_title(session), work)
    return session.id, memo[name][1], work


def _member_of(session: Session, members: list[Member]) -> Member:
    """The member whose work tree a session's directory lies in most closely (a shadow serves
    its directory and everything under it that has none of its own); this one by default."""
    cwd = session.cwd
    own = members[0]
    if cwd is None:
        return own
    real = os.path.realpath(cwd)
    inside = [
        m
        for m in members
        if m.root is not None
        and (real == str(m.root) or real.startswith(str(m.root).rstrip(os.sep) + os.sep))
    ]
    return max(inside, key=lambda m: len(str(m.root)), default=own)


def _repo_of(engine: Engine, member: Member) -> GitRepo | None:
    """The repository of ``member``: the engine's own, or another shadow opened once."""
    if member.own:
        return engine.repo
    opened = _REPOS.setdefault(engine, {})
    if member.git_dir not in opened:
        from ledger.git.shadow.layout import ShadowRepo, shadow_of_git_dir

        info = shadow_of_git_dir(member.git_dir)
        try:
            opened[member.git_dir] = ShadowRepo.open(info) if info is not None else None
        except LedgerError:
            opened[member.git_dir] = None  # unreadable: its sessions name nothing
    return opened[member.git_dir]


class StepsWork:
    """What a neighbour's agent steps produced, asked path by path: the same answers as an
    :class:`~ledger.engine.ownership.AgentWork` built from every step's tree diff. A restore
    usually asks about a few files: then two tree lookups per agent step and path (about 1 µs
    each) beat a diff of every step (about 1 ms each in a fresh process). Once more than
    :data:`PER_PATH_LIMIT` distinct paths were asked, the diffs are built once and answer the
    rest (``tools/bench_neighbours.py`` measures both)."""

    def __init__(
        self,
        engine: Engine,
        steps: Sequence[tuple[str, str]],
        *,
        repo: GitRepo | None = None,
        member: Member | None = None,
    ) -> None:
        self._engine = engine
        self._repo = repo if repo is not None else engine.repo
        """Where the steps' trees are: the engine's repository, or a nested or enclosing
        shadow's (``member``), whose paths are translated from the engine's root."""
        self._member = member if member is not None and not member.own else None
        self._own_root = engine.repo.root
        self._steps = list(steps)
        """``(tree before, tree after)`` of each agent step."""
        self._memo: dict[tuple[str, int | None, str | None], bool] = {}
        self._asked: set[str] = set()
        self._full: AgentWork | None = None

    def wrote(self, change: Change) -> bool:
        if self._member is not None:
            path = self._member.path_from(Path(os.path.realpath(self._own_root)), change.path)
            if path is None:
                return False  # outside that session's work tree: never its agent's
            change = Change(path, change.old, change.new)
        if self._full is not None:
            return self._full.wrote(change)
        now = change.old
        key = (change.path, now.mode if now else None, now.oid if now else None)
        found = self._memo.get(key)
        if found is not None:
            return found
        self._asked.add(change.path)
        if len(self._asked) > PER_PATH_LIMIT:
            self._full = self._diff_every_step()
            return self._full.wrote(change)
        found = any(
            self._produced(before, after, change.path, now) for before, after in self._steps
        )
        self._memo[key] = found
        return found

    def _produced(self, before: str, after: str, path: str, now: Entry | None) -> bool:
        repo = self._repo
        if entry_at(repo, after, path) != now:
            return False
        return entry_at(repo, before, path) != now  # changed into ``now`` by this step

    def _changes(self, before: str, after: str) -> list[Change]:
        if self._repo is self._engine.repo:
            return recorded_changes(self._engine, before, after)  # memoised on the engine
        return leaf_changes(self._repo, before, after) or []

    def _diff_every_step(self) -> AgentWork:
        work = AgentWork()
        for before, after in self._steps:
            for change in self._changes(before, after):
                if change.new is None:
                    work.deleted.add(change.path)
                else:
                    work.made.add((change.path, change.new.mode, change.new.oid))
        return work


def session_agent_work(
    engine: Engine,
    session: Session,
    *,
    repo: GitRepo | None = None,
    member: Member | None = None,
) -> StepsWork:
    """The agent steps on every branch of ``session``, ready to be asked whether they produced
    a file's state. One pass over the entries in file order (a parent precedes its children):
    each entry's file state is its own recorded point, else its parent's, exactly as
    the ledger records one branch; an assistant entry's
    point that differs from its parent's state is an agent step. A fork-heavy session costs
    one point resolution per entry, not one per entry and branch. ``repo``/``member``: the
    session records into a nested or enclosing shadow (see the module)."""
    view = LedgerView.of(session)
    records = {r.record_id: r for r in view.records}
    lineage = engine.reader.lineage(session)
    repo = repo if repo is not None else engine.repo
    state: dict[str, str | None] = {}
    pairs: dict[tuple[str, str], None] = {}
    for entry in session.entries:
        before = state.get(entry.parent_id) if entry.parent_id else None
        commit: str | None = None
        agent = False
        record = records.get(entry.id) if entry.type == "custom" else None
        if record is not None:
            if record.custom_type == OP:
                commit = record.current or record.last_binding_sha or None
        elif is_restorable(entry):
            found = lineage.resolve(entry.id, repo.commit_exists)
            commit = found[0] if found else None
            agent = entry.role == "assistant"
        tree = repo.tree_of(commit) if commit else None
        if tree is None:
            state[entry.id] = before  # no point (or pruned): the state carries on
            continue
        if agent and before is not None and before != tree:
            pairs[(before, tree)] = None
        state[entry.id] = tree
    return StepsWork(engine, list(pairs), repo=repo, member=member)


__all__ = [
    "MAX_NEIGHBOURS",
    "RECENT_S",
    "Neighbour",
    "StepsWork",
    "WrittenByOther",
    "describe",
    "live_neighbours",
    "neighbours",
    "nested_neighbours",
    "session_agent_work",
]
