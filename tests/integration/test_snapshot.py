"""``take_snapshot``: dedup against the latest exact snapshot (D8), identity fallback (D16),
the injected clock, and the caller's own ``last_exact``."""

from __future__ import annotations

import os
from pathlib import Path

from ledger.clock import FixedClock
from ledger.git.repo import GitRepo
from ledger.git.store.chain import STORE_REF, Store
from ledger.git.store.snapshot import (
    LastExact,
    load_last_exact,
    save_last_exact,
    take_snapshot,
)
from tests.gitkit import fresh_tree, git


def _count_snapshots(repo: Path) -> int:
    return git(repo, "log", "--format=%s", STORE_REF).splitlines().count("pi rewind snapshot")


def test_unchanged_work_tree_reuses_the_latest_snapshot(repo: Path) -> None:
    gitrepo = GitRepo.discover(repo)
    first = take_snapshot(gitrepo)
    again = take_snapshot(gitrepo)
    assert not first.reused and again.reused
    assert again.commit == first.commit and again.tree == first.tree == fresh_tree(repo)
    assert _count_snapshots(repo) == 1
    assert load_last_exact(gitrepo) == LastExact(first.commit, first.tree)


def test_same_size_rewrite_makes_a_new_snapshot(repo: Path) -> None:
    """Reference case 23: the exact commit is reused only while files are unchanged."""
    gitrepo = GitRepo.discover(repo)
    (repo / "notes.txt").write_text("bbbb\n")
    turn = take_snapshot(gitrepo)
    assert take_snapshot(gitrepo).commit == turn.commit
    (repo / "notes.txt").write_text("cccc\n")
    after = take_snapshot(gitrepo)
    assert after.commit != turn.commit and after.tree == fresh_tree(repo)
    assert _count_snapshots(repo) == 2


def test_unreachable_latest_snapshot_is_not_reused(repo: Path) -> None:
    """D8: a commit the store no longer reaches would be pruned by gc."""
    gitrepo = GitRepo.discover(repo)
    first = take_snapshot(gitrepo)
    git(repo, "update-ref", "-d", STORE_REF)
    again = take_snapshot(gitrepo)
    assert first.commit and not again.reused
    assert Store(gitrepo).reaches(again.commit)  # (same tree and second: maybe the same id)


def test_callers_last_exact_drives_dedup(repo: Path) -> None:
    gitrepo = GitRepo.discover(repo)
    base = take_snapshot(gitrepo)
    assert not take_snapshot(gitrepo, last_exact=None).reused
    assert take_snapshot(gitrepo, last_exact=LastExact(base.commit, base.tree)).reused
    wrong_tree = LastExact(base.commit, "4b825dc642cb6eb9a060e54bf8d69288fbee4904")
    assert not take_snapshot(gitrepo, last_exact=wrong_tree).reused
    lying = LastExact(base.commit, fresh_tree(repo))
    (repo / "README.md").write_text("changed\n")
    assert not take_snapshot(gitrepo, last_exact=lying).reused


def test_persisted_last_exact_can_be_forgotten(repo: Path) -> None:
    gitrepo = GitRepo.discover(repo)
    take_snapshot(gitrepo)
    save_last_exact(gitrepo, None)
    assert load_last_exact(gitrepo) is None
    assert not take_snapshot(gitrepo).reused
    (repo / ".git" / "pi-rewind" / "last-snapshot.json").write_text("{broken")
    assert load_last_exact(gitrepo) is None


def test_persisted_record_is_rewritten_only_when_it_changes(repo: Path) -> None:
    """A reused snapshot leaves the record's file alone (no write and rename); a
    record naming another snapshot (another session's, or the caller's own dedup value) is
    brought in step with the result."""
    gitrepo = GitRepo.discover(repo)
    first = take_snapshot(gitrepo)
    record = repo / ".git" / "pi-rewind" / "last-snapshot.json"
    witness = record.with_name("witness")  # a second name: a rename over the record unlinks it
    os.link(record, witness)
    assert take_snapshot(gitrepo).reused
    assert take_snapshot(gitrepo, last_exact=LastExact(first.commit, first.tree)).reused
    assert record.stat().st_nlink == 2 and os.path.samefile(record, witness)
    save_last_exact(gitrepo, LastExact(first.commit, "4b825dc642cb6eb9a060e54bf8d69288fbee4904"))
    again = take_snapshot(gitrepo, last_exact=LastExact(first.commit, first.tree))
    assert again.reused and load_last_exact(gitrepo) == LastExact(first.commit, first.tree)


def test_a_fifo_in_place_of_the_record_is_no_record_and_never_blocks(repo: Path) -> None:
    """The record is read on every snapshot (also with the caller's own dedup value): a FIFO
    there must not hang the capture; it is replaced by a real record."""
    gitrepo = GitRepo.discover(repo)
    first = take_snapshot(gitrepo)
    record = repo / ".git" / "pi-rewind" / "last-snapshot.json"
    record.unlink()
    os.mkfifo(record)
    assert load_last_exact(gitrepo) is None
    again = take_snapshot(gitrepo, last_exact=LastExact(first.commit, first.tree))
    assert again.reused and record.is_file()
    assert load_last_exact(gitrepo) == LastExact(first.commit, first.tree)


def test_snapshot_uses_a_fallback_identity_when_git_has_none(tmp_path: Path) -> None:
    """D16."""
    path = tmp_path / "anon"
    path.mkdir()
    git(path, "init", "-q")
    git(path, "config", "user.useConfigOnly", "true")
    (path / "a.txt").write_text("a\n")
    report = take_snapshot(GitRepo.discover(path))
    assert report.identity_fallback
    raw = git(path, "cat-file", "commit", report.commit)
    assert "author pi-rewind <pi-rewind@localhost> " in raw
    assert "\nHead:" not in raw  # unborn HEAD: no Head/Branch lines
    git(path, "cat-file", "-e", f"{report.store_head}^{{commit}}")


def test_snapshot_times_come_from_the_injected_clock(repo: Path) -> None:
    report = take_snapshot(GitRepo.discover(repo), clock=FixedClock(1_795_316_510_000))
    stamp = git(repo, "show", "-s", "--format=%at %ct", report.commit).split()
    assert stamp == ["1795316510", "1795316510"]


def test_snapshot_reports_json_payload(repo: Path) -> None:
    report = take_snapshot(GitRepo.discover(repo))
    payload = report.to_json()
    assert list(payload) == ["commit", "tree", "reused", "skipped", "ms"]
    assert payload["commit"] == report.commit and payload["skipped"] == []
