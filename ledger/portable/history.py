"""Whether an archive's repository and the importing one share history (issue 25).

Why it exists: a session's snapshots are whole trees of one project. Imported into an unrelated
project, its restore would plan to replace that project's files with another's (a user test:
`76 added, 16 deleted`). The manifest records the exporting repository's HEAD and every snapshot
commit records the HEAD it was taken on (``Head:`` lines), so the import can check that the
target knows at least one of those commits before it writes anything.

Rules: shared when the target has the manifest's ``repositoryHead`` or any snapshot's recorded
HEAD (a clone made before the session's last commits still knows an earlier one), or when neither
side has a commit (a repository without commits, a shadow repository). Otherwise the import is
refused; ``--force`` imports anyway and says so.

Invariants: read-only; reads at most the snapshots' commit messages (bounded by the manifest).
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.errors import UnrelatedRepositoryError
from ledger.git.repo import GitRepo
from ledger.git.store.bundle_objects import ObjectView, has_commits
from ledger.portable.archive import Manifest

_HEAD_LINE = "Head: "


def recorded_heads(view: ObjectView, snapshots: Sequence[str]) -> list[str]:
    """The HEAD commits the snapshots were taken on (their ``Head:`` lines), first seen first."""
    heads: dict[str, None] = {}
    for sha in snapshots:
        commit = view.commit(sha)
        if commit is None:
            continue
        for line in commit.message.splitlines():
            if line.startswith(_HEAD_LINE):
                heads.setdefault(line[len(_HEAD_LINE) :].strip(), None)
    return list(heads)


def unrelated(
    repo: GitRepo, view: ObjectView, manifest: Manifest, snapshots: Sequence[str]
) -> str | None:
    """Why the archive's repository shares no history with ``repo`` (``None``: it does).
    ``view`` sees the archive's snapshot commits (the import's quarantine)."""
    known = [manifest.repository_head, *recorded_heads(view, snapshots)]
    heads = [h for h in known if h]
    if any(repo.commit_exists(h) for h in heads):
        return None
    target_has_commits = has_commits(repo)
    if not heads and not target_has_commits:
        return None  # neither side has a commit: nothing to compare
    origin = manifest.original_repo
    if not heads:
        return f"the archive comes from {origin}, which had no commit, and {repo.root} has history"
    head = (manifest.repository_head or heads[0])[:12]
    return (
        f"the archive comes from {origin} (HEAD {head}), which shares no commit with "
        f"{repo.root}: its snapshots are another project's files"
    )


def check_history(
    repo: GitRepo,
    view: ObjectView,
    manifest: Manifest,
    snapshots: Sequence[str],
    *,
    force: bool,
) -> list[str]:
    """Refuse (:class:`UnrelatedRepositoryError`, before anything is written) an archive of an
    unrelated project; with ``force``, the warning that says one was imported anyway."""
    reason = unrelated(repo, view, manifest, snapshots)
    if reason is None:
        return []
    if not force:
        raise UnrelatedRepositoryError(reason, repository=repo.root)
    return [f"imported with --force although {reason}"]


__all__ = ["check_history", "recorded_heads", "unrelated"]
