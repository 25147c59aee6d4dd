"""The one symlink-safe walk (ledger/git/restore/nofollow.py): a symlink anywhere on the path stops it,
missing components are created, reported or refused as asked, and no descriptor leaks."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ledger.git.restore.nofollow import NotADirectoryOnPath, open_dir


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_symlinked_component_stops_the_walk_and_names_it(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "root" / "a").mkdir(parents=True)
    (tmp_path / "root" / "a" / "link").symlink_to(tmp_path / "outside")
    before = _fds()
    with pytest.raises(NotADirectoryOnPath) as caught:
        open_dir(str(tmp_path / "root"), [b"a", b"link", b"x"], create=True)
    assert caught.value.part == b"link" and caught.value.errno in (errno.ELOOP, errno.ENOTDIR)
    assert not (tmp_path / "outside" / "x").exists(), "nothing created through the symlink"
    assert _fds() == before


def test_a_file_component_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("file\n")
    with pytest.raises(NotADirectoryOnPath) as caught:
        open_dir(str(tmp_path), [b"f", b"g"])
    assert caught.value.errno == errno.ENOTDIR


def test_missing_components_are_created_reported_or_refused(tmp_path: Path) -> None:
    before = _fds()
    assert open_dir(str(tmp_path), [b"a", b"b"], missing_ok=True) is None
    with pytest.raises(FileNotFoundError):
        open_dir(str(tmp_path), [b"a", b"b"])
    fd = open_dir(str(tmp_path), [b"a", b"b"], create=True)
    assert fd is not None
    os.close(fd)
    assert (tmp_path / "a" / "b").is_dir()
    assert _fds() == before
