"""Capture the work tree into a tree object, exactly and fast.

Why it exists: a snapshot tree must equal, byte for byte, what ``git -c core.autocrlf=false add
-A`` into a fresh, empty index followed by ``git write-tree`` gives at the repository root (tracked
and untracked non-ignored files, tracked files matching an ignore rule left out, exec bits,
symlinks, ``.gitattributes`` conversions, gitlinks at their HEAD), minus the protected paths
(docs/design.md#protected-paths; the contract: docs/design.md#the-exactness-contract). The
reference gets this by re-hashing everything every time; we refresh a private index
(:mod:`ledger.git.capture.index`) and re-hash only what changed.

One capture, under the private index's lock:

1. Fingerprint what can change results without changing any file's stat data
   (:mod:`ledger.git.capture.fingerprint`). A change (or ``core.ignoreCase``, whose renames git cannot
   see in a kept index) means: start from an empty index.
2. Compare the saved signatures of each directory's ``.gitignore``/``.gitattributes``/``.git``
   (:mod:`ledger.git.capture.state`).
3. Drop entries that stopped or started being repositories, and old-mtime racy entries listed
   by the previous capture (:mod:`ledger.git.capture.racy`).
4. ``git status --porcelain=v2 -uall`` on the private index with our settings (trustctime,
   default checkStat, no ignoreStat, no fsmonitor, untracked cache) lists what changed.
5. Parse and classify it (:mod:`ledger.git.capture.plan`): protected directories, too-large
   untracked files, embedded repositories without a commit are skipped. Refused before anything
   is written (:mod:`ledger.git.capture.limits`): a dirty submodule or embedded repository, and
   a first capture adding more untracked files or bytes than the settings allow.
6. Few plain changes (up to :data:`LAZY_MAX_PATHS` paths differing from the index): hash them and
   edit the index's tree with pygit2, leaving the index as it is (:mod:`ledger.git.capture.treeedit`).
   Otherwise ``update-index --add --remove --replace`` them; remove entries newly ignored
   (``ls-files -c -i`` under directories whose ignore rules changed); ``add --renormalize``
   under directories whose attributes changed; ``write-tree`` (skipped when nothing changed).
7. Keep the entries recorded within this capture's seconds under git's racy check
   (:mod:`ledger.git.capture.racy`).

Invariants: only the private index, its lock/state files and git objects are written. The
user's index is read only through read-only commands (``GIT_OPTIONAL_LOCKS=0``). All git commands
run at the repository root, so the result does not depend on the caller's cwd.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pygit2

from ledger.errors import CaptureIndexError, DirtySubmoduleError, GitError
from ledger.git.capture import prefetch
from ledger.git.capture.fingerprint import global_fingerprint
from ledger.git.capture.index import IndexUnusable, PrivateIndex
from ledger.git.capture.limits import check_dirty, check_first_capture
from ledger.git.capture.plan import (  # CaptureResult: re-exported, callers import it from here
    CapturePlan,
    CaptureResult,
    RuleChanges,
    classify,
    parse_status,
)
from ledger.git.capture.prefetch import status_command
from ledger.git.capture.racy import guard_racy_entries, old_racy_entries
from ledger.git.capture.state import (
    CaptureState,
    dir_signatures,
    dir_stamp,
    parent_dirs,
    rule_dirs,
    same_content,
    stamp_limit,
    to_sign,
    topmost,
)
from ledger.git.capture.status_command import PRIVATE_CONFIG, STATUS_ARGS, TRACE_ENV
from ledger.git.capture.treeedit import LazyUnsupported, current_entries, edit_tree
from ledger.git.capture.untracked_cache import (
    CacheSnapshot,
    TraceCounters,
    late_dirs,
    prepare_in_background,
    read_extension,
    reread_dirs,
)
from ledger.git.repo import GitRepo, is_git_dir
from ledger.git.runner import GitResult, GitRunner, chunks, decode_path, first_lines, nul_join
from ledger.git.shadow.layout import ShadowRepo, capture_settings
from ledger.loaded_modules import finished
from ledger.settings import SnapshotSettings

LAZY_MAX_PATHS = 32
"""Up to this many paths differing from the private index, a capture hashes them and edits the
tree instead of rewriting the index (see :mod:`ledger.git.capture.treeedit`); beyond, it records them."""
_NO_SPACE = "No space left on device"


class Capturer:
    """Captures one repository's work tree (see the module docstring)."""

    def __init__(
        self, repo: GitRepo, settings: SnapshotSettings | None = None, *, use_feed: bool = True
    ) -> None:
        self.repo = repo
        self.root = repo.root
        # A shadow repository (docs/shadow.md) writes its excludes and uses its size limit.
        self.settings = capture_settings(repo, settings or SnapshotSettings())
        self.git = GitRunner(repo.root, repo.git_dir)
        self.index = PrivateIndex(repo.git_dir)
        self._root_s = str(repo.root)
        self._filemode = True
        self.use_feed = use_feed
        self.last_state: CaptureState | None = None
        """The state the last full capture saved (read by the change feed)."""
        self.facts_ignore_case = False

    @property
    def root_s(self) -> str:
        return self._root_s

    @property
    def filemode(self) -> bool:
        return self._filemode

    # --- entry point ----------------------------------------------------------------------

    def capture(self) -> CaptureResult:
        """Capture now: through the change feed when this process runs one (``rewind serve``,
        :mod:`ledger.git.feed.service`) and it can be trusted, else by a full scan."""
        # Not while this thread holds the private index's lock (a restore captures inside it):
        # the watcher would wait for that very lock, and we for the watcher.
        if self.use_feed and not self.index.locked_here():
            delegated = _delegated(self)
            if delegated is not None:
                return delegated
        feed = _active_feed(self.repo) if self.use_feed else None
        if feed is not None:
            feed.touch()
        return self.capture_with(feed)

    def capture_with(self, feed: Any) -> CaptureResult:
        """:meth:`capture` with an explicit feed (``None``: always a full scan). Failures of the
        private index (a full disk, an unwritable git directory) raise
        :class:`~ledger.errors.CaptureIndexError`, never a bare ``OSError``."""
        started = time.perf_counter()
        try:
            with self.index.locked():
                epoch = None
                if feed is not None:
                    try:
                        fed = feed.try_fed(self)
                    except Exception as exc:
                        feed.note_error(exc)
                        fed = None
                    if fed is not None:
                        return fed.timed((time.perf_counter() - started) * 1000.0)
                    epoch = feed.before_full()
                try:
                    result = self.full_capture()
                finally:
                    prefetch.discard()  # not taken (e.g. an error before status): stop it
                if feed is not None:
                    feed.after_full(self, result, epoch)
        except IndexUnusable as exc:
            raise _index_error(self.index.dir, str(exc), None) from None
        except OSError as exc:
            raise _index_error(self.index.dir, exc.strerror or str(exc), exc.errno) from None
        except GitError as exc:
            if _NO_SPACE in exc.message and not isinstance(exc, CaptureIndexError):
                raise _index_error(self.index.dir, exc.message, errno.ENOSPC) from None
            raise
        finally:
            prefetch.capture_ended()
        return result.timed((time.perf_counter() - started) * 1000.0)

    def full_capture(self) -> CaptureResult:
        """The full scan (git status on the private index), under the caller's lock."""
        fingerprint, facts = global_fingerprint(self.repo, self.settings)
        self._filemode = facts.filemode
        self.facts_ignore_case = facts.ignore_case
        state = self.index.load_state()
        # First: no capture completed here yet (a rebuild after one is not; nor is every capture
        # under core.ignoreCase): only then is the size of what it adds checked.
        first = state is None or state.tree is None
        fresh = state is None or state.fingerprint != fingerprint or facts.ignore_case
        if state is None or fresh:
            prefetch.discard()  # an early status must not write the old index back after this
            self.index.reset()
            state = CaptureState(fingerprint=fingerprint)
        try:
            return self._capture(state, fresh=fresh, first=first)
        except (IndexUnusable, GitError) as exc:
            # A kept index that git cannot read, or that references pruned objects, is
            # rebuilt once; a failure on a fresh index is the real error.
            if isinstance(exc, DirtySubmoduleError):
                raise
            if fresh:
                raise
            prefetch.discard()  # as above
            self.index.reset()
            return self._capture(CaptureState(fingerprint=fingerprint), fresh=True, first=first)

    # --- one pass over a loaded state ------------------------------------------------------

    def _capture(self, state: CaptureState, *, fresh: bool, first: bool) -> CaptureResult:
        start_s = int(time.time())
        updated = 0
        modified = False
        self.index.begin()
        saved_dirs = dict(state.dirs)

        # Rule files and .git directories, before status (a later change is the next capture's):
        # in every known directory, or, when the last capture left them in step with git's
        # untracked cache, only where one is; status tells the rest (docs/capture.md#start-up).
        changes = RuleChanges()
        everywhere = fresh or not state.synced
        self._compare_rules(
            state,
            list(state.dirs) if everywhere else rule_dirs(state.dirs),
            changes,
            stamped=everywhere,
        )

        # Entries that became embedded repositories or stopped being repositories leave the
        # index, so that the status below lists them as they are now. A new repository drops
        # git's untracked cache even with nothing below it in the index (see _update_index).
        stale = [g for g in state.gitlinks if not self.has_dotgit(g)]
        drop: list[str] = list(stale)
        if changes.repos:
            drop += self.ls_private(topmost(changes.repos))
        drop += old_racy_entries(self._root_s, state)
        if drop or changes.repos:
            modified = bool(drop)
            self._update_index(["--force-remove"], drop, forget_untracked=bool(changes.repos))
            updated += len(drop)
            state.gitlinks = [g for g in state.gitlinks if g not in set(stale)]

        records, counters, status_started_ns, untracked_before = self._status(
            prefetch_fits=not (
                fresh or drop or changes.ignore or changes.attributes or changes.repos
            )
        )
        # A status started before this capture (prefetched): entries it recorded are racy from
        # its first second on, not this capture's.
        start_s = min(start_s, status_started_ns // 1_000_000_000)
        synced = quiet = counters.quiet
        if not quiet and not everywhere:
            # Some directory changed since git's untracked cache recorded it (an entry
            # created, removed or renamed; a .gitignore edited): an ignored rule file or a
            # .git may have appeared there, which status cannot list. Look at the directories
            # git read again, when its cache names them, else everywhere (their stamps first),
            # now; when something did change, status runs again after these.
            after = read_extension(self.index.index_path)
            reread = reread_dirs(untracked_before, after, counters.opened)
            dirs, late = late_dirs(state.dirs, reread, self._root_s), RuleChanges()
            self._compare_rules(state, dirs, late, stamped=True, after_rules=True)
            synced = True
            if late:
                changes.merge(late)
                if late.repos:  # the untracked cache is dropped even with no entries (above)
                    again = self.ls_private(topmost(late.repos))
                    self._update_index(["--force-remove"], again, forget_untracked=True)
                    modified = modified or bool(again)
                    updated += len(again)
                records, counters, status_started_ns, _ = self._status()
                synced = counters.quiet
        ignore_dirs, attr_dirs = changes.ignore, changes.attributes

        plan = classify(
            parse_status(records),
            self.settings,
            self,
            gitlinks=state.gitlinks,
            kept_protected=state.kept_protected,
            known_git_dirs=state.git_dirs,
        )
        if first:  # before anything is written (docs/design.md#first-capture-limits)
            check_first_capture(
                plan, self.settings, self, root=self.root, shadow=isinstance(self.repo, ShadowRepo)
            )
        state.kept_protected = plan.kept_protected
        state.git_dirs = plan.git_dirs
        try:
            check_dirty(
                self.git, self.index.index_path, self.root, state.gitlinks, plan, PRIVATE_CONFIG
            )
        except DirtySubmoduleError:
            # Nothing of the plan was applied, but status may have refreshed entries: guard
            # them, and keep the old rule signatures so that their changes are still seen
            # (everywhere, next time: status may have recorded directories since); no stamps.
            state.dirs = saved_dirs
            state.stamps.clear()
            state.synced = False
            if modified:
                state.tree = None
            guard_racy_entries(self.index.index_path, state, start_s)
            self.index.save_state(state)
            raise

        new_dirs = self._new_dirs(state, plan.add)
        since = status_started_ns - 1_000_000_000  # and a negative ctime: RACY_CTIME, recent
        recheck = set(ignore_dirs) | {
            d
            for d in new_dirs
            if (sig := state.dirs[d].ignore) is not None and not 0 <= sig.ctime_ns < since
        }
        if not (modified or fresh or recheck or attr_dirs) and state.tree is not None:
            lazy_tree = self._lazy_tree(state, plan)
            if lazy_tree is not None:
                state.synced = synced
                guard_racy_entries(self.index.index_path, state, start_s)
                self.index.save_state(state)
                self.last_state = state
                return CaptureResult(
                    lazy_tree,
                    tuple(plan.skipped.values()),
                    fresh,
                    len(plan.paths),
                )
        if plan.force_remove or plan.update or plan.add:
            modified = True
            if plan.force_remove:
                self._update_index(["--force-remove"], plan.force_remove)
            if plan.update or plan.add:
                self._update_index(["--add", "--remove", "--replace"], plan.update + plan.add)
            updated += len(plan.force_remove) + len(plan.update) + len(plan.add)
        gitlinks = (set(state.gitlinks) - plan.gone_gitlinks) | set(plan.new_gitlinks)
        state.gitlinks = sorted(gitlinks)

        # Newly ignored tracked entries: only where rules changed, and under directories first
        # seen now whose .gitignore changed around the time status read it (a second of margin
        # for coarse file timestamps; a signature read within 2 s of a change has no ctime).
        if recheck:
            ignored = self.ls_private(topmost(recheck), ignored=True)
            if ignored:
                modified = True
                self._update_index(["--force-remove"], ignored)
                updated += len(ignored)

        if attr_dirs:
            modified = True
            targets = topmost(attr_dirs)
            self.git.run(
                ["add", "--renormalize", "--", *[t or "." for t in targets]],
                operation="renormalize capture index",
                index=self.index.index_path,
                config=PRIVATE_CONFIG,
                optional_locks=True,
            )
            updated += 1

        if modified or state.tree is None:
            state.tree = self._write_tree()
        state.synced = synced
        guard_racy_entries(self.index.index_path, state, start_s)
        self.index.save_state(state)
        self.last_state = state
        return CaptureResult(state.tree, tuple(plan.skipped.values()), fresh, updated)

    # --- steps ---------------------------------------------------------------------------

    def _lazy_tree(self, state: CaptureState, plan: CapturePlan) -> str | None:
        """The capture's tree from the index's tree plus the paths status listed, without
        rewriting the index (:mod:`ledger.git.capture.treeedit`), when the change set is small and
        plain; ``None`` to take the ordinary path."""
        paths = plan.paths
        if not paths:
            return state.tree
        if (
            len(paths) > LAZY_MAX_PATHS
            or plan.new_gitlinks
            or plan.gone_gitlinks
            or plan.gitlinks_changed
        ):
            return None
        assert state.tree is not None
        try:
            changes = current_entries(
                self.git,
                self.repo.pygit2,
                self._root_s,
                paths,
                filemode=self._filemode,
                config=PRIVATE_CONFIG,
            )
            for path in plan.force_remove:
                changes[path] = None
            return edit_tree(self.repo.pygit2, state.tree, changes)
        except LazyUnsupported:
            return None

    def _status(
        self, *, prefetch_fits: bool = False
    ) -> tuple[list[bytes], TraceCounters, int, CacheSnapshot | None]:
        """``git status`` on the private index: its records, git's untracked-cache counters,
        when it started (``time_ns``), and the index's untracked cache as it was (read under our
        lock). ``prefetch_fits``: nothing changed the index or the rules since a status this
        command started early (:mod:`ledger.git.capture.prefetch`), which is then taken if it
        is exactly this one; otherwise such a status is stopped first."""
        early = None
        if prefetch_fits and prefetch.pending():
            argv, env = status_command(self.git, self.index.index_path)
            early = prefetch.take(self.index.index_path, argv, env)
        if early is None:
            prefetch.discard()
            before = read_extension(self.index.index_path)
            parsing = prepare_in_background(before)  # while git runs, off the capture's path
            started_ns = time.time_ns()
            try:
                result = self.git.run(
                    STATUS_ARGS,
                    operation="git status (capture index)",
                    index=self.index.index_path,
                    config=PRIVATE_CONFIG,
                    optional_locks=True,
                    extra_env=TRACE_ENV,
                )
            except GitError as exc:
                raise IndexUnusable(str(exc)) from exc
            finally:
                if parsing is not None:
                    parsing.join()
        else:
            started_ns = early.started_ns
            before = early.untracked_before
            result = GitResult(early.returncode, early.stdout, early.stderr)
            if result.returncode != 0:
                detail = first_lines(result.stderr) or f"exit status {result.returncode}"
                raise IndexUnusable(str(GitError("git status (capture index)", detail)))
        return result.lines_z(), TraceCounters(result.stderr), started_ns, before

    def _compare_rules(
        self,
        state: CaptureState,
        dirs: Sequence[str],
        into: RuleChanges,
        *,
        stamped: bool = False,
        after_rules: bool = False,
    ) -> None:
        """Re-sign the rules of ``dirs`` (known directories), record them in ``state`` and list
        the directories whose ignore rules, attributes or repository status changed.
        ``stamped``: skip the directories whose stamp says that none of their entries changed
        since they were signed (:func:`~ledger.git.capture.state.to_sign`; ``after_rules``:
        this capture's rule-directory pass has run). Without it (that pass: a few directories)
        the stamps stay as they are, neither decoded nor encoded (~10 ms at 10k directories)."""
        root, known = self._root_s, state.dirs
        todo: Iterable[str] = dirs
        if stamped:
            limit_ns = stamp_limit(self.index.pending_path)
            todo = to_sign(root, dirs, known, state.stamps, limit_ns, after_rules=after_rules)
        for rel in todo:
            previous = known[rel]
            current = dir_signatures(root, rel, previous)
            if current == previous:
                continue
            if not same_content(previous.ignore, current.ignore):
                into.ignore.append(rel)
            if not same_content(previous.attributes, current.attributes):
                into.attributes.append(rel)
            if rel and current.has_git and not previous.has_git:
                into.repos.append(rel)
            known[rel] = current

    def _new_dirs(self, state: CaptureState, added: Sequence[str]) -> list[str]:
        fresh: list[str] = []
        limit_ns = stamp_limit(self.index.pending_path)
        for path in added:
            for parent in parent_dirs(path):
                if parent in state.dirs:
                    break
                stamp = dir_stamp(f"{self._root_s}/{parent}" if parent else self._root_s, limit_ns)
                state.dirs[parent] = dir_signatures(self._root_s, parent)
                state.stamps[parent] = stamp
                fresh.append(parent)
        return fresh

    def _write_tree(self) -> str:
        try:
            result = self.git.run(
                ["write-tree"],
                operation="git write-tree",
                index=self.index.index_path,
                config=PRIVATE_CONFIG,
            )
        except GitError as exc:  # e.g. objects only our index referenced were pruned
            raise IndexUnusable(str(exc)) from exc
        return result.text.strip()

    # --- small git helpers (also the :class:`~ledger.git.capture.plan.Probe` of classify) ---

    def _update_index(
        self, options: list[str], paths: Sequence[str], *, forget_untracked: bool = False
    ) -> None:
        """``update-index`` on the private index, after stopping an early status (it may hold
        git's index.lock). ``forget_untracked`` also drops the untracked cache, for a directory
        that became a repository: with ``showUntrackedFiles=all`` git invalidates a removed entry's
        directory, not its parents, nor one that held no entry (lazy trees), so their cached
        "recurse into it" would list its files, not ``dir/`` (dir.c invalidate_one_component)."""
        prefetch.discard()
        config = PRIVATE_CONFIG
        if forget_untracked:
            options = [*options, "--no-untracked-cache"]
            config = (*PRIVATE_CONFIG, ("core.untrackedCache", "false"))
        self.git.run(
            ["update-index", *options, "-z", "--stdin"],
            input=nul_join(paths),
            operation="git update-index (capture index)",
            index=self.index.index_path,
            config=config,
            optional_locks=True,
        )

    def ls_private(self, dirs: Sequence[str], *, ignored: bool = False) -> list[str]:
        """Entries of the private index under ``dirs`` (``""`` = all); only ignored ones if
        ``ignored``."""
        options = ["-c", "-i", "--exclude-standard"] if ignored else ["-c"]
        specs = [d for d in dirs if d]
        out: list[str] = []
        groups: list[list[str]] = (
            [[]] if (not specs or len(specs) < len(dirs)) else list(chunks(specs))
        )
        for chunk in groups:
            result = self.git.run(
                ["ls-files", "-z", *options, "--", *chunk],
                operation="git ls-files (capture index)",
                index=self.index.index_path,
                config=PRIVATE_CONFIG,
            )
            out += [decode_path(p) for p in result.lines_z()]
        return out

    def user_tracked(self, paths: Sequence[str]) -> set[str]:
        """Which of ``paths`` (files or directories) the user's own index tracks, as the set
        of tracked paths found under them. Read-only on ``.git/index``."""
        found: set[str] = set()
        for chunk in chunks(paths):
            result = self.git.run(
                ["ls-files", "-z", "--cached", "--", *chunk], operation="git ls-files (user index)"
            )
            found.update(decode_path(p) for p in result.lines_z())
        return found

    def user_tracked_all(self) -> frozenset[str]:
        result = self.git.run(["ls-files", "-z", "--cached"], operation="git ls-files (user index)")
        return frozenset(decode_path(p) for p in result.lines_z())

    def regular_size(self, path: str) -> int | None:
        try:
            st = os.lstat(os.path.join(self._root_s, path))
        except OSError:
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def has_dotgit(self, path: str) -> bool:
        return bool(path) and os.path.lexists(os.path.join(self._root_s, path, ".git"))

    def is_git_dir(self, path: str) -> bool:
        return bool(path) and is_git_dir(os.path.join(self._root_s, path))

    def is_dir(self, path: str) -> bool:
        return (self.root / path).is_dir()

    def repo_has_commit(self, path: str) -> bool:
        try:
            nested = pygit2.Repository(str(self.root / path))
            return not nested.head_is_unborn
        except (pygit2.GitError, OSError, ValueError, KeyError):
            return False


def _active_feed(repo: GitRepo) -> Any:
    """The change feed of ``repo`` when this process runs feeds (the module is imported only by
    ``rewind serve``; one-shot commands never pay for it)."""
    module = finished("ledger.git.feed.service")  # never half-imported
    if module is None or not module.enabled():
        return None
    return module.feed_for(repo)


def _delegated(capturer: Capturer) -> CaptureResult | None:
    """The capture made by the watcher this bridge delegates to (:mod:`ledger.bridge.delegate`,
    looked up, never imported: only ``rewind serve`` delegates), or ``None``: capture here."""
    module = finished("ledger.bridge.delegate")
    delegation = module.current() if module is not None else None
    if delegation is None:
        return None
    result: CaptureResult | None = delegation.capture(capturer.root, capturer.settings)
    return result


def _index_error(directory: Path, detail: str, code: int | None) -> CaptureIndexError:
    return CaptureIndexError(
        directory, detail, no_space=code in (errno.ENOSPC, errno.EDQUOT) or _NO_SPACE in detail
    )


def capture_tree(repo: GitRepo, settings: SnapshotSettings | None = None) -> CaptureResult:
    """Capture ``repo``'s work tree (see :class:`Capturer`)."""
    return Capturer(repo, settings).capture()
