"""Capturing, snapshotting and restoring real repositories through ledger's git layer.

The helpers the capture, snapshot, restore and sweep tests share (they used to import them from
one another's modules). Repositories and oracles come from :mod:`tests.gitkit`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ledger.git.capture.scan import capture_tree
from ledger.git.repo import GitRepo
from ledger.git.restore.run import RestoreOutcome, restore_commit
from ledger.git.store.chain import STORE_REF
from ledger.git.store.snapshot import take_snapshot
from ledger.record_models import build_op
from ledger.records import OP
from ledger.session.store import SessionAppender, create_session_file
from ledger.settings import RetentionSettings, Settings, SnapshotSettings
from tests.gitkit import fresh_tree, git, ls_tree

NO_PROTECTION = SnapshotSettings(max_untracked_file_bytes=0, protected_dirs=())


def capture(path: Path, settings: SnapshotSettings | None = NO_PROTECTION) -> str:
    """Our capture's tree, started from ``path`` (may be a subdirectory)."""
    return capture_tree(GitRepo.discover(path), settings).tree


def assert_parity(repo: Path, *, start: Path | None = None, exclude: tuple[str, ...] = ()) -> str:
    """Our capture equals the fresh-index oracle; returns the tree."""
    ours = capture(start or repo)
    expected = fresh_tree(repo, exclude=exclude)
    if ours != expected:
        raise AssertionError(
            f"capture {ours} != fresh-index tree {expected}\n"
            f"ours:\n{ls_tree(repo, ours)}\nexpected:\n{ls_tree(repo, expected)}"
        )
    return ours


def snapshot(repo: Path, settings: SnapshotSettings = NO_PROTECTION) -> str:
    """A snapshot commit of the work tree as it is now (never reusing the latest one)."""
    return take_snapshot(GitRepo.discover(repo), settings, last_exact=None).commit


def restore(
    repo: Path, commit: str, settings: SnapshotSettings = NO_PROTECTION, **kwargs: object
) -> RestoreOutcome:
    gitrepo = GitRepo.discover(repo)
    return restore_commit(gitrepo, commit, settings, **kwargs)  # type: ignore[arg-type]


def store_snapshots(repo: Path) -> int:
    """How many snapshot commits ``refs/pi-rewind/store`` keeps."""
    out = git(repo, "log", "--format=%s", STORE_REF, check=False)
    return out.splitlines().count("pi rewind snapshot")


# --- the store, as the sweep tests see it ------------------------------------------------------


def snapshot_file(repo: Path, name: str, text: str) -> str:
    """Write ``name`` and take a snapshot (reusing the latest one when nothing changed)."""
    (repo / name).write_text(text)
    return take_snapshot(GitRepo.discover(repo)).commit


def set_store(repo: Path, sha: str) -> None:
    git(repo, "update-ref", STORE_REF, sha)


def store_head(repo: Path) -> str:
    return git(repo, "rev-parse", STORE_REF).strip()


def is_ancestor(repo: Path, commit: str) -> bool:
    """Whether the store keeps ``commit``."""
    return (
        subprocess.run(
            ["git", "merge-base", "--is-ancestor", commit, STORE_REF], cwd=repo, check=False
        ).returncode
        == 0
    )


def ledger_session(
    agent_dir: Path,
    repo: Path,
    *,
    current: str | None = None,
    parent: Path | None = None,
    cwd: Path | None = None,
) -> Path:
    """A new session file of ``repo`` (its ``cwd``), with one ``rewind-op`` naming ``current``."""
    path = create_session_file(
        agent_dir / "sessions", str(cwd or repo), parent_session=str(parent) if parent else None
    )
    if current is not None:
        SessionAppender(path).append_custom(OP, build_op(current=current).to_data())
    return path


def retention(**fields: object) -> Settings:
    """Settings with retention on, with these ``RetentionSettings`` fields."""
    return Settings(retention=RetentionSettings(**fields))  # type: ignore[arg-type]
