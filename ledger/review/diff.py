"""Diffs between two snapshot trees, by git's own rules: git's own text, and the same as values.

Why it exists: ``rewind show``, ``rewind log --patch|--stat|--numstat|--name-status`` and
``rewind report`` all describe what changed between two rewind points. They must say exactly
what ``git diff <tree-a> <tree-b>`` says, so a user can trust (and grep, and apply) the text.

Two ways, one per need:

- :class:`GitDiffer` asks git itself: one ``git diff-tree --stdin`` process per output format
  for any number of point pairs (:func:`ledger.git.trees.diff_tree_batch`), so every byte is
  git's: path quoting (``core.quotePath``), the TAB after a ``---``/``+++`` name holding a
  space, typechanges (one stat line, two patch sections), ``{a => b}`` rename compaction, binary
  detection (a NUL in the first 8000 bytes: libgit2 also calls text with control bytes binary),
  ``core.abbrev``, the colours of ``color.diff.*``. The values (:class:`FileDiff`) come from the
  same process's ``--raw --numstat -z`` output, so the counts agree with the text. The diff
  settings ``git diff`` reads and ``git diff-tree`` does not (``diff.context``,
  ``diff.interHunkContext``, ``diff.algorithm``, ``diff.indentHeuristic``, ``diff.noprefix``,
  ``diff.statGraphWidth``, ``diff.orderFile``; ``diff.colorMoved`` when coloured) are passed as
  options (:func:`porcelain_options`); ``diff.relative`` depends on the caller's directory, so
  the caller passes it (``GitDiffer(relative=…)``, every format alike so that the values and the
  text name the same files). A process costs a few milliseconds; libgit2 cannot give these
  bytes (measured: ``tools/bench_review.py``).
- :func:`diff_trees` without a patch computes values in-process with libgit2
  (:func:`ledger.git.treediff.diff_values`), for callers that only need counts and should not
  spawn a process (the restore preview). libgit2's patch text is never used: it differs from
  git's (index abbreviation, empty files, quoting, the TAB, typechanges, binary detection).

Only the git layer touches libgit2: tree ids, object sizes and configuration come from
:mod:`ledger.git.treediff` and :mod:`ledger.git.repo` as plain values.

Invariants:
- Read-only: nothing here writes a ref or a file (only the empty tree object, when a side is
  missing).
- No rename or copy detection unless ``find_renames`` is asked for (git's ``--no-renames``).
- Text is git's without colour unless colour is asked for (``--color=always``); the values are
  always computed without colour.
- Paths are ``str`` decoded with ``surrogateescape`` (``os.fsdecode``): the raw bytes survive.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

from ledger.errors import GitError
from ledger.git.repo import ConfigValues, GitRepo
from ledger.git.treediff import (
    RepositoryLike,
    as_git_repo,
    diff_values,
    object_size,
    tree_id,
)
from ledger.quoting import quote_c_style


@dataclass(frozen=True)
class FileDiff:
    """One changed path between two trees."""

    status: str
    old_path: str
    new_path: str
    old_mode: int
    new_mode: int
    old_id: str
    new_id: str
    binary: bool
    additions: int
    deletions: int
    patch: str
    """git's patch text for this file (header included), no colour."""
    old_size: int = 0
    new_size: int = 0

    @property
    def path(self) -> str:
        return self.new_path if self.status != "deleted" else self.old_path

    @property
    def display_path(self) -> str:
        """The name as git's ``--stat`` prints it (C-quoted with ``core.quotePath`` on)."""
        if self.old_path != self.new_path:
            return f"{quote_c_style(self.old_path)} => {quote_c_style(self.new_path)}"
        return quote_c_style(self.path)

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "path": self.path,
            "oldPath": self.old_path,
            "oldMode": f"{self.old_mode:06o}",
            "newMode": f"{self.new_mode:06o}",
            "oldId": self.old_id,
            "newId": self.new_id,
            "binary": self.binary,
            "additions": self.additions,
            "deletions": self.deletions,
        }


@dataclass(frozen=True)
class TreeDiff:
    """Every changed path between two trees, in git's path order."""

    old_tree: str
    new_tree: str
    files: list[FileDiff] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    """git's own text by format (``patch``, ``stat``, ``numstat``, ``name-status``,
    ``shortstat``; ``<format>+color`` coloured), when :class:`GitDiffer` computed it."""

    @property
    def additions(self) -> int:
        return sum(f.additions for f in self.files)

    @property
    def deletions(self) -> int:
        return sum(f.deletions for f in self.files)

    @property
    def patch(self) -> str:
        """The whole patch, byte for byte what ``git diff <old> <new>`` prints."""
        if "patch" in self.texts:
            return self.texts["patch"]
        return "".join(f.patch for f in self.files)

    def summary(self) -> str:
        """git's shortstat: `` 3 files changed, 10 insertions(+), 2 deletions(-)``."""
        if "shortstat" in self.texts:
            return self.texts["shortstat"].rstrip("\n") or shortstat(0, 0, 0)
        return shortstat(len(self.files), self.additions, self.deletions)

    def stat(self, width: int = 80) -> str:
        """git's ``--stat`` block (names, counts, +/- graph, summary line)."""
        if "stat" in self.texts:
            return self.texts["stat"]
        return format_stat(self.files, width)

    def to_json(self) -> dict[str, object]:
        return {
            "oldTree": self.old_tree,
            "newTree": self.new_tree,
            "files": [f.to_json() for f in self.files],
            "additions": self.additions,
            "deletions": self.deletions,
        }


def shortstat(files: int, additions: int, deletions: int) -> str:
    if not files:
        return " 0 files changed"
    parts = [f" {files} file{'s' if files != 1 else ''} changed"]
    if additions or not deletions:
        parts.append(f" {additions} insertion{'s' if additions != 1 else ''}(+)")
    if deletions or not additions:
        parts.append(f" {deletions} deletion{'s' if deletions != 1 else ''}(-)")
    return ",".join(parts)


def format_stat(files: list[FileDiff], width: int = 80) -> str:
    """A ``git diff --stat``-style block: names padded, counts right-aligned, a scaled graph."""
    if not files:
        return shortstat(0, 0, 0) + "\n"
    names = [f.display_path for f in files]
    counts = ["Bin" if f.binary else str(f.additions + f.deletions) for f in files]
    name_width = max(len(n) for n in names)
    count_width = max(len(c) for c in counts)
    max_change = max((f.additions + f.deletions for f in files if not f.binary), default=0)
    graph_width = max(6, width - name_width - count_width - 6)
    if name_width > width // 2 + 10 and graph_width < 10:
        graph_width = 10
    lines = []
    for f, name, count in zip(files, names, counts):
        if f.binary:
            lines.append(f" {name.ljust(name_width)} | Bin {f.old_size} -> {f.new_size} bytes")
            continue
        add, rem = f.additions, f.deletions
        if max_change > graph_width:
            add = _scale(add, max_change, graph_width)
            rem = _scale(rem, max_change, graph_width)
        graph = "+" * add + "-" * rem
        lines.append(f" {name.ljust(name_width)} | {count.rjust(count_width)} {graph}".rstrip())
    total_add = sum(f.additions for f in files)
    total_del = sum(f.deletions for f in files)
    lines.append(shortstat(len(files), total_add, total_del))
    return "\n".join(lines) + "\n"


def _scale(value: int, max_change: int, width: int) -> int:
    if not value:
        return 0
    return 1 + math.floor((value * (width - 1)) / max_change) if max_change > 1 else 1


def diff_trees(
    repo: RepositoryLike,
    old: str | None,
    new: str | None,
    *,
    find_renames: bool = False,
    abbrev: object = None,
    with_patch: bool = True,
) -> TreeDiff:
    """What changed from ``old`` to ``new`` (commits or trees; ``None`` is the empty tree).

    ``with_patch``: git's own values and patch (:class:`GitDiffer`, one git process). Without:
    the values only, in-process with libgit2 (a typechange is one file, as in git's stat; a
    file with control bytes may count as binary where git counts lines). ``abbrev`` is
    ignored (git abbreviates the ``index`` line itself)."""
    if with_patch:
        differ = GitDiffer(as_git_repo(repo), find_renames=find_renames)
        return differ.diff(old, new, files=True, texts=("patch",))
    deltas = diff_values(repo, old, new, find_renames=find_renames)
    result = TreeDiff(deltas.old_tree, deltas.new_tree)
    result.files.extend(FileDiff(patch="", **asdict(delta)) for delta in deltas.files)
    return result


# --- git's own text and values (git diff-tree) ---------------------------------------------

Format = Literal["files", "patch", "stat", "numstat", "name-status", "shortstat"]
"""``files``: the values (``--raw --numstat -z``); the others: git's text of that option."""

_FORMAT_OPTIONS: dict[str, tuple[str, ...]] = {
    "files": ("--raw", "--numstat", "-z"),
    "patch": ("-p",),
    "numstat": ("--numstat",),
    "name-status": ("--name-status",),
    "shortstat": ("--shortstat",),
}
_STATUS_LETTER = {
    "A": "added",
    "D": "deleted",
    "M": "modified",
    "T": "typechange",
    "R": "renamed",
    "C": "copied",
}
_FMT_MASK = 0o170000


def porcelain_options(
    config: ConfigValues, root: str | os.PathLike[str] | None = None
) -> tuple[list[str], list[tuple[str, str]]]:
    """The options and ``-c`` settings that make ``git diff-tree`` print what ``git diff``
    prints under this configuration (settings only the porcelain reads); invalid values are
    ignored as if unset. ``root``: the work tree, where a relative ``diff.orderFile`` starts."""
    args: list[str] = []
    context = config.integer("diff.context")
    if context is not None and context >= 0:
        args.append(f"-U{context}")
    inter = config.integer("diff.interHunkContext")
    if inter is not None and inter >= 0:
        args.append(f"--inter-hunk-context={inter}")
    algorithm = config.string("diff.algorithm")
    if algorithm is not None and algorithm.lower() in (
        "myers",
        "default",
        "minimal",
        "patience",
        "histogram",
    ):
        args.append(f"--diff-algorithm={algorithm.lower()}")
    if config.boolean("diff.indentHeuristic") is False:
        args.append("--no-indent-heuristic")
    if config.boolean("diff.noprefix"):
        args.append("--no-prefix")
    order = order_file(config, root)
    if order is not None:
        args.append(f"-O{order}")
    quote = config.boolean("core.quotePath")
    # The git runner turns core.quotePath off for its own commands; a later -c wins.
    settings = [("core.quotePath", "false" if quote is False else "true")]
    return args, settings


def order_file(config: ConfigValues, root: str | os.PathLike[str] | None) -> str | None:
    """``diff.orderFile`` as ``git diff`` reads it: ``~`` expanded, a relative name from the top
    of the work tree; ``None`` when unset or empty. A file that cannot be read makes git fail,
    as ``git diff`` does."""
    value = config.string("diff.orderFile")
    if not value:
        return None
    path = os.path.expanduser(value)
    if not os.path.isabs(path) and root is not None:
        path = os.path.join(root, path)
    return path


_COLOR_MOVED = ("no", "default", "plain", "blocks", "zebra", "dimmed-zebra", "dimmed_zebra")


def color_moved(config: ConfigValues) -> str | None:
    """``diff.colorMoved`` as a ``--color-moved`` mode (a boolean: ``default`` or ``no``);
    ``None`` when unset or invalid (git's default: no moved-line colours)."""
    raw = config.string("diff.colorMoved")
    if raw is None:
        return None
    value = raw.strip().lower()
    if value in _COLOR_MOVED:
        return value
    flag = config.boolean("diff.colorMoved")
    return None if flag is None else ("default" if flag else "no")


def relative_prefix(config: ConfigValues, root: str | os.PathLike[str], cwd: str) -> str | None:
    """The ``--relative`` prefix ``git diff`` would use from ``cwd``: with ``diff.relative``
    true and ``cwd`` a directory below the work tree's top, that directory (``sub/dir/``);
    else ``None`` (all of the tree, names from the top)."""
    if not config.boolean("diff.relative"):
        return None
    top = os.path.realpath(root)
    here = os.path.realpath(cwd)
    if here == top or not here.startswith(top.rstrip(os.sep) + os.sep):
        return None
    return os.path.relpath(here, top).replace(os.sep, "/") + "/"


class GitDiffer:
    """git's own diffs between points of one repository, batched and cached.

    ``fetch`` computes a format for many pairs with one git process; ``diff`` then answers from
    the cache (fetching a missing pair on its own). ``color``: the default for callers that do
    not say (text formats coloured as git colours them, ``--color=always``); ``width``: the
    ``--stat`` width (git's ``COLUMNS`` or terminal width, 80 when piped)."""

    def __init__(
        self,
        repo: GitRepo,
        *,
        find_renames: bool = False,
        color: bool = False,
        width: int = 80,
        relative: str | None = None,
    ) -> None:
        self.repo = repo
        self.find_renames = find_renames
        self.color = color
        self.width = max(1, width)
        self.relative = relative
        """``--relative=<prefix>`` for every format (:func:`relative_prefix`), or ``None``."""
        self._color_moved: str | None = None
        self._trees: dict[str | None, str] = {}
        self._cache: dict[tuple[str, bool, str, str], bytes] = {}
        self._options: tuple[list[str], list[tuple[str, str]]] | None = None
        self._graph_width: int | None = None

    def tree(self, sha: str | None) -> str:
        """The tree id of a commit or tree (``None``: the empty tree), or MissingCommitError."""
        found = self._trees.get(sha)
        if found is None:
            found = tree_id(self.repo, sha)
            self._trees[sha] = found
        return found

    def _porcelain(self) -> tuple[list[str], list[tuple[str, str]]]:
        if self._options is None:
            config = ConfigValues(self.repo)
            self._options = porcelain_options(config, self.repo.root)
            self._graph_width = config.integer("diff.statGraphWidth")
            self._color_moved = color_moved(config)
        return self._options

    def fetch(
        self, pairs: Iterable[tuple[str | None, str | None]], fmt: Format, *, color: bool = False
    ) -> None:
        """Compute ``fmt`` for every pair not cached yet, with one git process."""
        color = color and fmt != "files"
        todo: list[tuple[str, str]] = []
        for old, new in pairs:
            key = (fmt, color, self.tree(old), self.tree(new))
            if key not in self._cache and (key[2], key[3]) not in todo:
                todo.append((key[2], key[3]))
        if not todo:
            return
        from ledger.git.trees import diff_tree_batch

        args, settings = self._porcelain()
        options = [*args, "--find-renames" if self.find_renames else "--no-renames"]
        if self.relative:
            options.append(f"--relative={self.relative}")
        options.append("--color=always" if color else "--no-color")
        if color and self._color_moved is not None:
            options.append(f"--color-moved={self._color_moved}")
        if fmt == "stat":
            options.append(f"--stat={self.width}")
            if self._graph_width is not None and self._graph_width > 0:
                options.append(f"--stat-graph-width={self._graph_width}")
        else:
            options.extend(_FORMAT_OPTIONS[fmt])
        outputs = diff_tree_batch(self.repo, todo, options, config=settings)
        for (a, b), out in zip(todo, outputs):
            self._cache[(fmt, color, a, b)] = out

    def fetch_in_background(
        self, pairs: Iterable[tuple[str | None, str | None]], fmt: Format
    ) -> Pending:
        """:meth:`fetch` with git running while the caller goes on: the tree ids and options
        are resolved here, in the caller's thread (libgit2 is used by that thread only); the
        thread started runs the git process alone. :meth:`Pending.wait` before using the
        result (it raises what the fetch raised)."""
        todo: list[tuple[str, str]] = []
        for old, new in pairs:
            key = (fmt, False, self.tree(old), self.tree(new))
            if key not in self._cache and (key[2], key[3]) not in todo:
                todo.append((key[2], key[3]))
                self._trees[key[2]], self._trees[key[3]] = key[2], key[3]  # a tree is its own
        self._porcelain()
        return Pending(lambda: self.fetch(todo, fmt))

    def text(self, old: str | None, new: str | None, fmt: Format, *, color: bool = False) -> str:
        """git's text of ``fmt`` between the two points (coloured by git when ``color``)."""
        key = (fmt, color and fmt != "files", self.tree(old), self.tree(new))
        if key not in self._cache:
            self.fetch([(old, new)], fmt, color=color)
        return self._cache[key].decode("utf-8", "surrogateescape")

    def diff(
        self,
        old: str | None,
        new: str | None,
        *,
        files: bool = True,
        texts: Sequence[Format] = ("patch",),
        color: bool = False,
    ) -> TreeDiff:
        """The diff from ``old`` to ``new``: the values when ``files``, and git's text of each of
        ``texts`` (plain, or coloured under ``<format>+color`` when ``color``)."""
        a, b = self.tree(old), self.tree(new)
        result = TreeDiff(a, b)
        for fmt in texts:
            colored = color and fmt not in ("files", "shortstat")
            if colored:
                result.texts[f"{fmt}+color"] = self.text(old, new, fmt, color=True)
            if not colored or (files and fmt == "patch"):
                result.texts[fmt] = self.text(old, new, fmt)
        if files:
            raw = self._cache.get(("files", False, a, b))
            if raw is None:
                self.fetch([(old, new)], "files")
                raw = self._cache[("files", False, a, b)]
            patch = result.texts.get("patch")
            result.files.extend(_parse_files(raw, patch, self.repo))
        return result


class Pending:
    """Work running in a thread of its own (a git process started by
    :meth:`GitDiffer.fetch_in_background`)."""

    def __init__(self, work: Callable[[], None]) -> None:
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:  # handed to the waiting thread, never lost
            self._error = exc

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def _parse_files(raw: bytes, patch: str | None, repo: GitRepo) -> list[FileDiff]:
    """``--raw --numstat -z`` records as values; each file's patch sections from ``patch``."""
    tokens = raw.split(b"\0")
    heads: list[tuple[list[bytes], list[bytes]]] = []
    i = 0
    while i < len(tokens) and tokens[i].startswith(b":"):
        fields = tokens[i][1:].split(b" ")
        count = 2 if fields[-1][:1] in (b"R", b"C") else 1
        heads.append((fields, tokens[i + 1 : i + 1 + count]))
        i += 1 + count
    counts: list[tuple[bytes, bytes]] = []
    while i < len(tokens) and len(counts) < len(heads):
        added, _, rest = tokens[i].partition(b"\t")
        deleted, _, path = rest.partition(b"\t")
        counts.append((added, deleted))
        i += 1 if path else 3
    if len(counts) != len(heads):
        raise GitError("git diff-tree", "unexpected --raw --numstat output")
    sections = _sections(patch) if patch is not None else []
    out: list[FileDiff] = []
    for (fields, paths), (added, deleted) in zip(heads, counts):
        old_mode, new_mode = int(fields[0], 8), int(fields[1], 8)
        letter = fields[4][:1].decode("ascii", "replace")
        status = _STATUS_LETTER.get(letter, "modified")
        old_path = os.fsdecode(paths[0])
        new_path = os.fsdecode(paths[-1])
        binary = added == b"-"
        take = 2 if status == "typechange" and (old_mode ^ new_mode) & _FMT_MASK else 1
        text = "".join(sections[:take])
        del sections[:take]
        old_id, new_id = fields[2].decode("ascii"), fields[3].decode("ascii")
        out.append(
            FileDiff(
                status=status,
                old_path=old_path,
                new_path=new_path,
                old_mode=old_mode,
                new_mode=new_mode,
                old_id=old_id,
                new_id=new_id,
                binary=binary,
                additions=0 if binary else int(added or 0),
                deletions=0 if binary else int(deleted or 0),
                patch=text,
                old_size=object_size(repo, old_id) if binary else 0,
                new_size=object_size(repo, new_id) if binary else 0,
            )
        )
    if sections and out:  # never lose text: a section git printed that no record claimed
        last = out[-1]
        out[-1] = replace(last, patch=last.patch + "".join(sections))
    return out


def _sections(patch: str) -> list[str]:
    """The patch cut before each ``diff --git`` line (no other line of a patch starts so)."""
    starts = [0] if patch.startswith("diff --git ") else []
    pos = patch.find("\ndiff --git ")
    while pos >= 0:
        starts.append(pos + 1)
        pos = patch.find("\ndiff --git ", pos + 1)
    if not starts:
        return [patch] if patch else []
    if starts[0] != 0:
        starts.insert(0, 0)
    return [patch[s:e] for s, e in zip(starts, [*starts[1:], len(patch)])]


__all__ = [
    "FileDiff",
    "Format",
    "GitDiffer",
    "Pending",
    "TreeDiff",
    "color_moved",
    "diff_trees",
    "format_stat",
    "order_file",
    "porcelain_options",
    "relative_prefix",
    "shortstat",
]
