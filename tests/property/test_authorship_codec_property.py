"""The authorship index's bytes (docs/authorship.md#format) for arbitrary records: every record
comes back from its frames, a torn tail is never read as a record and never hides a record
appended after it, and a reader tailing the file sees exactly what a whole read sees."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.authorship.codec import coalesce, decode_frames, encode_record
from ledger.authorship.model import Author, Key, Record
from ledger.authorship.store import AuthorshipReader, AuthorshipStore

paths = st.binary(min_size=1, max_size=40).filter(lambda p: b"\x00" not in p)
blobs = st.sampled_from(["", "0" * 40, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391", "ab" * 32])
keys: st.SearchStrategy[Key] = st.tuples(
    paths, st.sampled_from([0, 0o100644, 0o100755, 0o120000, 0o160000]), blobs
)
authors = st.builds(
    Author,
    st.sampled_from(["agent", "user", "rewind"]),
    st.text(max_size=12),
    st.none() | st.text(max_size=12),
    st.none() | st.sampled_from(["restore", "undo", "fork-restore"]),
)
records = st.builds(
    Record,
    st.text(alphabet="0123456789abcdef", max_size=40),
    authors,
    st.lists(keys, max_size=12).map(tuple),
)


@settings(max_examples=200, deadline=None)
@given(batch=st.lists(records, max_size=6), frame=st.integers(600, 4096))
def test_records_come_back_from_their_frames_whatever_the_frame_size(
    batch: list[Record], frame: int
) -> None:
    frames = [encode_record(r, max_frame=frame) for r in batch]
    assert all(len(f) <= frame for fs in frames for f in fs)
    decoded = decode_frames(b"".join(f for fs in frames for f in fs))
    assert decoded.skipped == 0 and not decoded.pending
    assert coalesce(decoded.records) == coalesce(batch)
    for record, pieces in zip(batch, frames, strict=True):
        assert coalesce(decode_frames(b"".join(pieces)).records) == [record]


@settings(max_examples=200, deadline=None)
@given(batch=st.lists(records, min_size=1, max_size=5), cut=st.integers(1, 10_000), after=records)
def test_a_torn_frame_is_never_read_and_never_hides_what_follows(
    batch: list[Record], cut: int, after: Record
) -> None:
    data = b"".join(f for r in batch for f in encode_record(r))
    whole = [
        len(b"".join(f for r in batch[: i + 1] for f in encode_record(r)))
        for i in range(len(batch))
    ]
    cut = cut % len(data)
    torn = data[:cut]
    decoded = decode_frames(torn)
    intact = [r for r, end in zip(batch, whole, strict=True) if end <= cut]
    assert decoded.records == intact
    assert decoded.skipped == 0
    assert decoded.pending == (cut not in (0, *whole))
    # Another writer appends after the torn frame: its record is read, the torn bytes skipped.
    following = b"".join(encode_record(after))
    decoded = decode_frames(torn + following)
    assert decoded.records == [*intact, after]
    assert decoded.skipped == (
        0 if cut in (0, *whole) else cut - max([0, *(e for e in whole if e <= cut)])
    )


@settings(max_examples=40, deadline=None)
@given(batch=st.lists(records, max_size=8), looks=st.lists(st.integers(0, 8), max_size=8))
def test_a_tailing_reader_sees_what_a_whole_read_sees(
    batch: list[Record], looks: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = AuthorshipStore(Path(tmp))
        assert store.replace([])
        reader = AuthorshipReader(store)
        written = 0
        for look in [*looks, len(batch)]:
            upto = min(look, len(batch))
            if upto > written:
                assert store.append(batch[written:upto])
                written = upto
            assert reader.refresh() == "ok"
        loaded = store.read()
        assert loaded.status == "ok"
        assert coalesce(loaded.records) == coalesce(batch)
        assert reader.index.records == len(loaded.records)
        assert reader.index.entries == sum(len(r.entries) for r in batch)
        # Half a frame at the end: read as nothing yet, then whole once it is complete.
        extra = b"".join(
            encode_record(Record("ff", Author("user", "s"), ((b"p", 0o100644, "ab" * 20),)))
        )
        with open(store.path, "ab") as handle:
            handle.write(extra[:7])
        assert reader.refresh() == "ok"
        before = reader.index.records
        with open(store.path, "ab") as handle:
            handle.write(extra[7:])
        assert reader.refresh() == "ok"
        assert reader.index.records == before + 1
        assert os.path.getsize(store.path) > 0


# Steps a file can take between two looks at its latest snapshot: appends (whole records,
# half a frame, garbage), a rewrite (a new inode, perhaps the same bytes), nothing.
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(records, min_size=1, max_size=3)),
        st.tuples(st.just("half"), records),
        st.tuples(st.just("garbage"), st.binary(min_size=1, max_size=30)),
        st.tuples(st.just("rewrite"), st.lists(records, max_size=3)),
        st.tuples(st.just("look"), st.none()),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(start=st.lists(records, max_size=4), changes=steps)
def test_the_latest_snapshot_read_on_from_a_known_record_is_what_a_whole_read_finds(
    start: list[Record], changes: list[tuple[str, object]]
) -> None:
    # docs/authorship.md#the-latest-snapshot-without-a-whole-read: whatever happened to the
    # file between two looks, going on from the earlier answer gives the whole read's answer.
    with tempfile.TemporaryDirectory() as tmp:
        store = AuthorshipStore(Path(tmp))
        assert store.replace(start)
        known = store.latest()
        for kind, value in changes:
            if kind == "append":
                assert store.append(value)  # type: ignore[arg-type]
            elif kind in ("half", "garbage"):
                data = b"".join(encode_record(value)) if kind == "half" else value  # type: ignore[arg-type]
                with open(store.path, "ab") as handle:
                    handle.write(data[: max(1, len(data) // 2)] if kind == "half" else data)  # type: ignore[index]
            elif kind == "rewrite":
                assert store.replace(value)  # type: ignore[arg-type]
            whole = store.read(only=()).last_snapshot
            fresh = store.latest()
            assert (fresh.snapshot if fresh else None) == whole
            known = store.latest(known)
            assert (known.snapshot if known else None) == whole
