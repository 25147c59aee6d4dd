"""Which directories git's untracked cache read again during one status, from the private
index's ``UNTR`` extension before and after it (ledger/git/capture/untracked_cache.py).

Real git writes every extension read here: a repository with the capture's settings, its
status run as the capture runs it. Each test names what the capture's late pass may skip, and
the answers that must send it everywhere (``None``).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

from ledger.git.capture.status_command import PRIVATE_CONFIG, STATUS_ARGS, TRACE_ENV
from ledger.git.capture.untracked_cache import (
    CacheSnapshot,
    TraceCounters,
    _parse,
    late_dirs,
    read_extension,
    reread_dirs,
)
from tests.gitkit import git

DIRS = ["a", "a/b", "c", "c/d", "e"]


CONFIG = [arg for key, value in PRIVATE_CONFIG for arg in ("-c", f"{key}={value}")]


def _status(repo: Path) -> TraceCounters:
    result = subprocess.run(
        ["git", *CONFIG, *STATUS_ARGS],
        cwd=repo,
        env={**os.environ, "GIT_INDEX_FILE": str(_index(repo)), **TRACE_ENV},
        capture_output=True,
        check=True,
    )
    return TraceCounters(result.stderr)


def _index(repo: Path) -> Path:
    return repo / ".git" / "test-index"


@pytest.fixture
def aged(tmp_path: Path) -> Path:
    """A work tree backdated 30 s and a status run until git's untracked cache is quiet."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for rel in ["", *DIRS]:
        (repo / rel).mkdir(parents=True, exist_ok=True)
        (repo / rel / "f.txt").write_bytes(b"f\n")
    when = time.time() - 30
    for top, dirs, names in os.walk(repo):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*names, *dirs]:
            os.utime(os.path.join(top, name), (when, when))
    os.utime(repo, (when, when))
    env = {**os.environ, "GIT_INDEX_FILE": str(_index(repo))}
    subprocess.run(["git", *CONFIG, "add", "-A"], cwd=repo, env=env, check=True)
    for _ in range(4):
        if _status(repo).quiet:
            return repo
        time.sleep(1.05)
    pytest.skip("git's untracked cache never quiet here")


def _across_status(repo: Path) -> tuple[CacheSnapshot, CacheSnapshot, int | None]:
    before = read_extension(_index(repo))
    counters = _status(repo)
    after = read_extension(_index(repo))
    assert before is not None and after is not None
    return before, after, counters.opened


def test_a_file_renamed_in_place_names_its_directory_alone(aged: Path) -> None:
    (aged / "c" / "d" / "tmp").write_bytes(b"new\n")
    os.replace(aged / "c" / "d" / "tmp", aged / "c" / "d" / "f.txt")
    assert reread_dirs(*_across_status(aged)) == ["c/d"]


def test_a_quiet_status_names_nothing(aged: Path) -> None:
    assert reread_dirs(*_across_status(aged)) == []


def test_a_new_untracked_file_names_its_directory(aged: Path) -> None:
    (aged / "a" / "b" / "new.txt").write_bytes(b"new\n")
    assert reread_dirs(*_across_status(aged)) == ["a/b"]


def test_a_removed_directory_is_named_with_its_parent(aged: Path) -> None:
    shutil.rmtree(aged / "c" / "d")
    assert sorted(reread_dirs(*_across_status(aged)) or []) == ["c", "c/d"]


def test_a_directory_recorded_within_the_index_second_is_named_though_unchanged(
    aged: Path,
) -> None:
    # git reads such a directory again whatever its stat data (read-cache.c is_racy_stat): a
    # change within the same timestamp could hide behind them. Same data before and after.
    before, _, _ = _across_status(aged)
    parsed = _parse(before.data)
    records = list(struct.iter_unpack(">9I", parsed.stat_block(before.data)))
    e = parsed.valid.index(parsed.paths.index("e"))
    racy = CacheSnapshot(before.data, records[e][2])
    named = reread_dirs(racy, before, 1)
    assert named is not None and "e" in named
    assert (
        "a" not in named or records[parsed.valid.index(parsed.paths.index("a"))][2] >= records[e][2]
    )


def test_changed_exclude_settings_name_nothing(aged: Path) -> None:
    (aged / ".git" / "info").mkdir(exist_ok=True)
    (aged / ".git" / "info" / "exclude").write_bytes(b"*.md\n")
    (aged / "a" / "new.txt").write_bytes(b"new\n")
    assert reread_dirs(*_across_status(aged)) is None


def test_more_changed_directories_than_git_opened_name_nothing(aged: Path) -> None:
    (aged / "a" / "new.txt").write_bytes(b"new\n")
    before, after, _ = _across_status(aged)
    assert reread_dirs(before, after, 0) is None
    assert reread_dirs(before, after, None) is None
    assert reread_dirs(None, after, 1) is None


@pytest.mark.parametrize("cut", [1, 7, 40, -37, -1])
def test_a_malformed_extension_names_nothing(aged: Path, cut: int) -> None:
    (aged / "a" / "new.txt").write_bytes(b"new\n")
    before, after, opened = _across_status(aged)
    broken = CacheSnapshot(after.data[:cut] + after.data[cut + 1 :], after.index_mtime_s)
    assert reread_dirs(before, broken, opened) is None
    garbage = CacheSnapshot(b"\xff" * len(after.data), after.index_mtime_s)
    assert reread_dirs(before, garbage, opened) is None


def test_an_index_without_its_end_of_entries_extension_is_not_read(aged: Path) -> None:
    plain = aged / ".git" / "plain-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(plain)}
    subprocess.run(
        ["git", "-c", "index.threads=false", "add", "f.txt"], cwd=aged, env=env, check=True
    )
    assert read_extension(plain) is None
    assert read_extension(aged / ".git" / "missing-index") is None


def test_the_late_pass_takes_gone_directories_and_everything_under_them(tmp_path: Path) -> None:
    for rel in ["a", "a/b", "c"]:
        (tmp_path / rel).mkdir(parents=True)
    known = dict.fromkeys(["", "a", "a/b", "c", "x", "x/y", "x/y/z", "xa"])
    assert late_dirs(known, None, str(tmp_path)) == list(known)
    assert late_dirs(known, [], str(tmp_path)) == []
    assert late_dirs(known, ["a"], str(tmp_path)) == ["a"]
    # "x" is gone: the root changed; "x" and all below it are looked at, "xa" is not below it.
    assert late_dirs(known, [""], str(tmp_path)) == ["", "x", "x/y", "x/y/z", "xa"]


def test_a_bitmap_run_beyond_its_size_names_nothing_and_holds_nothing(aged: Path) -> None:
    # A damaged extension whose first bitmap claims a run of 2^32 - 1 words of ones: refused
    # before it is expanded (it would list 2^38 bits).
    (aged / "a" / "new.txt").write_bytes(b"new\n")
    before, after, opened = _across_status(aged)
    parsed = _parse(after.data)
    names_end = parsed.stats_at
    # Walk back over the three bitmaps to the first one: re-find it from the directory list.
    first = _first_bitmap_at(after.data, parsed)
    bits, words = struct.unpack_from(">II", after.data, first)
    assert words >= 1 and first < names_end
    huge = struct.pack(">Q", (0xFFFFFFFF << 1) | 1)
    data = after.data[: first + 8] + huge + after.data[first + 16 :]
    started = time.perf_counter()
    assert reread_dirs(before, CacheSnapshot(data, after.index_mtime_s), opened) is None
    assert reread_dirs(CacheSnapshot(data, before.index_mtime_s), after, opened) is None
    assert time.perf_counter() - started < 5


def _first_bitmap_at(data: bytes, parsed: object) -> int:
    """Where the first bitmap (the valid one) starts: right after the directory blocks."""
    from ledger.git.capture.untracked_cache import _varint

    i = parsed.header_end  # type: ignore[attr-defined]
    count, i = _varint(data, i)
    for _ in range(count):
        untracked, i = _varint(data, i)
        _, i = _varint(data, i)
        i = data.index(b"\0", i) + 1
        for _ in range(untracked):
            i = data.index(b"\0", i) + 1
    return i
