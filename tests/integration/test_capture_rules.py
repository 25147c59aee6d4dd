"""Rule-file changes are seen although a capture no longer signs every directory.

A capture compares the signatures of every known directory's ``.gitignore``, ``.gitattributes``
and ``.git`` only when git's untracked cache says some directory changed; otherwise it looks at
the directories holding such a file alone (docs/capture.md#start-up). These tests put the work
tree in the state where that shortcut is taken (every directory and file older than the private
index, so that git's racy-timestamp rules do not re-read them, and one capture with nothing
changed), check that the shortcut was indeed taken, then make the change the shortcut must not
miss and compare with a fresh-index ``git add -A`` tree.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ledger.git.capture.scan import Capturer
from ledger.git.capture.untracked_cache import CacheSnapshot, TraceCounters
from ledger.git.repo import GitRepo
from tests.gitkit import fresh_tree, git, ls_tree
from tests.snapshotkit import NO_PROTECTION


class _Recording(Capturer):
    """A capturer that remembers whether each status found git's untracked cache quiet."""

    def __init__(self, repo: GitRepo) -> None:
        super().__init__(repo, NO_PROTECTION)
        self.quiet: list[bool] = []

    def _status(
        self, *, prefetch_fits: bool = False
    ) -> tuple[list[bytes], TraceCounters, int, CacheSnapshot | None]:
        records, counters, started_ns, before = super()._status(prefetch_fits=prefetch_fits)
        self.quiet.append(counters.quiet)
        return records, counters, started_ns, before


def _capture(repo: Path) -> tuple[str, list[bool]]:
    capturer = _Recording(GitRepo.discover(repo))
    tree = capturer.capture().tree
    return tree, capturer.quiet


def _parity(repo: Path) -> list[bool]:
    tree, quiet = _capture(repo)
    expected = fresh_tree(repo)
    assert tree == expected, f"ours:\n{ls_tree(repo, tree)}\nexpected:\n{ls_tree(repo, expected)}"
    return quiet


def _age(repo: Path, seconds: float = 30.0) -> None:
    """Every directory and file of the work tree (not ``.git``) modified ``seconds`` ago."""
    when = time.time() - seconds
    for base, dirs, names in os.walk(repo):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*dirs, *names]:
            os.utime(os.path.join(base, name), (when, when), follow_symlinks=False)
    os.utime(repo, (when, when))


def _settled(repo: Path) -> None:
    """Capture until a capture found nothing changed through the shortcut (git's untracked
    cache quiet, signatures in step); skip when this git gives no such statistics."""
    _age(repo)
    _parity(repo)
    time.sleep(1.05)  # the index written above is now older than the next status
    for _ in range(3):
        quiet = _parity(repo)
        if quiet == [True]:
            return
        time.sleep(1.05)
    pytest.skip("git's untracked cache reports no statistics here; the shortcut is never taken")


def _rewrite_in_place(path: Path, content: bytes) -> None:
    """Same size, same inode, mtime restored to the nanosecond: only ctime moves."""
    before = path.stat()
    assert len(content) == before.st_size
    with open(path, "r+b") as handle:
        handle.write(content)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _setup(repo: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def test_tracked_gitignore_edited_in_place_same_size_is_seen(repo: Path) -> None:
    _setup(repo, {".gitignore": b"x.txt\n", "a.txt": b"a\n", "y.txt": b"y\n", "d/k.txt": b"k\n"})
    _settled(repo)
    before = fresh_tree(repo)
    _rewrite_in_place(repo / ".gitignore", b"y.txt\n")
    _parity(repo)
    assert fresh_tree(repo) != before


def test_self_ignoring_gitignore_edited_in_place_is_seen(repo: Path) -> None:
    # The .gitignore ignores itself: no status record ever names it.
    _setup(repo, {"d/.gitignore": b".gitignore\nx.txt\n", "d/a.txt": b"a\n", "d/y.txt": b"y\n"})
    _settled(repo)
    before = fresh_tree(repo)
    _rewrite_in_place(repo / "d" / ".gitignore", b".gitignore\ny.txt\n")
    _parity(repo)
    assert fresh_tree(repo) != before


def test_self_ignoring_gitignore_created_in_a_known_directory_is_seen(repo: Path) -> None:
    _setup(repo, {"d/a.txt": b"a\n", "d/y.txt": b"y\n"})
    _settled(repo)
    (repo / "d" / ".gitignore").write_bytes(b".gitignore\ny.txt\n")
    _parity(repo)
    _parity(repo)
    assert "y.txt" not in ls_tree(repo, fresh_tree(repo))


@pytest.mark.parametrize(
    ("first", "second"),
    [(b"*.txt text eol=lf  \n", b"*.txt text eol=crlf\n"), (b"*.txt -text\n", b"*.txt  text\n")],
)
def test_gitattributes_text_and_eol_edited_in_place_are_seen(
    repo: Path, first: bytes, second: bytes
) -> None:
    _setup(repo, {".gitattributes": first, "d/crlf.txt": b"one\r\ntwo\r\n", "lf.txt": b"a\nb\n"})
    _settled(repo)
    _rewrite_in_place(repo / ".gitattributes", second)
    _parity(repo)


def test_ignored_gitattributes_created_and_edited_in_a_known_directory_are_seen(
    repo: Path,
) -> None:
    # Attributes that git's untracked cache never looks at, in a file no status names.
    _setup(repo, {".gitignore": b".gitattributes\n", "d/crlf.txt": b"one\r\ntwo\r\n"})
    _settled(repo)
    before = fresh_tree(repo)
    (repo / "d" / ".gitattributes").write_bytes(b"*.txt  text\n")
    _parity(repo)
    assert fresh_tree(repo) != before
    _settled(repo)
    _rewrite_in_place(repo / "d" / ".gitattributes", b"*.txt -text\n")
    _parity(repo)
    assert fresh_tree(repo) == before


def test_new_nested_repository_in_a_directory_with_captured_files_is_seen(repo: Path) -> None:
    _setup(repo, {"pkg/a.txt": b"a\n", "pkg/sub/b.txt": b"b\n", "top.txt": b"t\n"})
    _settled(repo)
    git(repo / "pkg", "init", "-q")
    git(repo / "pkg", "add", "-A")
    git(repo / "pkg", "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "n")
    _parity(repo)
    assert "160000 commit" in ls_tree(repo, fresh_tree(repo))


@pytest.mark.parametrize("nested", ["pkg", "pkg/sub"])
def test_new_nested_repository_whose_files_the_index_never_held_is_seen(
    repo: Path, nested: str
) -> None:
    # The files were created after the index was built: the captures since held them in lazy
    # trees (ledger/git/capture/treeedit.py), never in the private index, so making the
    # directory a repository removes no entry, which used to leave git's untracked cache (and
    # the parent's cached "recurse into it") as it was: the capture held the files, every time.
    _parity(repo)
    _setup(repo, {"pkg/a.txt": b"a\n", "pkg/sub/b.txt": b"b\n"})
    _settled(repo)
    private = {"GIT_INDEX_FILE": str(GitRepo.discover(repo).git_dir / "pi-rewind" / "index")}
    assert "pkg/" not in git(repo, "ls-files", env=private)
    git(repo / nested, "init", "-q")
    git(repo / nested, "add", "-A")
    git(repo / nested, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "n")
    _parity(repo)
    assert f"160000 commit {git(repo / nested, 'rev-parse', 'HEAD').strip()}\t{nested}" in (
        ls_tree(repo, fresh_tree(repo))
    )
    _parity(repo)


def test_rule_files_in_a_directory_created_since_the_last_capture_are_seen(repo: Path) -> None:
    _setup(repo, {"a.txt": b"a\n"})
    _settled(repo)
    _setup(
        repo,
        {
            "new/.gitignore": b"b.txt\n",
            "new/.gitattributes": b"*.txt text\n",
            "new/a.txt": b"1\r\n2\r\n",
            "new/b.txt": b"b\n",
        },
    )
    _parity(repo)
    _settled(repo)
    _rewrite_in_place(repo / "new" / ".gitignore", b"a.txt\n")
    _parity(repo)


def test_nothing_changed_takes_the_shortcut(repo: Path) -> None:
    _setup(repo, {f"d{i}/f{j}.txt": b"x\n" for i in range(5) for j in range(3)})
    _settled(repo)
    assert _parity(repo) == [True]


class _RulesChangedAfterStatus(Capturer):
    """A capturer whose work tree gets ``path`` rewritten right after its first status: an
    agent writing while the capture runs."""

    def __init__(self, repo: GitRepo, path: Path, content: bytes) -> None:
        super().__init__(repo, NO_PROTECTION)
        self.change: tuple[Path, bytes] | None = (path, content)

    def _status(self, *, prefetch_fits: bool = False) -> tuple[list[bytes], bool, int]:
        result = super()._status(prefetch_fits=prefetch_fits)
        if self.change is not None:
            path, content = self.change
            path.write_bytes(content)
            self.change = None
        return result


def test_a_new_directorys_gitignore_changed_while_status_ran_is_rechecked(repo: Path) -> None:
    # The capture signs a new directory's .gitignore after status listed its files under the
    # rules before the change: recheck it (ls-files -i). Its signature, read within two seconds
    # of the change, has the racy ctime (state.RACY_CTIME), which the recency test must count
    # as recent: it did not, and the entry now ignored stayed in every later capture.
    _parity(repo)
    _setup(repo, {f"new/f{i:02}.txt": b"x\n" for i in range(40)})  # beyond the lazy path
    (repo / "new" / ".gitignore").write_bytes(b"f01.txt\n")
    racing = _RulesChangedAfterStatus(
        GitRepo.discover(repo), repo / "new" / ".gitignore", b"f02.txt\n"
    )
    racing.capture()
    _parity(repo)
    time.sleep(2.1)  # and once no signature is racy any more
    _parity(repo)
    assert "new/f02.txt" not in ls_tree(repo, fresh_tree(repo))
