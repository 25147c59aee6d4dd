"""Protected paths: large untracked files and untracked dependency/cache directories are left out
of captures and reported; anything the user's git tracks is still captured."""

from __future__ import annotations

from pathlib import Path

from ledger.git.capture.scan import capture_tree
from ledger.git.repo import GitRepo
from ledger.settings import SnapshotSettings
from tests.gitkit import fresh_tree, git, ls_tree
from tests.snapshotkit import assert_parity

SMALL_LIMIT = SnapshotSettings(max_untracked_file_bytes=1000)


def _capture(repo: Path, settings: SnapshotSettings | None = None):  # type: ignore[no-untyped-def]
    return capture_tree(GitRepo.discover(repo), settings or SnapshotSettings())


def test_capture_skips_and_reports_untracked_protected_directories(repo: Path) -> None:
    (repo / "node_modules" / "pkg").mkdir(parents=True)
    (repo / "node_modules" / "pkg" / "index.js").write_text("module.exports = 1\n")
    (repo / "web" / "node_modules").mkdir(parents=True)
    (repo / "web" / "node_modules" / "x.js").write_text("x\n")
    (repo / "web" / "app.js").write_text("app\n")
    (repo / "pkg" / "__pycache__").mkdir(parents=True)
    (repo / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\0pyc")
    (repo / "pkg" / "m.py").write_text("m = 1\n")
    result = _capture(repo)
    assert result.tree == fresh_tree(
        repo, exclude=("node_modules", "web/node_modules", "pkg/__pycache__")
    )
    assert sorted(s.path for s in result.skipped) == [
        "node_modules/",
        "pkg/__pycache__/",
        "web/node_modules/",
    ]
    assert {s.reason for s in result.skipped} == {"protected-dir"}
    # Reported again on the next capture, from the kept index.
    again = _capture(repo)
    assert again.tree == result.tree
    assert len(again.skipped) == 3


def test_capture_keeps_protected_directories_the_user_tracks(repo: Path) -> None:
    (repo / "vendor" / "node_modules").mkdir(parents=True)
    (repo / "vendor" / "node_modules" / "kept.js").write_text("tracked\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "vendored deps")
    (repo / "vendor" / "node_modules" / "new.js").write_text("untracked but in a tracked dir\n")
    result = _capture(repo)
    assert result.tree == fresh_tree(repo)
    assert result.skipped == ()
    # Once the user stops tracking it, the directory is protected again.
    git(repo, "rm", "-r", "-q", "--cached", "vendor/node_modules")
    result = _capture(repo)
    assert result.tree == fresh_tree(repo, exclude=("vendor/node_modules",))
    assert [s.path for s in result.skipped] == ["vendor/node_modules/"]


def test_capture_does_not_protect_ignored_directories_twice(repo: Path) -> None:
    (repo / ".gitignore").write_text("node_modules/\n")
    (repo / "node_modules").mkdir()
    (repo / "node_modules" / "a.js").write_text("a\n")
    result = _capture(repo)
    assert result.tree == fresh_tree(repo)
    assert result.skipped == ()


def test_capture_skips_large_untracked_files_and_reports_their_size(repo: Path) -> None:
    (repo / "big.bin").write_bytes(b"x" * 5000)
    (repo / "small.txt").write_text("small\n")
    result = _capture(repo, SMALL_LIMIT)
    assert result.tree == fresh_tree(repo, exclude=("big.bin",))
    assert [(s.path, s.reason, s.size) for s in result.skipped] == [("big.bin", "too-large", 5000)]


def test_capture_drops_an_untracked_file_that_grows_past_the_limit(repo: Path) -> None:
    (repo / "log.txt").write_text("short\n")
    assert "log.txt" in ls_tree(repo, _capture(repo, SMALL_LIMIT).tree)
    (repo / "log.txt").write_bytes(b"y" * 2000)
    result = _capture(repo, SMALL_LIMIT)
    assert result.tree == fresh_tree(repo, exclude=("log.txt",))
    assert [s.path for s in result.skipped] == ["log.txt"]
    (repo / "log.txt").write_text("short again\n")
    assert _capture(repo, SMALL_LIMIT).tree == fresh_tree(repo)


def test_capture_keeps_large_files_the_user_tracks(repo: Path) -> None:
    (repo / "data.bin").write_bytes(b"z" * 5000)
    git(repo, "add", "data.bin")
    git(repo, "commit", "-qm", "data")
    (repo / "data.bin").write_bytes(b"w" * 6000)
    result = _capture(repo, SMALL_LIMIT)
    assert result.tree == fresh_tree(repo)
    assert result.skipped == ()


def test_capture_with_protection_off_equals_the_reference(repo: Path) -> None:
    (repo / "node_modules").mkdir()
    (repo / "node_modules" / "a.js").write_text("a\n")
    (repo / ".venv" / "lib").mkdir(parents=True)
    (repo / ".venv" / "lib" / "site.py").write_text("s\n")
    (repo / "huge.bin").write_bytes(b"h" * 100_000)
    assert_parity(repo)  # limit 0 and no protected names


def test_changing_the_protection_settings_rebuilds_the_capture(repo: Path) -> None:
    (repo / "build_cache").mkdir()
    (repo / "build_cache" / "c.o").write_text("o\n")
    first = _capture(repo, SnapshotSettings(protected_dirs=()))
    assert first.tree == fresh_tree(repo)
    second = _capture(repo, SnapshotSettings(protected_dirs=("build_cache",)))
    assert second.tree == fresh_tree(repo, exclude=("build_cache",))
    assert second.rebuilt
