"""Retention's git side: rewrite the store to a live set, and say what that frees and when.

Why it exists: the retention sweep (:mod:`ledger.retention.sweep`) and ``rewind doctor``
(:mod:`ledger.doctor`) must not import pygit2 or build git commands. This module gives them
three questions and one write:

- :func:`rewrite_store` — the compare-and-swap rewrite (docs/formats.md#rewriting-the-store,
  docs/design.md#the-compare-and-swap-rewrite, with D7 fixed; the retry lives in
  :meth:`ledger.git.store.Store.rewrite`), stamped with git's identity.
- :func:`reclaimable_objects` — how many objects (commits, trees, blobs) stop being reachable
  from any ref when the store keeps only ``kept`` instead of its old chain: what ``git gc`` may
  reclaim; :func:`reclaimable_bytes`, the same objects' bytes on disk.
- :func:`chain_started_ms` — when the current chain began: the commit time of its first
  keepalive, i.e. the last rewrite (or the first append). A referenced snapshot recorded after
  that and not kept by the store fell out by accident, not by a sweep.

Invariants: :func:`rewrite_store` writes only ``refs/pi-rewind/store`` and new keepalive
objects; the other functions only read. No reflog, no hook, no gc.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ledger.git.repo import GitRepo
from ledger.git.runner import EMPTY_TREE, GitRunner
from ledger.git.store import STORE_REF, RewriteResult, Store, is_keepalive, offset_minutes


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
    from ledger.git.snapshot import git_identity

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


def reclaimable_objects(repo: GitRepo, old_head: str | None, kept: Iterable[str]) -> int:
    """Objects reachable from the old chain ``old_head`` and from nothing else once the store
    keeps only ``kept`` (and every other ref, HEAD and the empty tree stay): old keepalives,
    dropped snapshots and the trees and blobs only they use."""
    return _rev_list_dropped(repo, old_head, kept, "--count")


def reclaimable_bytes(repo: GitRepo, old_head: str | None, kept: Iterable[str]) -> int:
    """Approximate bytes on disk (``rev-list --disk-usage``: a loose file's size, a packed
    object's share of its pack) of the same objects as :func:`reclaimable_objects`: what
    dropping the others gives back (at once in a shadow; at the user's next gc in a
    repository)."""
    return _rev_list_dropped(repo, old_head, kept, "--disk-usage")


def _rev_list_dropped(repo: GitRepo, old_head: str | None, kept: Iterable[str], mode: str) -> int:
    """``git rev-list --objects <mode>`` over what ``old_head`` reaches and neither ``kept``,
    the empty tree nor any ref but the store reaches; 0 when there is nothing to ask or git
    cannot answer (doctor reports a broken store on its own)."""
    if old_head is None or not repo.commit_exists(old_head):
        return 0
    lines = [old_head, *(f"^{sha}" for sha in dict.fromkeys(kept) if repo.commit_exists(sha))]
    if repo.object(EMPTY_TREE) is not None:
        lines.append(f"^{EMPTY_TREE}")  # every chain uses it
    runner = GitRunner(repo.root, repo.git_dir)
    result = runner.run(
        ["rev-list", "--objects", mode, "--stdin", "--not", f"--exclude={STORE_REF}", "--all"],
        operation=f"git rev-list --objects {mode}",
        check=False,
        input=("\n".join(lines) + "\n").encode(),
    )
    text = result.stdout.decode().strip() if result.returncode == 0 else ""
    return int(text) if text.isdigit() else 0


__all__ = [
    "ChainShape",
    "chain_shape",
    "chain_started_ms",
    "reclaimable_bytes",
    "reclaimable_objects",
    "rewrite_store",
]
