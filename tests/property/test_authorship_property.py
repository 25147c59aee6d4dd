"""Properties of the authorship index (issue 33, docs/authorship.md) over random interleavings of
two agents, the user, conversation rewinds, forks, restores and undos in one work tree.

The world is simulated as values (a work tree of ``path → (mode, content)``, snapshots as
content-addressed trees, each session's ledger as its list of points), and the index is the real
one: each point is turned into a record by :class:`~ledger.authorship.rebuild.Chain` and appended
to a real file with :class:`~ledger.authorship.store.AuthorshipStore`, and the answers come from
an :class:`~ledger.authorship.store.AuthorshipReader` tailing that file.

The oracle is a plain replay of what happened: every write of an agent or a rewind, and every
change a capture finds since the previous capture (the user's: the index can only know the
user's work through captures), appended to a list per ``(path, mode, blob)``; the rule read off
that list as the issue states it. Checked:

- at every restore, for each file it would change: the index's verdict equals the oracle's; with
  content never written twice, a file named as the user's holds the user's content, every file
  of the user's it overwrites is named, and nothing this conversation's agent wrote is named;
- the index rebuilt from the sessions' ledgers equals the one written as work happened, and a
  fresh read of the file gives the same records;
- compaction keeps every answer for the keys of kept snapshots and the current tree.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.authorship.model import (
    ABSENT_MODE,
    Attribution,
    Author,
    AuthorshipIndex,
    Key,
    Lineage,
    Record,
    Verdict,
    absent,
    diff_entries,
)
from ledger.authorship.rebuild import Chain, Point, ordered, rebuild
from ledger.authorship.store import AuthorshipReader, AuthorshipStore

PATHS = [b"a.txt", b"src/b.py", b"dir with space/c", b"\xff\xfe.bin"]
MODES = [0o100644, 0o100644, 0o100755, 0o120000]
Tree = dict[bytes, tuple[int, str]]
Who = tuple[str, str, str]  # ("agent", session, entry) | ("user", "", "") | ("rewind", "", "")


def _blob(content: str) -> str:
    return hashlib.sha1(content.encode()).hexdigest()


def _snapshot_id(tree: Tree) -> str:
    return hashlib.sha1(repr(sorted(tree.items())).encode()).hexdigest()


@dataclass
class Session:
    name: str
    ancestors: tuple[str, ...] = ()
    copied: frozenset[str] = frozenset()
    parent: dict[str, str | None] = field(default_factory=dict)
    """The conversation tree: entry → parent entry."""
    leaf: str | None = None
    undo: str | None = None
    """The undo snapshot of the latest restore (what "undo" puts back)."""
    previous: Tree | None = None

    def branch(self) -> list[str]:
        found: list[str] = []
        entry = self.leaf
        while entry is not None:
            found.append(entry)
            entry = self.parent[entry]
        return found[::-1]

    def lineage(self) -> Lineage:
        return Lineage(self.name, self.ancestors, self.copied)


class World:
    """The work tree, its sessions, the live index and the oracle."""

    def __init__(self, directory: Path, unique: bool) -> None:
        self.unique = unique
        self.files: dict[bytes, tuple[int, str]] = {}
        self.trees: dict[str, Tree] = {}
        self.sessions: dict[str, Session] = {n: Session(n) for n in ("A", "B")}
        self.ledgers: dict[str, list[Point]] = {"A": [], "B": []}
        self.store = AuthorshipStore(directory)
        assert self.store.replace([])  # the rebuild of a work tree without sessions
        self.reader = AuthorshipReader(self.store)
        self.chain = Chain()
        self.live: list[Record] = []
        self.clock = 0.0
        self.serial = 0
        self.produced: dict[Key, list[Who]] = {}
        self.writer: dict[Key, Who] = {}
        """With unique content: who first wrote each content (the ground truth)."""
        self.captured: Tree = {}
        self.texts: dict[str, str] = {}
        """Blob id → content, to write a snapshot's files back."""
        self.restores_checked = 0
        # The work tree before any session: the user's files.
        self.write(("user", "", ""), {PATHS[0]: "base a", PATHS[1]: "base b"}, now=True)

    # --- the world's moves ---------------------------------------------------------------

    def tree(self) -> Tree:
        return {path: (mode, _blob(content)) for path, (mode, content) in self.files.items()}

    def key_of(self, path: bytes) -> Key:
        found = self.files.get(path)
        return absent(path) if found is None else (path, found[0], _blob(found[1]))

    def _note(self, who: Who, key: Key) -> None:
        self.produced.setdefault(key, []).append(who)
        self.writer.setdefault(key, who)

    def write(self, who: Who, writes: dict[bytes, str | None], *, now: bool = False) -> None:
        """Change files; an agent's or a rewind's changes are noted now, the user's are found
        by the next capture (``now``: the user's files before anything)."""
        for path, content in writes.items():
            before = self.key_of(path)
            if content is None:
                self.files.pop(path, None)
            else:
                mode = MODES[sum(path) % len(MODES)] if not now else 0o100644
                self.files[path] = (mode, content)
                self.texts[_blob(content)] = content
            if self.key_of(path) != before and who[0] != "user":
                self._note(who, self.key_of(path))

    def content(self, who: str, path: bytes, pick: int) -> str:
        self.serial += 1
        if self.unique:
            return f"{self.serial}:{who}:{path!r}"
        return "xyz"[pick % 3]

    def point(
        self, session: str, kind: str, entry: str | None = None, op: str | None = None
    ) -> str:
        tree = self.tree()
        snapshot = _snapshot_id(tree)
        self.trees[snapshot] = tree
        if kind == "capture":
            # What changed since the last capture of the work tree was found, not made.
            for key in diff_entries(self.captured, tree):
                self._note(("user", "", ""), key)
        self.captured = tree
        self.clock += 1.0
        point = Point(snapshot, kind, session, entry, op, self.clock)  # type: ignore[arg-type]
        self.ledgers[session].append(point)
        record = self.chain.record(point, self.changes)
        assert self.store.append([record])
        self.live.append(record)
        return snapshot

    def changes(self, base: str | None, snapshot: str) -> list[Key]:
        return diff_entries(self.trees[base] if base is not None else None, self.trees[snapshot])

    def entry(self, session: Session, tag: str) -> str:
        self.serial += 1
        name = f"{session.name}-{tag}{self.serial}"
        session.parent[name] = session.leaf
        session.leaf = name
        return name

    def turn(self, name: str, writes: dict[bytes, str | None]) -> None:
        session = self.sessions[name]
        self.point(name, "capture")
        self.entry(session, "u")
        assistant = self.entry(session, "a")
        self.write(("agent", name, assistant), writes)
        self.point(name, "agent", assistant)

    def user(self, writes: dict[bytes, str | None]) -> None:
        self.write(("user", "", ""), writes)

    def restore(self, name: str, target: str, op: str = "restore") -> None:
        session = self.sessions[name]
        self.serial += 1
        record = f"op{self.serial}"
        undo = self.point(name, "capture", record)
        self.check_plan(session, self.trees[target])
        goal = self.trees[target]
        writes: dict[bytes, str | None] = {}
        for path in set(self.files) | set(goal):
            if path not in goal:
                writes[path] = None
            elif self.key_of(path) != (path, *goal[path]):
                writes[path] = self.texts[goal[path][1]]
        for path, content in writes.items():
            if content is not None:
                self.files[path] = (goal[path][0], content)
            else:
                self.files.pop(path, None)
            self._note(("rewind", "", ""), self.key_of(path))
        self.point(name, "rewind", record, op)
        session.undo = undo

    def undo(self, name: str) -> None:
        session = self.sessions[name]
        if session.undo is not None:
            self.restore(name, session.undo, "undo")

    def conversation_rewind(self, name: str, depth: int) -> None:
        session = self.sessions[name]
        branch = session.branch()
        session.leaf = branch[-1 - depth] if depth < len(branch) else None
        self.serial += 1
        self.point(name, "capture", f"op{self.serial}")  # "Keep current files": its current

    def fork(self, name: str, target: str | None) -> None:
        parent = self.sessions[name]
        child = Session(
            f"F{len(self.sessions)}",
            (parent.name, *parent.ancestors),
            frozenset(parent.branch()),
            dict(parent.parent),
            parent.leaf,
        )
        if target is not None:
            self.restore(
                name, target, "fork-restore"
            )  # in the parent; the child's import repeats it
        self.sessions[child.name] = child
        self.ledgers[child.name] = []

    # --- the oracle and the checks ---------------------------------------------------------

    def oracle(self, key: Key, asking: Session) -> Attribution:
        whos = self.produced.get(key, [])
        if any(w[0] == "agent" and w[1] == asking.name for w in whos):
            return "this-session"
        if any(
            w[0] == "agent" and w[1] in asking.ancestors and w[2] in asking.copied for w in whos
        ):
            return "fork-parent"
        if not whos:
            return "user"
        last = whos[-1][0]  # whoever produced this content last: a rewind never warns
        return "rewind" if last == "rewind" else "user" if last == "user" else "other-session"

    def check_plan(self, session: Session, goal: Tree) -> None:
        """What a restore plan would say about each file the restore changes."""
        assert self.reader.refresh() == "ok"
        lineage = session.lineage()
        for path in set(self.files) | set(goal):
            now = self.key_of(path)
            if (now[1], now[2]) == goal.get(path, (ABSENT_MODE, "")):
                continue
            verdict = self.reader.index.attribute(now, lineage)
            assert verdict.attribution == self.oracle(now, session), (path, now, verdict)
            if self.unique and now[1] != ABSENT_MODE:
                truth = self.writer[now]
                ours = truth[0] == "agent" and (
                    truth[1] == session.name
                    or (truth[1] in session.ancestors and truth[2] in session.copied)
                )
                if verdict.attribution == "user":
                    assert truth[0] == "user", "named as the user's: it is the user's"
                rewound = self.produced.get(now, [("user",)])[-1][0] == "rewind"
                if truth[0] == "user" and not rewound:
                    assert verdict.warns, "the user's file a restore overwrites is named"
                if ours:
                    assert not verdict.warns, "nothing this conversation's agent wrote is named"
            self.restores_checked += 1


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(
            ["turn", "turn", "turn", "user", "user", "restore", "restore", "undo", "rewind", "fork"]
        ),
        st.integers(0, 5),
        st.lists(st.tuples(st.sampled_from(PATHS), st.integers(0, 9)), max_size=3),
        st.integers(0, 1000),
    ),
    min_size=1,
    max_size=30,
)


def _writes(world: World, who: str, picks: list[tuple[bytes, int]]) -> dict[bytes, str | None]:
    writes: dict[bytes, str | None] = {}
    for path, pick in picks:
        writes[path] = None if pick == 0 else world.content(who, path, pick)
    return writes


def _play(world: World, events: list[tuple[str, int, list[tuple[bytes, int]], int]]) -> None:
    for kind, who, picks, pick in events:
        names = sorted(world.sessions)
        name = names[who % len(names)]
        snapshots = sorted(world.trees)
        target = snapshots[pick % len(snapshots)] if snapshots else None
        if kind == "turn":
            world.turn(name, _writes(world, name, picks))
        elif kind == "user":
            world.user(_writes(world, "user", picks))
        elif kind == "restore" and target is not None:
            world.restore(name, target)
        elif kind == "undo":
            world.undo(name)
        elif kind == "rewind":
            world.conversation_rewind(name, pick % 4)
        elif kind == "fork" and len(world.sessions) < 5:
            world.fork(name, target if pick % 2 else None)


def _answer(verdict: Verdict) -> tuple[str, str | None, Author | None]:
    """A verdict as compared across indexes (a compacted record keeps fewer of its paths)."""
    record = verdict.producer
    if record is None:
        return (verdict.attribution, None, None)
    return (verdict.attribution, record.snapshot, record.author)


def _same_answers(
    left: AuthorshipIndex, right: AuthorshipIndex, keys: set[Key], world: World
) -> None:
    for session in world.sessions.values():
        lineage = session.lineage()
        for key in keys:
            assert _answer(left.attribute(key, lineage)) == _answer(right.attribute(key, lineage))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(events=EVENTS, unique=st.booleans(), kept=st.integers(0, 2**16))
def test_the_index_names_exactly_the_users_and_other_sessions_work(
    events: list[tuple[str, int, list[tuple[bytes, int]], int]], unique: bool, kept: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = World(Path(tmp), unique)
        _play(world, events)
        # A last look: every file's verdict for every session, against the oracle.
        assert world.reader.refresh() == "ok"
        keys = {world.key_of(p) for p in PATHS} | {k for r in world.live for k in r.entries}
        for session in world.sessions.values():
            for path in PATHS:
                key = world.key_of(path)
                verdict = world.reader.index.attribute(key, session.lineage())
                assert verdict.attribution == world.oracle(key, session)

        # Rebuilt from the ledgers == written as work happened == read back from the file.
        rebuilt = rebuild(ordered(world.ledgers), world.changes)
        assert rebuilt == world.live
        assert world.store.read().records == world.live
        written = world.reader.index
        _same_answers(AuthorshipIndex.of(rebuilt), written, keys, world)

        # A process without the index loaded reads only what answers for a few paths.
        few = [p for i, p in enumerate(PATHS) if kept >> i & 1]
        sparse = AuthorshipIndex.of(world.store.read(only=few).records)
        _same_answers(written, sparse, {k for k in keys if k[0] in few}, world)

        # The rebuild replaces the file (complete); compaction keeps the kept snapshots' answers.
        assert world.store.replace(rebuilt)
        snapshots = sorted(world.trees)
        kept_trees = [world.trees[s] for i, s in enumerate(snapshots) if kept >> (i % 16) & 1]
        kept_trees.append(world.tree())
        referenced = {(p, m, b) for tree in kept_trees for p, (m, b) in tree.items()}
        referenced |= {absent(p) for tree in kept_trees for p in tree}
        compacted = world.store.compact(referenced)
        assert compacted is not None
        fresh = AuthorshipReader(world.store)
        assert fresh.refresh() == "ok"
        assert fresh.index.last_snapshot == written.last_snapshot
        _same_answers(written, fresh.index, referenced, world)
        assert len(compacted.records) <= len(world.live)
