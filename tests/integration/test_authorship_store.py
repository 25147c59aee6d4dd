"""The authorship index's file (docs/authorship.md#the-file): real files, real processes.

Several processes appending at once never interleave their records; a missing index is created
partial by an append and made complete only by a rebuild, which keeps what was appended
meanwhile; a newer version is left alone; a rewrite (compaction) drops a torn tail, refuses a
damaged file, and tailing readers notice it.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.authorship import store as store_module
from ledger.authorship.codec import encode_header, encode_record
from ledger.authorship.model import Author, Record
from ledger.authorship.store import AuthorshipReader, AuthorshipStore

F = 0o100644


def _record(n: int, session: str = "S", paths: int = 2) -> Record:
    return Record(
        f"{n:040x}",
        Author("agent", session, f"e{n}"),
        tuple((f"dir/{session}-{n}-{i}.txt".encode(), F, f"{n:040x}") for i in range(paths)),
    )


APPENDER = """
import sys
from pathlib import Path
from ledger.authorship.model import Author, Record
from ledger.authorship.store import AuthorshipStore
store = AuthorshipStore(Path(sys.argv[1]))
session = sys.argv[2]
for n in range(int(sys.argv[3])):
    # Every 10th record is large (several hundred paths): frames near the 64 KiB bound.
    paths = 700 if n % 10 == 0 else 3
    keys = tuple((f"d/{session}-{n}-{i}.txt".encode(), 0o100644, f"{n:040x}") for i in range(paths))
    assert store.append([Record(f"{n:040x}", Author("agent", session, f"e{n}"), keys)])
"""


def test_records_appended_by_several_processes_at_once_are_all_read_whole(tmp_path: Path) -> None:
    store = AuthorshipStore(tmp_path)
    assert store.replace([])
    count = 60
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(tmp_path), f"P{w}", str(count)],
            cwd=Path(__file__).resolve().parents[2],
        )
        for w in range(4)
    ]
    assert [w.wait(timeout=120) for w in workers] == [0, 0, 0, 0]
    loaded = store.read()
    assert loaded.status == "ok" and loaded.skipped == 0 and not loaded.pending
    by_session: dict[str, list[int]] = {}
    for record in loaded.records:
        by_session.setdefault(record.author.session, []).append(int(record.snapshot, 16))
    for session, numbers in by_session.items():
        # Each process's records in its order (a large one may span two frames in a row).
        assert sorted(set(numbers)) == list(range(count)), session
        assert numbers == sorted(numbers), session
    paths = sum(len(r.entries) for r in loaded.records)
    assert paths == 4 * sum(700 if n % 10 == 0 else 3 for n in range(count))


def test_an_append_to_a_missing_index_creates_it_partial_and_a_rebuild_keeps_those_records(
    tmp_path: Path,
) -> None:
    store = AuthorshipStore(tmp_path)
    assert store.read().status == "missing"
    assert store.append([_record(1), _record(2)])
    assert store.read().status == "partial"
    # The rebuild read the ledgers when records 1 and 2 were in them; 3 came after.
    assert store.append([_record(3)])
    assert store.replace([_record(0), _record(1), _record(2)])
    loaded = store.read()
    assert loaded.status == "ok"
    assert [int(r.snapshot, 16) for r in loaded.records] == [0, 1, 2, 3]
    assert os.stat(store.path).st_mode & 0o777 == 0o600


def test_a_newer_version_is_neither_read_nor_written(tmp_path: Path) -> None:
    store = AuthorshipStore(tmp_path)
    newer = encode_header(version=2) + b"whatever a later rewind writes"
    store.path.write_bytes(newer)
    assert store.read().status == "newer"
    assert not store.append([_record(1)])
    assert not store.replace([_record(1)])
    assert store.compact() is None
    assert store.path.read_bytes() == newer
    assert AuthorshipReader(store).refresh() == "newer"


def test_a_damaged_header_or_frame_asks_for_a_rebuild_and_is_never_compacted(
    tmp_path: Path,
) -> None:
    store = AuthorshipStore(tmp_path)
    store.path.write_bytes(b"not an index\n")
    assert store.read().status == "damaged"
    assert not store.append([_record(1)])
    good = b"".join(encode_record(_record(2)))
    store.path.write_bytes(
        encode_header() + good[:-3] + b"XYZ" + b"".join(encode_record(_record(3)))
    )
    loaded = store.read()
    assert loaded.status == "damaged" and loaded.skipped == len(good)
    assert [int(r.snapshot, 16) for r in loaded.records] == [3]
    assert store.compact() is None
    reader = AuthorshipReader(store)
    assert reader.refresh() == "damaged" and reader.index.records == 1


def test_compaction_drops_a_torn_tail_and_a_tailing_reader_reloads(tmp_path: Path) -> None:
    store = AuthorshipStore(tmp_path)
    assert store.replace([_record(1), _record(2)])
    reader = AuthorshipReader(store)
    assert reader.refresh() == "ok" and reader.index.records == 2
    torn = b"".join(encode_record(_record(3)))[:20]
    with open(store.path, "ab") as handle:
        handle.write(torn)  # a writer killed mid-write
    assert reader.refresh() == "ok" and reader.index.records == 2
    assert store.read().pending
    kept = store.compact()
    assert kept is not None and len(kept.records) == 2
    loaded = store.read()
    assert not loaded.pending and loaded.status == "ok"
    assert store.append([_record(4)])
    assert reader.refresh() == "ok"
    assert reader.index.records == 3  # reloaded from the new file, then tailed
    assert reader.index.last_snapshot == _record(4).snapshot


def test_a_rewrite_waits_for_appenders_and_gives_up_rather_than_block_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "REWRITE_WAIT_S", 0.05)
    store = AuthorshipStore(tmp_path)
    assert store.replace([_record(1)])
    fd = os.open(store.lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # an appender mid-append
        assert store.compact() is None
        assert not store.replace([])
        assert store.append([_record(2)])  # appenders share the lock
    finally:
        os.close(fd)
    assert [int(r.snapshot, 16) for r in store.read().records] == [1, 2]
    assert store.invalidate()
    assert store.read().status == "missing"


def test_a_file_over_the_bound_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = AuthorshipStore(tmp_path)
    assert store.replace([_record(n) for n in range(50)])
    monkeypatch.setattr(store_module, "MAX_FILE_BYTES", 1024)
    assert store.read().status == "too-large"
    reader = AuthorshipReader(store)
    assert reader.refresh() == "too-large" and reader.index.records == 0


def test_a_range_is_read_whole_or_as_far_as_the_file_goes(tmp_path: Path) -> None:
    """One read for the range the caller sized (``_read_range``); a file shorter than that
    gives what it has, never more and never an error."""
    path = tmp_path / "data"
    data = bytes(range(256)) * (store_module.READ_CHUNK // 256 + 3)
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert store_module._read_range(fd, 0, len(data)) == data
        assert store_module._read_range(fd, 7, 300) == data[7:300]
        assert store_module._read_range(fd, 10, 10) == b""
        assert store_module._read_range(fd, len(data) - 5, len(data) + 100) == data[-5:]
        os.truncate(path, 1000)
        assert store_module._read_range(fd, 0, len(data)) == data[:1000]
    finally:
        os.close(fd)
