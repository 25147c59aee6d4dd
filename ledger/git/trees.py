"""Reading and comparing tree objects: leaf changes between two trees, trees less some paths.

Why it exists: a restore plans from the leaf changes between the work tree's capture and the
target tree, ``rewind diff`` lists and prints them, and verification compares a capture with a
target less the paths left alone. All of them need git's view of a tree, read from the raw
objects: libgit2's tree API would hide non-canonical modes and make duplicate names unreachable,
which is exactly what a hostile snapshot would use (docs/design.md#restore).

Invariants:
- :func:`tree_changes` compares two trees without rename detection (D2, docs/defects.md#d2),
  skipping identical subtrees, so its cost grows with the changes, not with the repository.
  A level is read in bulk (:mod:`ledger.git.tree_records`); a level that is corrupt, holds a
  name twice or, when checked, is not plainly safe goes through the per-entry reader, so the
  results and problems are the per-entry reader's. Unchecked walks keep parsed levels in a
  bounded memory (a tree id always names the same bytes).
- Read-only: the only objects written are the trees :func:`tree_without` builds.
- :func:`diff_tree_batch` is the one place review text comes from git itself: one ``git
  diff-tree --stdin`` process for any number of tree pairs (git's bytes, see
  :mod:`ledger.review.diff`).
- With a ``problems`` list, the target side is checked entry by entry by the safety rules of
  :mod:`ledger.git.tree_names` while it is read (names, modes, duplicates); problems are
  collected, never partly acted on. Without one, modes are canonicalized as git does and a
  missing or corrupt tree raises ``KeyError``.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import pygit2
from pygit2.enums import FileMode

from ledger.errors import GitError, MissingCommitError
from ledger.git.repo import GitRepo
from ledger.git.runner import GitRunner
from ledger.git.tree_names import EntryCheck, Problem
from ledger.git.tree_records import Record, differing, plainly_safe, records, unique_names
from ledger.plain import FrozenPlain


class Entry(FrozenPlain):
    __slots__ = ("mode", "oid")
    mode: int
    oid: str

    def __init__(self, mode: int, oid: str) -> None:
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "oid", oid)

    def _fields(self) -> tuple[object, ...]:
        return (self.mode, self.oid)


class Change(FrozenPlain):
    """One leaf path that differs. ``old``/``new`` are ``None`` where the side has no leaf
    (absent, or a directory there: a file↔directory change is a delete plus adds)."""

    __slots__ = ("new", "old", "path")
    path: str
    old: Entry | None
    new: Entry | None

    def __init__(self, path: str, old: Entry | None, new: Entry | None) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "old", old)
        object.__setattr__(self, "new", new)

    def _fields(self) -> tuple[object, ...]:
        return (self.path, self.old, self.new)

    @property
    def kind(self) -> str:
        if self.old is None:
            return "added"
        if self.new is None:
            return "deleted"
        return "modified"


Split = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
"""``(added, modified, deleted)`` paths."""


class TreeReader:
    """Reads tree levels as ``{raw name: Entry}`` from the raw objects, checking them when
    asked (see the module)."""

    def __init__(self, repo: pygit2.Repository, *, ignore_case: bool = False) -> None:
        self.repo = repo
        self.ignore_case = ignore_case

    def entries(
        self, oid: str, prefix: bytes, problems: list[Problem] | None
    ) -> dict[bytes, Entry]:
        """The entries of tree ``oid`` at ``prefix``. With ``problems`` (validation), unsafe
        entries are reported there; without, modes are canonicalized as git does and a
        missing or corrupt tree raises ``KeyError``."""
        where = os.fsdecode(prefix.rstrip(b"/")) or "."
        try:
            kind, data = self.repo.odb.read(oid)
        except (KeyError, ValueError, pygit2.GitError):
            kind, data = None, b""
        if kind != pygit2.enums.ObjectType.TREE:
            if problems is None:
                raise KeyError(f"tree {oid} of {where} is missing")
            problems.append(
                Problem(
                    "the snapshot is incomplete (a tree object is missing or not a tree)", where
                )
            )
            return {}
        check = (
            EntryCheck(prefix, problems, ignore_case=self.ignore_case)
            if problems is not None
            else None
        )
        out: dict[bytes, Entry] = {}
        pos, size = 0, len(data)
        while pos < size:
            space = data.find(b" ", pos)
            nul = data.find(b"\0", space + 1) if space >= 0 else -1
            try:
                if nul < 0 or nul + 21 > size:
                    raise ValueError
                mode = int(data[pos:space], 8)
            except ValueError:
                if problems is None:
                    raise KeyError(f"tree {oid} of {where} is corrupt") from None
                problems.append(
                    Problem("the snapshot is incomplete (a tree object is corrupt)", where)
                )
                return out
            raw = data[space + 1 : nul]
            entry = Entry(mode, data[nul + 1 : nul + 21].hex())
            pos = nul + 21
            if check is not None:
                check.entry(raw, mode, duplicate=raw in out)
            elif mode not in _CANONICAL:
                entry = Entry(canonical_mode(mode), entry.oid)
            out[raw] = entry
        return out


_CANONICAL = frozenset(
    {FileMode.TREE, FileMode.BLOB, FileMode.BLOB_EXECUTABLE, FileMode.LINK, FileMode.COMMIT}
)


def canonical_mode(mode: int) -> int:
    """git's ``canon_mode``: what git makes of a mode it reads from a tree."""
    if stat.S_ISREG(mode):
        return FileMode.BLOB_EXECUTABLE if mode & 0o100 else FileMode.BLOB
    if stat.S_ISLNK(mode):
        return FileMode.LINK
    if stat.S_ISDIR(mode):
        return FileMode.TREE
    return FileMode.COMMIT


def tree_changes(
    repo: pygit2.Repository,
    old_tree: str | None,
    new_tree: str | None,
    *,
    validate: bool = False,
    ignore_case: bool = False,
    problems: list[Problem] | None = None,
) -> list[Change]:
    """Leaf changes from ``old_tree`` to ``new_tree`` (no rename detection), sorted by path.

    With ``validate``, entries of the new side are checked and problems appended to
    ``problems`` (required then); a missing tree on the old side raises ``KeyError``."""
    if validate and problems is None:
        raise ValueError("validate=True needs a problems list")
    reader = TreeReader(repo, ignore_case=ignore_case)
    out: list[tuple[bytes, Change]] = []
    stack: list[tuple[bytes, str | None, str | None]] = [(b"", old_tree, new_tree)]
    while stack:
        prefix, old, new = stack.pop()
        if old is not None and old == new:
            continue
        pairs = _level_changes(repo, old, new, checked=validate, ignore_case=ignore_case)
        if pairs is None:  # the per-entry reader: it reports (or raises) what is wrong
            a_entries = reader.entries(old, prefix, None) if old else {}
            b_entries = reader.entries(new, prefix, problems if validate else None) if new else {}
            pairs = [(n, a_entries.get(n), b_entries.get(n)) for n in a_entries | b_entries]
        for name, a, b in pairs:
            if a == b:
                continue
            path = prefix + name
            a_tree = a is not None and a.mode == FileMode.TREE
            b_tree = b is not None and b.mode == FileMode.TREE
            if a_tree or b_tree:
                stack.append(
                    (
                        path + b"/",
                        a.oid if a is not None and a_tree else None,
                        b.oid if b is not None and b_tree else None,
                    )
                )
            a_leaf = a if a is not None and not a_tree else None
            b_leaf = b if b is not None and not b_tree else None
            if a_leaf is not None or b_leaf is not None:
                out.append((path, Change(os.fsdecode(path), a_leaf, b_leaf)))
    out.sort(key=lambda item: item[0])
    return [change for _, change in out]


Level = tuple[list[Record], frozenset[Record]]
_NO_LEVEL: Level = ([], frozenset())
_LEVELS: OrderedDict[tuple[str, str], Level] = OrderedDict()
_LEVELS_LOCK = threading.Lock()
LEVELS_BUDGET = 200_000
"""Records kept parsed across walks (least recently used dropped first; ~30 MB at most). A
``/rewind`` list walks 200 neighbouring diffs, each tree being the newer side of one and the
older side of the next: kept, each level is read and parsed once."""
_levels_held = 0


def _level(repo: pygit2.Repository, oid: str | None, *, keep: bool) -> Level | None:
    """A tree level's records (``oid`` ``None``: no tree), or ``None`` when it is missing, not
    a tree or corrupt. ``keep``: remember it for later walks — a tree id names the same bytes
    in every repository, but only unchecked walks use the memory, so that a checked walk (a
    restore plan, maybe over a quarantine) always sees whether the object is really there."""
    global _levels_held
    if not oid:
        return _NO_LEVEL
    key = (repo.path, oid)
    if keep:
        with _LEVELS_LOCK:
            found = _LEVELS.get(key)
            if found is not None:
                _LEVELS.move_to_end(key)
                return found
    try:
        kind, data = repo.odb.read(oid)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    if kind != pygit2.enums.ObjectType.TREE:
        return None
    level = records(data)
    if level is None:
        return None
    parsed = (level, frozenset(level))
    if keep and len(level) <= LEVELS_BUDGET // 4:
        with _LEVELS_LOCK:
            if key not in _LEVELS:
                _LEVELS[key] = parsed
                _levels_held += len(level)
            while _levels_held > LEVELS_BUDGET:
                _, dropped = _LEVELS.popitem(last=False)
                _levels_held -= len(dropped[0])
    return parsed


def _level_changes(
    repo: pygit2.Repository,
    old: str | None,
    new: str | None,
    *,
    checked: bool,
    ignore_case: bool,
) -> list[tuple[bytes, Entry | None, Entry | None]] | None:
    """The names whose entries differ between two tree levels, with both sides' entries (modes
    canonical), read in bulk (:mod:`ledger.git.tree_records`); ``None`` when a level is missing,
    corrupt, holds a name twice or (``checked``) is not plainly safe: then the per-entry reader
    decides, so the results and problems are exactly its."""
    a = _level(repo, old, keep=not checked)
    b = _level(repo, new, keep=not checked)
    if a is None or b is None:
        return None
    if not unique_names(a[0]) or not unique_names(b[0]):
        return None
    if checked and not plainly_safe(b[0], ignore_case=ignore_case):
        return None
    a_diff, b_diff = differing(a[1], b[1])
    return [
        (name, _entry(a_diff.get(name)), _entry(b_diff.get(name)))
        for name in sorted(a_diff.keys() | b_diff.keys())
    ]


def _entry(record: Record | None) -> Entry | None:
    if record is None:
        return None
    mode = int(record[0], 8)
    return Entry(mode if mode in _CANONICAL else canonical_mode(mode), record[2].hex())


def leaf_changes(repo: GitRepo, old_tree: str | None, new_tree: str) -> list[Change] | None:
    """Leaf changes from ``old_tree`` (``None``: an empty tree) to ``new_tree`` (no rename
    detection, sorted by path), with both sides' modes and object ids, or ``None`` when a tree
    is missing or corrupt. Identical subtrees are skipped, so the cost grows with the changes,
    not the repository."""
    try:
        return tree_changes(repo.pygit2, old_tree, new_tree)
    except (KeyError, ValueError, pygit2.GitError):
        return None


def entry_at(repo: GitRepo, tree: str, path: str) -> Entry | None:
    """The leaf at ``path`` in ``tree`` (mode and object id), or ``None`` when there is none
    (absent, a directory, or a missing tree). libgit2 looks ``path`` up by its exact bytes
    (pygit2 encodes a path with ``os.fsencode``), whatever they are."""
    try:
        found = repo.pygit2[tree]
        if not isinstance(found, pygit2.Tree):
            return None
        leaf = found[path]
    except (KeyError, ValueError, pygit2.GitError):
        return None
    if leaf.filemode == pygit2.enums.FileMode.TREE:
        return None
    return Entry(int(leaf.filemode), str(leaf.id))


def split_changes(changes: Iterable[Change]) -> Split:
    """``(added, modified, deleted)`` paths of ``changes``, each in the given order."""
    added: list[str] = []
    modified: list[str] = []
    deleted: list[str] = []
    for change in changes:
        {"added": added, "modified": modified, "deleted": deleted}[change.kind].append(change.path)
    return tuple(added), tuple(modified), tuple(deleted)


def tree_without(repo: pygit2.Repository, tree: str, paths: Iterable[str]) -> str:
    """``tree`` with the entries at ``paths`` (files, or directories written ``dir/``) removed,
    and directories left empty by that dropped. Unchanged when no path is present.

    The trees are read and written as raw objects, names as bytes: libgit2's tree builder takes
    only UTF-8 names, and a path holding another byte must be removed all the same."""
    groups: dict[bytes, set[bytes]] = {}
    for path in paths:
        raw = os.fsencode(path.rstrip("/"))
        if raw:
            head, _, rest = raw.partition(b"/")
            groups.setdefault(head, set()).add(rest)
    if not groups:
        return tree
    new = _prune(repo, tree, groups)
    return new if new is not None else _write_tree(repo, {})


def _prune(repo: pygit2.Repository, tree: str, groups: dict[bytes, set[bytes]]) -> str | None:
    """``tree`` less ``groups`` (name → rests below it; ``b""``: the entry itself), or ``None``
    when nothing is left; ``tree`` itself when nothing of it was removed (or it is no tree)."""
    try:
        entries = TreeReader(repo).entries(tree, b"", None)
    except KeyError:
        return tree
    if not any(name in entries for name in groups):
        return tree
    kept: dict[bytes, Entry] = {}
    for name, entry in entries.items():
        rests = groups.get(name)
        if rests is None:
            kept[name] = entry
        elif b"" not in rests and entry.mode == FileMode.TREE:
            sub: dict[bytes, set[bytes]] = {}
            for rest in rests:
                head, _, tail = rest.partition(b"/")
                sub.setdefault(head, set()).add(tail)
            pruned = _prune(repo, entry.oid, sub)
            if pruned is not None:
                kept[name] = Entry(entry.mode, pruned)
    if not kept:
        return None
    if kept == entries:
        return tree
    return _write_tree(repo, kept)


def _write_tree(repo: pygit2.Repository, entries: dict[bytes, Entry]) -> str:
    """A tree object of ``entries``, in the given order (a tree's own order, less some entries,
    is git's order)."""
    data = b"".join(
        b"%o %s\0%s" % (entry.mode, name, bytes.fromhex(entry.oid))
        for name, entry in entries.items()
    )
    return str(repo.odb.write(pygit2.enums.ObjectType.TREE, data))


# --- diffs between snapshots (``rewind diff``) ---------------------------------------------


def _tree_id(repo: GitRepo, sha: str) -> str:
    """The tree a commit or tree id names (existence checked from the object header only), or
    :class:`MissingCommitError`."""
    obj = repo.object(sha)
    if isinstance(obj, pygit2.Commit):
        if repo.has_tree(str(obj.tree_id)):
            return str(obj.tree_id)
    elif isinstance(obj, pygit2.Tree):
        return str(obj.id)
    raise MissingCommitError(sha)


def diff_trees(repo: GitRepo, from_tree: str, to_tree: str) -> Split:
    """``(added, modified, deleted)`` leaf paths from ``from_tree`` to ``to_tree`` (trees or
    commits), without rename detection (as ``git diff-tree -r --no-renames``)."""
    changes = tree_changes(repo.pygit2, _tree_id(repo, from_tree), _tree_id(repo, to_tree))
    return split_changes(changes)


def patch(repo: GitRepo, from_tree: str, to_tree: str, *, paths: Sequence[str] = ()) -> str:
    """Unified diff text from ``from_tree`` to ``to_tree`` (trees or commits), no renames;
    ``paths``: only these (literal pathspecs)."""
    a, b = _tree_id(repo, from_tree), _tree_id(repo, to_tree)
    result = GitRunner(repo.root, repo.git_dir).run(
        [
            "diff-tree",
            "-r",
            "-p",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            a,
            b,
            *(["--", *paths] if paths else []),
        ],
        operation="git diff-tree",
        config=(("diff.noprefix", "false"), ("diff.mnemonicPrefix", "false")),
    )
    return result.text


def diff_tree_batch(
    repo: GitRepo,
    pairs: Sequence[tuple[str, str]],
    options: Sequence[str],
    *,
    config: Iterable[tuple[str, str]] = (),
) -> list[bytes]:
    """git's own diff output for each ``(old_tree, new_tree)`` pair (tree ids, not commits), in
    order, from one ``git diff-tree --stdin -r <options>`` process: the text ``git diff
    <options> <old> <new>`` prints (no external diff, no textconv).

    git echoes each input line (``<old> <new>``) before that pair's output; the output is split
    there. No output line can equal an echo: patch lines start with a marker or a fixed word,
    stat lines with a space, numstat/name-status lines hold a tab, and a path is C-quoted when
    it holds a newline (with ``-z``, a path would have to name the hash of the tree holding it).
    """
    if not pairs:
        return []
    lines = b"".join(f"{a} {b}\n".encode("ascii") for a, b in pairs)
    result = GitRunner(repo.root, repo.git_dir).run(
        ["diff-tree", "--stdin", "-r", "--no-ext-diff", "--no-textconv", *options],
        operation="git diff-tree",
        config=(("diff.noprefix", "false"), ("diff.mnemonicPrefix", "false"), *config),
        input=lines,
    )
    out = result.stdout
    echoes = [f"{a} {b}\n".encode("ascii") for a, b in pairs]
    starts: list[int] = []
    pos = 0
    for echo in echoes:
        at = pos if out.startswith(echo, pos) else -1
        while at < 0:
            found = out.find(echo, pos)
            if found < 0:
                raise GitError("git diff-tree", "unexpected output (an input line was not echoed)")
            if out[found - 1 : found] in (b"\n", b"\0"):
                at = found
            else:
                pos = found + 1
        starts.append(at)
        pos = at + len(echo)
    ends = [*starts[1:], len(out)]
    return [out[s + len(e) : end] for s, e, end in zip(starts, echoes, ends)]


__all__ = [
    "Change",
    "Entry",
    "Split",
    "TreeReader",
    "canonical_mode",
    "diff_tree_batch",
    "diff_trees",
    "entry_at",
    "leaf_changes",
    "patch",
    "split_changes",
    "tree_changes",
    "tree_without",
]
