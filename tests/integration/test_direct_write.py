"""A restore writes and verifies files in-process exactly as git's checkout would, and only
when git could convert nothing (ledger/git/restore/direct_write.py, docs/capture.md).

The oracle is real git: ``git checkout-index`` from a throw-away index holding the same entries,
run with the configuration a restore gives it (``core.autocrlf=false``), into a directory beside
the in-process writer's; both directories must hold the same names, types, permission bits
(under the process umask), bytes and link targets.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode

from ledger.git import config_view
from ledger.git.capture.scan import PRIVATE_CONFIG
from ledger.git.repo import GitRepo
from ledger.git.restore.apply import Executor, Steps, VerifyError
from ledger.git.restore.direct_write import Staged, conversion_free, stage_plan, write_staged
from ledger.git.restore.journal import RestoreIntent, open_journals, restore_intent
from ledger.git.restore.placement import Placer
from ledger.git.restore.plan import plan_restore
from ledger.git.restore.run import restore_commit
from ledger.git.runner import GitRunner
from ledger.git.store.snapshot import take_snapshot
from ledger.settings import SnapshotSettings
from tests.gitkit import files, git, write

Entry = tuple[str, int, bytes]


@pytest.fixture
def umask() -> Iterator[None]:
    before = os.umask(0o022)
    os.umask(before)
    yield
    os.umask(before)


@pytest.fixture
def git_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The git subcommands this process starts (real git runs; this only listens)."""
    seen: list[str] = []
    real = GitRunner.run

    def listening(self: GitRunner, args: Sequence[str], **kwargs: object) -> object:
        seen.append(args[0])
        return real(self, args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(GitRunner, "run", listening)
    # The repository's files were written a moment ago: the configuration's racy rule (never
    # keep a view of files changed within two seconds, tests/integration/test_config_view.py)
    # would read it again at every question.
    monkeypatch.setattr(config_view, "_FRESH_NS", 0)
    monkeypatch.setattr(config_view, "_FRESH_FINE_NS", 0)
    return seen


def _blobs(repo: Path, entries: Sequence[Entry]) -> list[tuple[str, int, str]]:
    r = pygit2.Repository(str(repo))
    return [(path, mode, str(r.create_blob(data))) for path, mode, data in entries]


def _git_checkout(repo: Path, writes: Sequence[tuple[str, int, str]], prefix: str) -> None:
    """What a restore's git path writes: a throw-away index, then ``checkout-index``."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".git" / "oracle.index")}
    info = b"".join(
        b"%o %s\t%s\0" % (mode, oid.encode(), os.fsencode(path)) for path, mode, oid in writes
    )
    base = ["git", "-c", "core.autocrlf=false"]
    for args, data in (
        (["update-index", "-z", "--index-info"], info),
        (
            ["checkout-index", "-f", f"--prefix={prefix}/", "-z", "--stdin"],
            b"\0".join(os.fsencode(w[0]) for w in writes),
        ),
    ):
        subprocess.run([*base, *args], cwd=repo, env=env, input=data, check=True)
    os.unlink(repo / ".git" / "oracle.index")


def _direct(repo: Path, writes: Sequence[tuple[str, int, str]], prefix: str) -> None:
    """The in-process path as a restore runs it: staged flat, then placed at each path (the
    placement makes the directories) in ``repo/prefix``, as git's checkout-index writes there."""
    gitrepo = GitRepo.discover(repo)
    staged = stage_plan(gitrepo, writes)
    assert not isinstance(staged, str), staged
    root = repo / prefix
    os.mkdir(root)
    os.mkdir(root / ".stage")
    names = write_staged(root, ".stage", staged)
    Placer(os.fsencode(root), GitRunner(repo, repo / ".git"), ".stage").place_all(
        [item.path for item in staged], names
    )
    os.rmdir(root / ".stage")  # every staged file was renamed away


def _both(repo: Path, entries: Sequence[Entry]) -> tuple[dict[str, object], dict[str, object]]:
    writes = _blobs(repo, entries)
    _git_checkout(repo, writes, "by-git")
    _direct(repo, writes, "in-process")
    return dict(files(repo / "by-git")), dict(files(repo / "in-process"))


KINDS: list[Entry] = [
    ("plain.txt", FileMode.BLOB, b"one\ntwo\r\nthree"),
    ("run.sh", FileMode.BLOB_EXECUTABLE, b"#!/bin/sh\necho hi\n"),
    ("empty", FileMode.BLOB, b""),
    ("empty-exec", FileMode.BLOB_EXECUTABLE, b""),
    ("link", FileMode.LINK, b"plain.txt"),
    ("dir/deeper/link-up", FileMode.LINK, b"../../run.sh"),
    ("dangling", FileMode.LINK, b"no/such/file"),
    ("big.bin", FileMode.BLOB, bytes(range(256)) * 8192 + b"\r\n\0tail"),
    ("with space/and é ü.txt", FileMode.BLOB, "ünïcödé\r\n".encode()),
    ("日本/ファイル name.md", FileMode.BLOB_EXECUTABLE, b"x" * 10_000),
]


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077, 0o027, 0o000])
def test_the_in_process_writer_gives_git_checkouts_bytes_modes_and_links(
    repo: Path, umask: None, mask: int
) -> None:
    os.umask(mask)
    by_git, in_process = _both(repo, KINDS)
    assert set(by_git) >= {"plain.txt", "run.sh", "link", "big.bin", "日本/ファイル name.md"}
    assert in_process == by_git
    assert in_process["run.sh"][1] == 0o777 & ~mask  # type: ignore[index]
    assert in_process["plain.txt"][1] == 0o666 & ~mask  # type: ignore[index]


def test_a_restore_of_plain_files_starts_no_git_checkout_and_no_hash(
    repo: Path, git_calls: list[str]
) -> None:
    for name, mode, data in KINDS:
        if mode == FileMode.LINK:
            os.makedirs((repo / name).parent, exist_ok=True)
            os.symlink(data, repo / name)
        else:
            write(repo, name, data, mode=0o755 if mode == FileMode.BLOB_EXECUTABLE else 0o644)
    gitrepo = GitRepo.discover(repo)
    point = take_snapshot(gitrepo, SnapshotSettings()).commit
    expected = files(repo)
    write(repo, "plain.txt", "changed")
    os.remove(repo / "run.sh")
    os.remove(repo / "link")
    write(repo, "with space/and é ü.txt", b"other")
    write(repo, "new.txt", "to delete")
    plan = plan_restore(gitrepo, point)
    git_calls.clear()
    outcome = restore_commit(gitrepo, point, planned=plan)
    assert outcome.exact
    assert files(repo) == expected
    assert not {"checkout-index", "update-index", "hash-object", "var"} & set(git_calls)


def _attributes_case(repo: Path, attributes: str, data: bytes) -> tuple[GitRepo, str, Path]:
    write(repo, ".gitattributes", attributes)
    write(repo, "file.txt", data)
    gitrepo = GitRepo.discover(repo)
    return gitrepo, take_snapshot(gitrepo, SnapshotSettings()).commit, repo / "file.txt"


def _git_bytes(repo: Path, path: str) -> bytes:
    """What ``git checkout-index`` writes for ``path`` of the index (git's own conversion)."""
    out = repo / ".git" / "oracle-out"
    git(repo, "add", "-A")
    git(repo, "-c", "core.autocrlf=false", "checkout-index", "-f", f"--prefix={out}/", path)
    return (out / path).read_bytes()


def test_an_eol_attribute_sends_the_write_to_git_and_gives_gits_bytes(
    repo: Path, git_calls: list[str]
) -> None:
    gitrepo, point, path = _attributes_case(repo, "*.txt text eol=crlf\n", b"a\r\nb\r\n")
    assert conversion_free(gitrepo, ["file.txt"]) is not None
    write(repo, "file.txt", b"other\n")
    git_calls.clear()
    assert restore_commit(gitrepo, point).exact
    assert path.read_bytes() == b"a\r\nb\r\n" == _git_bytes(repo, "file.txt")
    assert "checkout-index" in git_calls and "hash-object" in git_calls


def test_a_smudge_filter_sends_the_write_to_git_and_gives_gits_bytes(repo: Path) -> None:
    git(repo, "config", "filter.up.smudge", "tr a-z A-Z")
    git(repo, "config", "filter.up.clean", "tr A-Z a-z")
    gitrepo, point, path = _attributes_case(repo, "*.txt filter=up\n", b"HELLO\n")
    write(repo, "file.txt", b"OTHER\n")
    assert restore_commit(gitrepo, point).exact
    assert path.read_bytes() == b"HELLO\n" == _git_bytes(repo, "file.txt")


@pytest.mark.parametrize("where", ["info", "global", "subdir", "xdg"])
def test_any_attribute_source_sends_the_write_to_git(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    rule = "*.txt text eol=crlf\n"
    if where == "info":
        write(repo / ".git", "info/attributes", rule)
    elif where == "global":
        write(isolated_env, "attrs", rule)
        git(repo, "config", "core.attributesFile", str(isolated_env / "attrs"))
    elif where == "xdg":
        monkeypatch.setenv("XDG_CONFIG_HOME", str(isolated_env / "xdg"))
        write(isolated_env, "xdg/git/attributes", rule)
    else:
        write(repo, "sub/.gitattributes", rule)
    write(repo, "sub/file.txt", b"a\nb\n")
    gitrepo = GitRepo.discover(repo)
    point = take_snapshot(gitrepo, SnapshotSettings()).commit
    write(repo, "sub/file.txt", b"other\n")
    assert conversion_free(gitrepo, ["sub/file.txt"]) is not None
    assert restore_commit(gitrepo, point).exact
    assert (repo / "sub" / "file.txt").read_bytes() == b"a\r\nb\r\n"


def test_a_gitattributes_elsewhere_leaves_the_in_process_path_open(repo: Path) -> None:
    write(repo, "other/.gitattributes", "*.txt text eol=crlf\n")
    assert conversion_free(GitRepo.discover(repo), ["sub/file.txt", "top.txt"]) is None
    assert conversion_free(GitRepo.discover(repo), ["other/x.txt"]) is not None


@pytest.mark.parametrize(
    ("key", "value"), [("core.eol", "crlf"), ("filter.x.smudge", "cat"), ("attr.tree", "HEAD")]
)
def test_configuration_that_could_convert_sends_the_write_to_git(
    repo: Path, key: str, value: str
) -> None:
    gitrepo = GitRepo.discover(repo)
    assert conversion_free(gitrepo, ["a.txt"]) is None
    git(repo, "config", key, value)
    assert conversion_free(gitrepo, ["a.txt"]) is not None


def test_symlinks_off_sends_links_to_git(repo: Path) -> None:
    writes = _blobs(repo, [("a-link", FileMode.LINK, b"target")])
    git(repo, "config", "core.symlinks", "false")
    assert isinstance(stage_plan(GitRepo.discover(repo), writes), str)
    git(repo, "config", "core.symlinks", "true")
    assert not isinstance(stage_plan(GitRepo.discover(repo), writes), str)


def test_autocrlf_is_off_for_every_git_command_of_a_restore(repo: Path) -> None:
    """core.autocrlf=true in the user's configuration converts nothing a restore writes: its
    git commands run with core.autocrlf=false, so the in-process bytes are git's."""
    assert ("core.autocrlf", "false") in PRIVATE_CONFIG  # what the in-process path relies on
    git(repo, "config", "core.autocrlf", "true")
    gitrepo, point, path = _attributes_case(repo, "", b"a\nb\r\n")
    os.remove(repo / ".gitattributes")
    take_snapshot(gitrepo, SnapshotSettings())
    write(repo, "file.txt", b"x")
    assert conversion_free(gitrepo, ["file.txt"]) is None
    restore_commit(gitrepo, point)
    assert path.read_bytes() == b"a\nb\r\n"


def test_the_in_process_verification_finds_wrong_bytes(repo: Path) -> None:
    write(repo, "a.txt", "one\n")
    gitrepo = GitRepo.discover(repo)
    point = take_snapshot(gitrepo, SnapshotSettings()).commit
    write(repo, "a.txt", "two\n")
    plan = plan_restore(gitrepo, point)
    executor = Executor(gitrepo, SnapshotSettings(), Steps())
    executor.apply(plan)
    executor.verify_paths(plan)
    write(repo, "a.txt", "one!\n")
    with pytest.raises(VerifyError, match="a.txt"):
        executor.verify_paths(plan)


def test_the_identity_is_asked_once_and_again_when_the_configuration_changes(
    repo: Path, git_calls: list[str]
) -> None:
    gitrepo = GitRepo.discover(repo)
    config_view.forget()
    for i in range(3):
        write(repo, "a.txt", f"{i}\n")
        take_snapshot(gitrepo, SnapshotSettings(), last_exact=None)
    assert git_calls.count("var") == 1
    git(repo, "config", "user.name", "Someone Else")
    write(repo, "a.txt", "later\n")
    made = take_snapshot(gitrepo, SnapshotSettings(), last_exact=None)
    commit = gitrepo.commit(made.commit)
    assert commit is not None and commit.author.name == "Someone Else"
    assert git_calls.count("var") == 2


def test_a_staged_file_is_never_written_through_a_symlink(repo: Path, tmp_path: Path) -> None:
    """The staging directory replaced by a symlink: refused, nothing written where it points."""
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, repo / "stage")
    with pytest.raises(OSError):
        write_staged(repo, "stage", [Staged("dir/x", FileMode.BLOB, b"x")])
    assert not list(outside.iterdir())


def test_files_are_staged_flat_and_placed_at_their_paths(repo: Path) -> None:
    """No directory is made in the staging directory (each mkdir and rmdir cost more than the
    file): one name per file, in order; the placement makes the work tree's directories."""
    os.mkdir(repo / "stage")
    staged = [Staged("a/b/x", FileMode.BLOB, b"x"), Staged("a/c/y", FileMode.BLOB_EXECUTABLE, b"y")]
    names = write_staged(repo, "stage", staged)
    assert names == ["0", "1"] and sorted(os.listdir(repo / "stage")) == ["0", "1"]
    Placer(os.fsencode(repo), GitRunner(repo, repo / ".git"), "stage").place_all(
        [s.path for s in staged], names
    )
    assert (repo / "a" / "b" / "x").read_bytes() == b"x"
    assert os.access(repo / "a" / "c" / "y", os.X_OK)
    assert os.listdir(repo / "stage") == []


def test_a_restore_that_brings_a_gitattributes_back_converts_the_files_under_it(
    repo: Path,
) -> None:
    gitrepo, point, path = _attributes_case(repo, "*.txt text eol=crlf\n", b"a\r\nb\r\n")
    os.remove(repo / ".gitattributes")
    write(repo, "file.txt", b"other\n")
    assert restore_commit(gitrepo, point).exact
    assert path.read_bytes() == b"a\r\nb\r\n"
    assert (repo / ".gitattributes").read_bytes() == b"*.txt text eol=crlf\n"


def test_a_session_restore_fsyncs_the_journal_three_times_and_leaves_it_done(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the journal fsyncs its bytes and its directory (before any file changes); the
    ``done`` mark fsyncs its bytes only (ledger/git/restore/journal.py, Journal.mark_done)."""
    write(repo, "a.txt", "one\n")
    gitrepo = GitRepo.discover(repo)
    point = take_snapshot(gitrepo, SnapshotSettings()).commit
    write(repo, "a.txt", "two\n")
    plan = plan_restore(gitrepo, point)
    synced: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    with restore_intent(RestoreIntent(session="s.jsonl", entry="e1")):
        assert restore_commit(gitrepo, point, planned=plan).exact
        journals = open_journals(gitrepo)[0]
        assert [j.state for j in journals] == ["done"]
    assert len(synced) == 3


@pytest.mark.parametrize("value", ["~nobody/attrs", ""])
def test_an_attributes_file_named_in_a_way_not_followed_here_sends_the_write_to_git(
    repo: Path, value: str
) -> None:
    git(repo, "config", "core.attributesFile", value)
    assert conversion_free(GitRepo.discover(repo), ["a.txt"]) is not None


def test_a_gitattributes_in_any_case_sends_the_write_to_git(repo: Path) -> None:
    assert conversion_free(GitRepo.discover(repo), ["sub/.GitAttributes"]) is not None


def test_hashing_a_path_that_became_a_fifo_or_grows_never_blocks_nor_reads_past_the_bound(
    tmp_path: Path,
) -> None:
    from ledger.git.restore.direct_write import read_file

    os.mkfifo(tmp_path / "pipe")  # no writer: a blocking open would wait forever
    result: list[bytes | None] = []
    reader = threading.Thread(target=lambda: result.append(read_file(tmp_path, "pipe", 10)))
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive() and result == [None], "refused at once, not read"
    (tmp_path / "big").write_bytes(b"x" * 100)
    assert read_file(tmp_path, "big", 10) is None
    assert read_file(tmp_path, "big", 100) == b"x" * 100
