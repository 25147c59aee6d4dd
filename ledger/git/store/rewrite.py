"""Retention's git side: rewrite the store to a live set, and say what that frees and when.

Why it exists: the retention sweep (:mod:`ledger.retention.sweep`) and ``rewind doctor``
(:mod:`ledger.doctor`) must not import pygit2 or build git commands. This module gives them
three questions and one write:

- :func:`rewrite_store` — the compare-and-swap rewrite (docs/formats.md#rewriting-the-store,
  docs/design.md#the-compare-and-swap-rewrite, with D7 fixed; the retry lives in
  :meth:`ledger.git.store.chain.Store.rewrite`), stamped with git's identity.
- :func:`reclaimable` — how many objects (commits, trees, blobs) stop being reachable from any
  ref when the store keeps only ``kept`` instead of its old chain (what ``git gc`` may reclaim),
  and their bytes on disk, from one walk (it was two, ``--count`` and ``--disk-usage``, which
  git does not combine: with both it prints a count of 0).
- :func:`chain_started_ms` — when the current chain began: the commit time of its first
  keepalive, i.e. the last rewrite (or the first append). A referenced snapshot recorded after
  that and not kept by the store fell out by accident, not by a sweep.

Invariants: :func:`rewrite_store` writes only ``refs/pi-rewind/store`` and new keepalive
objects; the other functions only read. No reflog, no hook, no gc.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from ledger.errors import GitError
from ledger.git.repo import GitRepo
from ledger.git.runner import EMPTY_TREE, GitRunner
from ledger.git.store.chain import STORE_REF, RewriteResult, Store, is_keepalive, offset_minutes


@dataclass(frozen=True)
class ChainShape:
    """The store chain as :func:`chain_shape` found it."""

    head: str | None
    keepalives: int
    started_ms: int | None
    """Commit time of the first keepalive; None when there is no chain of keepalives."""


def rewrite_store(
    repo: GitRepo, live: list[str], *, since: str | None, now_ms: int
) -> RewriteResult:
    """Rewrite ``refs/pi-rewind/store`` to keep exactly ``live`` plus every snapshot appended on
    top of ``since`` meanwhile (compare-and-swap, retried). An empty ``live`` changes nothing.
    Raises :class:`~ledger.errors.StoreUpdateError` when the swap keeps failing."""
    from ledger.git.store.chain import git_identity

    when_s = now_ms // 1000
    return Store(repo).rewrite(
        live,
        since=since,
        identity=git_identity(repo),
        when_s=when_s,
        offset_min=offset_minutes(when_s),
    )


def chain_shape(repo: GitRepo, head: str | None = None) -> ChainShape:
    """Walk the first-parent chain from ``head`` (default: the store ref) while it is made of
    keepalives; cycle-safe."""
    head = Store(repo).head() if head is None else head
    sha, seen, keepalives, started = head, set(), 0, None
    while sha and sha not in seen:
        seen.add(sha)
        commit = repo.commit(sha)
        if commit is None or not is_keepalive(commit):
            break
        keepalives += 1
        started = commit.commit_time * 1000
        parents = [str(p) for p in commit.parent_ids]
        sha = parents[0] if len(parents) == 2 else None
    return ChainShape(head, keepalives, started)


def chain_started_ms(repo: GitRepo) -> int | None:
    return chain_shape(repo).started_ms


@dataclass(frozen=True)
class Reclaimable:
    """What :func:`reclaimable` found; both 0 when there was nothing to ask or git could not
    answer (doctor reports a broken store on its own)."""

    objects: int
    """Objects reachable from the old chain and from nothing else once the store keeps only
    the kept set: old keepalives, dropped snapshots and the trees and blobs only they use."""
    bytes: int
    """Their bytes on disk (``%(objectsize:disk)``, what ``rev-list --disk-usage`` sums: a loose
    file's size, a packed object's share of its pack): what dropping the others gives back (at
    once in a shadow; at the user's next gc in a repository)."""
    complete: bool = True
    """False: the walk ran out of its time budget and was killed (both figures are 0)."""


def reclaimable(
    repo: GitRepo, old_head: str | None, kept: Iterable[str], *, budget_s: float | None = None
) -> Reclaimable:
    """What stops being reachable from any ref when the store keeps only ``kept`` instead of
    its old chain ``old_head`` (every other ref, HEAD and the empty tree stay): what ``git gc``
    may reclaim. One walk (``git rev-list --objects``, piped into ``git cat-file
    --batch-check``) gives both the count and the bytes; ``budget_s`` kills it when it runs
    longer (``complete`` False)."""
    from ledger.git.store.usage import Deadline

    if old_head is None or not repo.commit_exists(old_head):
        return Reclaimable(0, 0)
    lines = [old_head, *(f"^{sha}" for sha in dict.fromkeys(kept) if repo.commit_exists(sha))]
    if repo.object(EMPTY_TREE) is not None:
        lines.append(f"^{EMPTY_TREE}")  # every chain uses it
    runner = GitRunner(repo.root, repo.git_dir)
    args = ["rev-list", "--objects", "--no-object-names", "--stdin"]
    args += ["--not", f"--exclude={STORE_REF}", "--all"]
    objects = size = 0
    try:
        with Deadline(budget_s) as deadline:
            listing = deadline.start(runner, args, stdin=subprocess.PIPE)
            sizes = deadline.start(
                runner, ["cat-file", "--batch-check=%(objectsize:disk)"], stdin=listing.stdout
            )
            assert listing.stdin is not None and listing.stdout is not None
            assert sizes.stdout is not None
            listing.stdout.close()  # cat-file holds it now
            # rev-list reads all of its stdin before it writes a line: no deadlock.
            with contextlib.suppress(BrokenPipeError), listing.stdin:
                listing.stdin.write(("\n".join(lines) + "\n").encode())
            with sizes.stdout:
                for line in sizes.stdout:
                    text = line.strip()
                    if text.isdigit():
                        objects += 1
                        size += int(text)
            codes = [proc.wait() for proc in deadline.procs]
    except OSError as exc:
        raise GitError("git rev-list --objects", str(exc)) from exc
    if deadline.expired:
        return Reclaimable(0, 0, complete=False)
    if any(codes):
        return Reclaimable(0, 0)
    return Reclaimable(objects, size)


__all__ = [
    "ChainShape",
    "Reclaimable",
    "chain_shape",
    "chain_started_ms",
    "reclaimable",
    "rewrite_store",
]
