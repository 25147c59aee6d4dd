"""nofollow.DirStack: a run of paths opened component by component, never through a symlink,
holding one descriptor per level (ledger/git/restore/nofollow.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.git.restore.nofollow import DirStack, NotADirectoryOnPath


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1


def test_each_path_reaches_its_own_directory_and_creates_what_is_missing(tmp_path: Path) -> None:
    paths = [b"a/b", b"a/b/c", b"a/d", b"e", b"a/b"]
    with DirStack(os.fsencode(tmp_path)) as dirs:
        for rel in paths:
            fd = dirs.open(rel.split(b"/"), create=True)
            name = b"marker-" + rel.replace(b"/", b"_")
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    for rel in paths:
        assert (
            tmp_path / os.fsdecode(rel) / ("marker-" + os.fsdecode(rel).replace("/", "_"))
        ).exists()


def test_a_symlink_on_the_path_is_refused_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    os.symlink(outside, root / "a" / "link")
    with DirStack(os.fsencode(root)) as dirs:
        dirs.open([b"a"])
        with pytest.raises(NotADirectoryOnPath):
            dirs.open([b"a", b"link", b"x"], create=True)
    assert list(outside.iterdir()) == []


def test_a_missing_directory_without_create_is_file_not_found(tmp_path: Path) -> None:
    with DirStack(os.fsencode(tmp_path)) as dirs, pytest.raises(FileNotFoundError):
        dirs.open([b"nope"])


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_descriptors_stay_one_per_level_and_are_all_closed(tmp_path: Path) -> None:
    before = _open_fds()
    with DirStack(os.fsencode(tmp_path)) as dirs:
        for i in range(200):
            dirs.open([b"d%03d" % i, b"sub", b"deeper"], create=True)
            assert _open_fds() <= before + 4  # the root and three levels
    assert _open_fds() == before
