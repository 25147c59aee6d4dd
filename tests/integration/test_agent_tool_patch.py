"""The agent tool's diff text made in-process (:mod:`ledger.git.restore.patch_text`) is
git's own ``git diff-tree -p`` text for the same files, and falls back to git where its headers could
differ (an executable, a link, a mode change, a name git quotes)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ledger.git.repo import GitRepo
from ledger.git.restore.patch_text import patch_of
from ledger.git.trees import leaf_changes, patch
from tests.gitkit import fresh_tree, git


def _index_abbrev(text: str) -> str:
    """The ``index`` lines' blob ids cut to 7 characters (git picks its own length)."""
    return re.sub(
        r"^index ([0-9a-f]+)\.\.([0-9a-f]+)",
        lambda m: f"index {m[1][:7]}..{m[2][:7]}",
        text,
        flags=re.M,
    )


def _trees(
    repo: Path, before: dict[str, bytes | None], after: dict[str, bytes | None]
) -> tuple[str, str]:
    def write(files: dict[str, bytes | None]) -> str:
        for name, data in files.items():
            path = repo / name
            if data is None:
                if path.exists() or path.is_symlink():
                    path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return fresh_tree(repo)

    return write(before), write(after)


def test_plain_files_give_gits_patch_text(repo: Path) -> None:
    a, b = _trees(
        repo,
        {
            "src/app.py": b"a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n",
            "src/gone.py": b"keep\n",
            "data/blob.bin": b"\0one",
            "z.txt": b"no newline",
            "b-c.txt": b"1\n",
            "b/c.txt": b"2\n",
        },
        {
            "src/app.py": b"a\nB\nc\nd\ne\nf\ng\nh\nI\nj\n",
            "src/gone.py": None,
            "src/new.py": b"new\n",
            "data/blob.bin": b"\0two",
            "z.txt": b"still none",
            "b-c.txt": b"1!\n",
            "b/c.txt": b"2!\n",
        },
    )
    r = GitRepo.discover(str(repo))
    changes = leaf_changes(r, a, b) or []
    assert len(changes) == 7
    ours = patch_of(r, a, b, changes)
    assert _index_abbrev(ours) == _index_abbrev(patch(r, a, b, paths=[c.path for c in changes]))
    only = [c for c in changes if c.path in ("src/new.py", "z.txt")]
    assert _index_abbrev(patch_of(r, a, b, only)) == _index_abbrev(
        patch(r, a, b, paths=["src/new.py", "z.txt"])
    )
    assert patch_of(r, a, b, []) == ""


def test_modes_and_quoted_names_are_left_to_git(repo: Path) -> None:
    (repo / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(repo / "run.sh", 0o755)
    a = fresh_tree(repo)
    (repo / "run.sh").write_text("#!/bin/sh\necho\n")
    os.chmod(repo / "run.sh", 0o644)
    (repo / "my notes.md").write_text("spaced\n")
    (repo / "café.txt").write_text("quoted\n")
    os.symlink("run.sh", repo / "link")
    b = fresh_tree(repo)
    r = GitRepo.discover(str(repo))
    changes = leaf_changes(r, a, b) or []
    for change in changes:
        text = patch_of(r, a, b, [change])
        assert text == patch(r, a, b, paths=[change.path]), change.path
    assert "old mode 100755" in patch_of(r, a, b, [c for c in changes if c.path == "run.sh"])
    assert git(repo, "status", "--porcelain")  # nothing was committed or reset


def test_attributes_are_honoured_as_git_honours_them(repo: Path) -> None:
    (repo / ".gitattributes").write_text("*.dat binary\n")
    a, b = _trees(repo, {"x.dat": b"one\n"}, {"x.dat": b"two\n"})
    r = GitRepo.discover(str(repo))
    changes = leaf_changes(r, a, b) or []
    text = patch_of(r, a, b, changes)
    assert "Binary files a/x.dat and b/x.dat differ" in text
    assert text == patch(r, a, b, paths=["x.dat"])
