"""The kept tree diffs (:mod:`ledger.engine.kept_diffs`) give back exactly what was kept, or
nothing: never a diff that differs (issue 34: the ``/rewind`` list's neighbouring diffs kept
across processes)."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.engine.kept_diffs import FILE_NAME, HEADER, KeptDiffs, decode_frames, encode
from ledger.git.trees import Change, Entry

_MODES = [0o100644, 0o100755, 0o120000, 0o160000]
_hex = st.text("0123456789abcdef", min_size=40, max_size=40)
_entry = st.one_of(st.none(), st.builds(Entry, st.sampled_from(_MODES), _hex))
_name = st.binary(min_size=1, max_size=12).filter(lambda b: b"\x00" not in b)


@st.composite
def diffs(draw: st.DrawFn) -> tuple[str, str, list[Change]]:
    old_tree, new_tree = draw(st.lists(_hex, min_size=2, max_size=2, unique=True))
    paths = sorted(draw(st.sets(_name, max_size=12)))
    changes: list[Change] = []
    for path in paths:
        old, new = draw(_entry), draw(_entry)
        if old == new:
            continue
        changes.append(Change(os.fsdecode(path), old, new))
    return old_tree, new_tree, changes


@settings(max_examples=200, deadline=None)
@given(diffs())
def test_a_kept_diff_decodes_to_the_same_changes(diff: tuple[str, str, list[Change]]) -> None:
    old_tree, new_tree, changes = diff
    found, end = decode_frames(encode(old_tree, new_tree, changes), 0)
    assert found == [((old_tree, new_tree), changes)]
    assert end == len(encode(old_tree, new_tree, changes))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(diffs(), min_size=1, max_size=5, unique_by=lambda d: (d[0], d[1])),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
    st.integers(0, 10**6),
)
def test_a_damaged_file_gives_back_kept_diffs_or_nothing(
    kept: list[tuple[str, str, list[Change]]],
    flips: list[tuple[int, int]],
    cut: int,
) -> None:
    """Bytes changed anywhere and the file cut anywhere: every diff read back is one that was
    kept, with exactly its changes."""
    data = bytearray(b"".join(encode(*diff) for diff in kept))
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    data = data[: cut % (len(data) + 1)]
    truth = {(o, n): c for o, n, c in kept}
    found, end = decode_frames(bytes(data), 0)
    assert end <= len(data)
    for key, changes in found:
        assert truth.get(key) == changes


def test_a_torn_frame_does_not_hide_the_frames_appended_after_it(tmp_path: Path) -> None:
    first = encode("a" * 40, "b" * 40, [Change("x", None, Entry(0o100644, "c" * 40))])
    second = encode("d" * 40, "e" * 40, [Change("y", Entry(0o100644, "c" * 40), None)])
    (tmp_path / FILE_NAME).write_bytes(HEADER + first[:-3] + second)
    kept = KeptDiffs(tmp_path)
    assert kept.get("a" * 40, "b" * 40) is None
    assert kept.get("d" * 40, "e" * 40) == [Change("y", Entry(0o100644, "c" * 40), None)]


def test_a_frame_being_written_is_read_once_it_is_whole(tmp_path: Path) -> None:
    frame = encode("a" * 40, "b" * 40, [Change("x", None, Entry(0o100755, "c" * 40))])
    path = tmp_path / FILE_NAME
    path.write_bytes(HEADER + frame[:10])
    kept = KeptDiffs(tmp_path)
    assert kept.get("a" * 40, "b" * 40) is None
    path.write_bytes(HEADER + frame)
    assert kept.get("a" * 40, "b" * 40) == [Change("x", None, Entry(0o100755, "c" * 40))]


def test_a_checksummed_frame_that_no_tree_diff_could_give_is_not_used(tmp_path: Path) -> None:
    """Paths out of order, a side equal to the other, a mode git never reports: all refused
    even with a right checksum."""
    head = b"%s %s 2\n" % (b"a" * 40, b"b" * 40)
    blob = b"c" * 40
    bad = [
        head + b"0 0\n- -\n100644 100644\n" + blob + b" " + blob + b"\ny\x00x",
        head + b"100644 0\n" + blob + b" -\n100644 100644\n" + blob + b" " + blob + b"\nx\x00y",
        head + b"0 0\n- -\n100664 100644\n" + blob + b" " + blob + b"\nx\x00y",
    ]
    for payload in bad:
        frame = b"\x00RWT" + len(payload).to_bytes(4, "little")
        frame += zlib.crc32(payload).to_bytes(4, "little") + payload
        assert decode_frames(frame, 0)[0] == []


def test_another_version_is_not_read_and_is_replaced_by_the_next_keep(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    frame = encode("a" * 40, "b" * 40, [])
    path.write_bytes(b"pi-rewind-tree-diffs 2\n" + frame)
    kept = KeptDiffs(tmp_path)
    assert kept.get("a" * 40, "b" * 40) is None
    kept.put("d" * 40, "e" * 40, [])
    assert path.read_bytes().startswith(HEADER)
    assert KeptDiffs(tmp_path).get("d" * 40, "e" * 40) == []


def test_the_file_stays_within_its_bound(tmp_path: Path, monkeypatch: object) -> None:
    import ledger.engine.kept_diffs as module

    setattr_ = monkeypatch.setattr  # type: ignore[attr-defined]
    setattr_(module, "MAX_FILE_BYTES", 4096)
    kept = KeptDiffs(tmp_path)
    change = [Change("p" * 50, None, Entry(0o100644, "c" * 40))]
    for n in range(200):
        kept.put(f"{n:040x}", "f" * 40, change)
        assert (tmp_path / FILE_NAME).stat().st_size <= 4096
    assert KeptDiffs(tmp_path).get(f"{199:040x}", "f" * 40) == change
