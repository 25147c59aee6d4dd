"""Repository discovery without ``subprocess`` finds what ``git rev-parse`` run by
``subprocess`` finds, from every kind of start (ledger/git/locate.py; issue 34, stop 42).

``locate`` spawns git with ``os.posix_spawnp`` and ``git -C`` (``subprocess`` cost ~4 ms of a
spawned bridge's first answer). Each case runs the same ``rev-parse`` the way it ran before
(``subprocess.run(cwd=...)``) and compares: the root, a subdirectory, a symlink into the tree,
the ``.git`` directory, a linked worktree, a directory outside any repository, a missing one, a
file, and the caller's ``GIT_DIR``/``GIT_WORK_TREE`` (relative ones too).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.facilities import facilities
from ledger.git.liveness import host_name
from ledger.git.locate import locate
from tests.gitkit import one_commit_repo

ARGS = ["git", "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"]


def _as_before(probe: Path) -> tuple[Path, Path, Path] | None:
    """The discovery as it was: ``subprocess.run`` in ``probe``, parsed as ``locate`` parses."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE", "GIT_PREFIX")
    }
    try:
        done = subprocess.run(
            ARGS, cwd=probe, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False
        )
    except OSError:
        return None
    lines = [os.fsdecode(line) for line in done.stdout.split(b"\n")]
    if lines and not lines[-1]:
        lines.pop()
    if done.returncode != 0 or len(lines) != 3 or not lines[0]:
        return None
    common = Path(lines[2])
    return Path(lines[0]), Path(lines[1]), common if common.is_absolute() else probe / common


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    root = one_commit_repo(tmp_path / "repo")
    (root / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "link").symlink_to(root / "sub")
    subprocess.run(
        ["git", "worktree", "add", "-q", str(tmp_path / "linked")],
        cwd=root,
        check=True,
        capture_output=True,
    )
    (tmp_path / "outside").mkdir()
    return {
        "root": root,
        "sub": root / "sub" / "deeper",
        "link": tmp_path / "link",
        "dot-git": root / ".git",
        "linked worktree": tmp_path / "linked",
        "outside": tmp_path / "outside",
        "missing": tmp_path / "missing",
        "a file": root / "README.md",
        "relative": Path(os.path.relpath(root / "sub", Path.cwd())),
    }


@pytest.mark.parametrize(
    "where",
    ["root", "sub", "link", "dot-git", "linked worktree", "outside", "missing", "a file"],
)
def test_locate_finds_what_rev_parse_in_that_directory_finds(
    world: dict[str, Path], where: str
) -> None:
    probe = world[where]
    assert locate(probe) == _as_before(probe)
    if where in ("root", "sub", "link", "linked worktree"):
        assert locate(probe) is not None


def test_the_callers_git_dir_and_work_tree_are_read_as_before(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = world["root"]
    for git_dir, work_tree in (
        (str(root / ".git"), str(root)),
        (".git", "."),  # relative: to the directory git starts in
        ("../.git", ".."),
    ):
        monkeypatch.setenv("GIT_DIR", git_dir)
        monkeypatch.setenv("GIT_WORK_TREE", work_tree)
        for probe in (root, root / "sub", world["outside"]):
            assert locate(probe) == _as_before(probe), (git_dir, probe)


def test_a_relative_probe_is_read_from_the_current_directory(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(world["root"])
    assert locate(Path("sub")) == _as_before(Path("sub"))
    assert locate(Path(".")) == _as_before(Path("."))


def test_no_git_on_path_is_no_repository(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(world["outside"]))
    assert locate(world["root"]) is None


def test_the_host_name_and_peer_credentials_read_without_socket_are_sockets() -> None:
    import socket

    assert host_name() == socket.gethostname()
    expected = sys.platform.startswith("linux") and hasattr(socket, "SO_PEERCRED")
    if not os.environ.get("REWIND_PORTABLE"):
        assert facilities().peer_credentials == expected
