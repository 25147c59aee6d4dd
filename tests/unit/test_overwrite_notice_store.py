"""The store of notices to another session (:mod:`ledger.overwrite_notices`): whole or absent,
bounded, taken exactly once even while other processes post and take."""

from __future__ import annotations

import multiprocessing
import os
import time
from multiprocessing.synchronize import Event
from pathlib import Path

from ledger import overwrite_notices as N


def _notice(op: str = "0000abcd", paths: tuple[str, ...] = ("a.py", "b.py")) -> N.OverwriteNotice:
    return N.make_notice(op, "sess-a", '"fix it" (…7f3a9c2e)', "/s/a.jsonl", paths, paths)


def _git_dir(tmp_path: Path) -> Path:
    git_dir = tmp_path / ".git"
    git_dir.mkdir(exist_ok=True)
    return git_dir


def test_a_posted_notice_is_taken_once_with_its_files_and_command(tmp_path: Path) -> None:
    git_dir = _git_dir(tmp_path)
    assert N.post(git_dir, "sess-b", _notice())
    [got] = N.take(git_dir, "sess-b").notices
    assert got.theirs == ("a.py", "b.py") and got.theirs_count == 2
    assert got.command == "rewind undo /s/a.jsonl --to 0000abcd"
    assert "overwrote 2 files your agent wrote: a.py, b.py" in got.line()
    assert N.take(git_dir, "sess-b").notices == [], "consumed once"
    assert N.take(git_dir, "sess-other").notices == [], "addressed to one session only"


def test_a_notice_with_more_paths_than_fit_is_bounded_and_keeps_its_count(tmp_path: Path) -> None:
    git_dir = _git_dir(tmp_path)
    many = tuple(f"dir/{'x' * 900}/{i}.py" for i in range(5000))
    notice = N.make_notice("op1", "s", "label", None, many, many)
    assert len(N.encode(notice)) <= N.MAX_NOTICE_BYTES
    N.post(git_dir, "b", notice)
    [got] = N.take(git_dir, "b").notices
    assert got.theirs_count == 5000 and 0 < len(got.theirs) <= N.MAX_PATHS
    assert "(+4997 more)" in got.line()


def test_posts_beyond_the_pending_limit_are_dropped(tmp_path: Path) -> None:
    git_dir = _git_dir(tmp_path)
    posted = [N.post(git_dir, "b", _notice(f"op{i}")) for i in range(N.MAX_PENDING + 5)]
    assert posted.count(True) == N.MAX_PENDING and not any(posted[N.MAX_PENDING :])
    assert N.pending_count(git_dir, "b") == N.MAX_PENDING
    assert len(N.take(git_dir, "b").notices) == N.MAX_PENDING


def test_an_oversized_notice_file_is_counted_damaged_without_being_read(tmp_path: Path) -> None:
    git_dir = _git_dir(tmp_path)
    N.post(git_dir, "b", _notice())
    directory = N.addressee_dir(git_dir, "b")
    big = directory / "0000000000001-aaaaaaaaaaaa.json"
    with open(big, "wb") as out:  # sparse: 1 GiB on paper, nothing in memory if not read
        out.truncate(1 << 30)
    taken = N.take(git_dir, "b")
    assert taken.damaged == 1 and len(taken.notices) == 1


def test_torn_and_foreign_files_are_never_shown(tmp_path: Path) -> None:
    git_dir = _git_dir(tmp_path)
    N.post(git_dir, "b", _notice())
    directory = N.addressee_dir(git_dir, "b")
    (directory / "0000000000002-bbbbbbbbbbbb.json").write_bytes(b'{"v": 1, "op": "x"')  # torn
    (directory / "0000000000003-cccccccccccc.json").write_bytes(b'{"v": 1}')  # no fields
    (directory / ".0000000000004-dddddddddddd.json.tmp").write_bytes(b"{")  # a writer in flight
    os.mkfifo(directory / "0000000000005-eeeeeeeeeeee.json")  # never opened for a blocking read
    (directory / "notes.txt").write_text("not ours")
    taken = N.take(git_dir, "b")
    assert len(taken.notices) == 1 and taken.damaged == 3
    assert (directory / ".0000000000004-dddddddddddd.json.tmp").exists(), "a fresh temp stays"
    later = N.take(git_dir, "b", now=time.time() + N.STALE_TMP_S + 1)
    assert later.notices == [] and later.damaged == 0
    assert not (directory / ".0000000000004-dddddddddddd.json.tmp").exists(), "a dead writer's"


def test_only_the_newest_seen_notices_are_kept(tmp_path: Path) -> None:
    git_dir = _git_dir(tmp_path)
    for i in range(N.MAX_SEEN + 10):
        N.post(git_dir, "b", _notice(f"op{i}"))
        N.take(git_dir, "b")
    seen = [p for p in N.addressee_dir(git_dir, "b").iterdir() if p.suffix == ".seen"]
    assert len(seen) == N.MAX_SEEN


def test_a_session_id_with_other_characters_gets_a_hashed_directory(tmp_path: Path) -> None:
    git_dir = _git_dir(tmp_path)
    N.post(git_dir, "../../evil", _notice())
    directory = N.addressee_dir(git_dir, "../../evil")
    assert directory.parent == git_dir / "pi-rewind" / "notices"
    assert directory.name.startswith("h-")
    assert len(N.take(git_dir, "../../evil").notices) == 1


def _poster(git_dir: str, who: int, count: int) -> None:
    for i in range(count):
        while not N.post(Path(git_dir), "b", _notice(f"p{who}-{i}")):
            time.sleep(0.001)  # the pending limit: wait for the takers


def _taker(git_dir: str, stop: Event, out: multiprocessing.Queue[list[str]]) -> None:
    """Takes until told to stop (not for a fixed time: posters slowed down by a loaded machine
    would find the pending limit reached once the takers had ended, and wait for ever)."""
    got: list[str] = []
    end = time.monotonic() + 120
    while not stop.is_set() and time.monotonic() < end:
        got.extend(n.op for n in N.take(Path(git_dir), "b").notices)
    out.put(got)


def test_concurrent_posts_and_takes_lose_nothing_and_show_nothing_twice(tmp_path: Path) -> None:
    git_dir = _git_dir(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[list[str]] = ctx.Queue()
    stop = ctx.Event()
    posters = [ctx.Process(target=_poster, args=(str(git_dir), w, 60)) for w in range(3)]
    takers = [ctx.Process(target=_taker, args=(str(git_dir), stop, out)) for _ in range(2)]
    for p in [*posters, *takers]:
        p.start()
    try:
        for p in posters:
            p.join(60)
            assert p.exitcode == 0
    finally:
        stop.set()
    got = [op for _ in takers for op in out.get(timeout=60)]
    for p in takers:
        p.join(60)
    got.extend(n.op for n in N.take(git_dir, "b").notices)  # any posted after the takers ended
    assert sorted(got) == sorted(f"p{w}-{i}" for w in range(3) for i in range(60))


def test_an_old_temporary_whose_writer_still_holds_it_is_kept(tmp_path: Path) -> None:
    """Age is no proof of death: a writer stopped between writing and renaming its notice keeps
    its temporary (it holds the file's flock, as ``post`` does); once it is gone, it goes."""
    import subprocess
    import sys

    git_dir = _git_dir(tmp_path)
    N.post(git_dir, "b", _notice())
    directory = N.addressee_dir(git_dir, "b")
    tmp = directory / ".0000000000004-dddddddddddd.json.tmp"
    tmp.write_bytes(b"{")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
            str(tmp),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        N.take(git_dir, "b", now=time.time() + N.STALE_TMP_S + 1)
        assert tmp.exists(), "its writer is alive (stopped, slow): never removed by age"
    finally:
        holder.kill()
        holder.wait()
    N.take(git_dir, "b", now=time.time() + N.STALE_TMP_S + 1)
    assert not tmp.exists(), "its writer is gone: removed"
