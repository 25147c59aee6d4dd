"""Reference cases 15, 16 and 19 (rewind-v2.md §16) and defects D2, D5, D6, D15 (§18) as
behaviours of ``restore_commit``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.errors import DirtySubmoduleError, UnsafeRestoreError
from tests.gitkit import files, fresh_tree, git, run_python, user_state, write
from tests.snapshotkit import restore, snapshot, store_snapshots

# --- submodules (cases 15, 16; D6) ---------------------------------------------------------


def test_case_15_restore_checks_a_submodule_out_detached_at_its_gitlink_commit(
    superproject: tuple[Path, dict[str, str]],
) -> None:
    sup, points = superproject
    write(sup, "top.txt", "changed in the superproject\n")

    outcome = restore(sup, points["first"])

    assert git(sup / "nested", "rev-parse", "HEAD").strip() == points["v1"]
    assert git(sup / "nested", "symbolic-ref", "-q", "HEAD", check=False) == ""  # detached
    assert (sup / "nested/file.txt").read_text() == "submodule v1\n"
    assert not (sup / "top.txt").exists()
    assert outcome.plan.submodules == (("nested", points["v1"]),)
    assert "nested" in outcome.plan.modified
    assert fresh_tree(sup) == outcome.plan.target_tree


def test_case_16_restore_refuses_to_remove_a_submodule(
    superproject: tuple[Path, dict[str, str]],
) -> None:
    sup, points = superproject
    state = user_state(sup)
    count = store_snapshots(sup)

    with pytest.raises(UnsafeRestoreError, match="adding or removing submodules") as info:
        restore(sup, points["before"])

    assert info.value.paths == ["nested"]
    assert (sup / "nested/file.txt").read_text() == "submodule v2\n"
    assert (sup / "nested/.git").exists()
    assert user_state(sup) == state
    assert store_snapshots(sup) == count  # refused before the undo snapshot


def test_restore_refuses_to_add_a_submodule(
    superproject: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    sup, points = superproject
    git(sup, "rm", "-q", "-r", "--cached", "nested")
    os.rename(sup / "nested", tmp_path / "moved-away")
    (sup / ".gitmodules").unlink()
    write(sup, "other.txt", "x\n")
    state = user_state(sup)

    with pytest.raises(UnsafeRestoreError, match="adding or removing submodules"):
        restore(sup, points["second"])

    assert user_state(sup) == state


def test_restore_with_a_dirty_submodule_is_refused_before_any_change(
    superproject: tuple[Path, dict[str, str]],
) -> None:
    sup, points = superproject
    write(sup / "nested", "file.txt", "dirty\n")
    state = user_state(sup)

    with pytest.raises(DirtySubmoduleError, match="dirty submodule: nested"):
        restore(sup, points["first"])

    assert user_state(sup) == state


def test_d6_an_embedded_repository_is_never_deleted(repo: Path) -> None:
    point = snapshot(repo)
    inner = repo / "vendor/lib"
    inner.mkdir(parents=True)
    git(inner, "init", "-q")
    write(inner, "code.c", "int x;\n")  # an embedded repository without commits: skipped

    outcome = restore(repo, point)

    assert (inner / ".git").is_dir() and (inner / "code.c").exists()
    assert outcome.plan.noop


# --- exact bytes (case 19; D10) -----------------------------------------------------------


def test_case_19_exact_bytes_with_core_autocrlf_enabled(repo: Path) -> None:
    git(repo, "config", "core.autocrlf", "true")
    write(repo, "run.sh", "#!/bin/sh\necho before\n", mode=0o755)
    write(repo, "windows.txt", b"one\r\ntwo\r\n")
    write(repo, "untouched.sh", "#!/bin/sh\necho untouched\n", mode=0o755)
    originals = {p: (repo / p).read_bytes() for p in ("run.sh", "windows.txt", "untouched.sh")}
    point = snapshot(repo)
    write(repo, "run.sh", "#!/bin/sh\necho after\n", mode=0o755)
    write(repo, "windows.txt", b"three\r\n")

    restore(repo, point)

    assert {p: (repo / p).read_bytes() for p in originals} == originals
    assert os.access(repo / "run.sh", os.X_OK)


# --- D2, D5, D15 ---------------------------------------------------------------------------


def test_d2_an_untracked_file_renamed_since_the_point_exists_only_under_its_old_name(
    repo: Path,
) -> None:
    write(repo, "old.txt", "identical content\n" * 10)
    point = snapshot(repo)
    (repo / "old.txt").rename(repo / "new.txt")

    outcome = restore(repo, point)

    assert (repo / "old.txt").read_text() == "identical content\n" * 10
    assert not (repo / "new.txt").exists()
    assert outcome.plan.added == ("old.txt",) and outcome.plan.deleted == ("new.txt",)


def test_d5_a_restore_started_from_a_subdirectory_covers_the_whole_repository(repo: Path) -> None:
    write(repo, "sub/dir/inside.txt", "inside v1\n")
    write(repo, "outside.txt", "outside v1\n")
    write(repo, "other/file.txt", "other v1\n")
    point = snapshot(repo)
    before = files(repo)
    write(repo, "sub/dir/inside.txt", "inside v2\n")
    write(repo, "outside.txt", "outside v2\n")
    (repo / "other/file.txt").unlink()
    write(repo, "created-at-root.txt", "new\n")

    # A real process whose working directory is the subdirectory (no os.chdir in the tests).
    proc = run_python(
        "from pathlib import Path\n"
        "from ledger.git.repo import GitRepo\n"
        "from ledger.git.restore.run import restore_commit\n"
        "from tests.snapshotkit import NO_PROTECTION\n"
        f"restore_commit(GitRepo.discover(Path('.')), {point!r}, NO_PROTECTION)\n",
        cwd=repo / "sub/dir",
    )
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()

    assert files(repo) == before


def test_d15_a_tracked_file_matching_an_ignore_rule_is_not_deleted(repo: Path) -> None:
    write(repo, "build/keep.txt", "tracked although ignored\n")
    git(repo, "add", "build/keep.txt")
    git(repo, "commit", "-q", "-m", "track build/keep.txt")
    write(repo, ".gitignore", "build/\n")
    write(repo, "src.txt", "v1\n")
    point = snapshot(repo)
    write(repo, "src.txt", "v2\n")
    write(repo, "build/keep.txt", "edited, still ignored\n")

    restore(repo, point)

    assert (repo / "src.txt").read_text() == "v1\n"
    assert (repo / "build/keep.txt").read_text() == "edited, still ignored\n"
    assert git(repo, "ls-files", "build") == "build/keep.txt\n"


def test_d6_an_embedded_repository_created_after_the_point_refuses_the_restore(repo: Path) -> None:
    point = snapshot(repo)
    inner = repo / "vendor/lib"
    inner.mkdir(parents=True)
    git(inner, "init", "-q")
    write(inner, "code.c", "int x;\n")
    git(inner, "add", "code.c")
    git(inner, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "-m", "inner")
    state = user_state(repo)

    with pytest.raises(UnsafeRestoreError, match="adding or removing submodules"):
        restore(repo, point)

    assert user_state(repo) == state
    assert (inner / ".git").is_dir()
