"""Directory stamps: the coarse-timestamp guard and their place in ``capture-state.json``.

A stamp vouches that a directory's entries did not change since its rule signatures were read
(ledger/git/capture/state.py). It must never be recorded for a directory changed so recently
that a later change could keep the same timestamps (a coarse file system, a lagging kernel
clock), and the state file must carry the stamps exactly, or none at all.
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import pytest

from ledger.git.capture.state import (
    PLAIN,
    STAMP_MARGIN_NS,
    UNKNOWN_STAMP,
    CaptureState,
    DirRules,
    dir_stamp,
    stamp_limit,
)


@pytest.fixture(autouse=True)
def _stamps_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Directory stamps are off by default (ledger.git.capture.state.stamp_limit): on here."""
    monkeypatch.setenv("REWIND_DIR_STAMPS", "1")


def test_a_directory_changed_within_the_margin_gets_no_stamp(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    marker.touch()
    (tmp_path / "d").mkdir()
    assert dir_stamp(str(tmp_path / "d"), stamp_limit(marker)) == UNKNOWN_STAMP


def test_a_directory_whose_mtime_was_set_back_is_still_recent_by_its_ctime(
    tmp_path: Path,
) -> None:
    d = tmp_path / "d"
    d.mkdir()
    old = time.time() - 3600
    os.utime(d, (old, old))
    marker = tmp_path / "marker"
    marker.touch()
    assert dir_stamp(str(d), stamp_limit(marker)) == UNKNOWN_STAMP


def test_a_directory_older_than_the_limit_is_stamped_with_its_mtime_ctime_and_inode(
    tmp_path: Path,
) -> None:
    d = tmp_path / "d"
    d.mkdir()
    st = os.lstat(d)
    assert dir_stamp(str(d), max(st.st_mtime_ns, st.st_ctime_ns) + 1) == (
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
    )
    assert dir_stamp(str(d), max(st.st_mtime_ns, st.st_ctime_ns)) == UNKNOWN_STAMP


def test_the_limit_follows_the_earlier_of_the_wall_clock_and_the_marker(tmp_path: Path) -> None:
    # A file system whose clock runs behind ours (its timestamps are what later changes get).
    marker = tmp_path / "marker"
    marker.touch()
    behind_ns = time.time_ns() - 100 * 1_000_000_000
    os.utime(marker, ns=(behind_ns, behind_ns))
    assert stamp_limit(marker) == behind_ns - STAMP_MARGIN_NS
    assert stamp_limit(tmp_path / "missing") == 0


def test_a_file_or_a_missing_path_gets_no_stamp(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    far = time.time_ns() + 10**12
    assert dir_stamp(str(tmp_path / "f"), far) == UNKNOWN_STAMP
    assert dir_stamp(str(tmp_path / "missing"), far) == UNKNOWN_STAMP


def _state() -> CaptureState:
    rules = DirRules(None, None, True)
    state = CaptureState(fingerprint="f", dirs={"": PLAIN, "a": rules, "b": PLAIN, "a/c": PLAIN})
    state.stamps.update({"": (1, 2, 9), "a": (3, 4, -1), "a/c": (2**62, 2**62 + 5, 2**63 - 1)})
    return state


def test_the_stamps_survive_the_state_file_and_an_unknown_one_stays_unknown() -> None:
    again = CaptureState.from_json(_state().to_json())
    assert again is not None
    assert again.stamps == {
        "": (1, 2, 9),
        "a": (3, 4, -1),
        "b": UNKNOWN_STAMP,
        "a/c": (2**62, 2**62 + 5, 2**63 - 1),
    }


def test_a_state_whose_stamps_were_not_used_is_written_back_as_read() -> None:
    raw = _state().to_json()
    again = CaptureState.from_json(raw)
    assert again is not None
    assert again.to_json() == raw


def test_a_state_without_stamps_has_every_stamp_unknown() -> None:
    data = json.loads(_state().to_json())
    del data["dir_stamps3"]
    again = CaptureState.from_json(json.dumps(data).encode())
    assert again is not None
    assert again.stamps == {}
    assert again.dirs == _state().dirs


def test_stamps_of_another_length_make_the_state_unreadable() -> None:
    data = json.loads(_state().to_json())
    data["plain_dirs"].append("extra")
    assert CaptureState.from_json(json.dumps(data).encode()) is None
    data = json.loads(_state().to_json())
    data["dir_stamps3"] = 5
    assert CaptureState.from_json(json.dumps(data).encode()) is None


def test_stamps_that_do_not_decode_are_all_unknown() -> None:
    data = json.loads(_state().to_json())
    text = data["dir_stamps3"]
    data["dir_stamps3"] = "!" * len(text)
    again = CaptureState.from_json(json.dumps(data).encode())
    assert again is not None
    assert again.stamps == {}


def test_stamps_set_after_reading_are_written_back_with_the_others_as_read() -> None:
    again = CaptureState.from_json(_state().to_json())
    assert again is not None
    again.stamps["b"] = (7, 8, 6)
    again.stamps["a"] = UNKNOWN_STAMP
    third = CaptureState.from_json(again.to_json())
    assert third is not None
    assert third.stamps == {
        "": (1, 2, 9),
        "a": UNKNOWN_STAMP,
        "b": (7, 8, 6),
        "a/c": (2**62, 2**62 + 5, 2**63 - 1),
    }


def test_stamps_cleared_after_reading_are_all_unknown_when_written() -> None:
    again = CaptureState.from_json(_state().to_json())
    assert again is not None
    again.stamps.clear()
    again.stamps["b"] = (7, 8, 6)
    third = CaptureState.from_json(again.to_json())
    assert third is not None
    assert third.stamps == {
        "": UNKNOWN_STAMP,
        "a": UNKNOWN_STAMP,
        "b": (7, 8, 6),
        "a/c": UNKNOWN_STAMP,
    }


def test_stamps_of_an_earlier_version_without_the_inode_are_all_unknown() -> None:
    # Pairs (mtime, ctime) under "dir_stamps": one could vouch for another directory moved to
    # the same path with the same times (tests/integration/test_capture_dir_stamps.py).
    data = json.loads(_state().to_json())
    pairs = base64.b64decode(data.pop("dir_stamps3"))
    data["dir_stamps"] = base64.b64encode(pairs[: len(pairs) * 2 // 3]).decode()
    again = CaptureState.from_json(json.dumps(data).encode())
    assert again is not None
    assert again.stamps == {}
    assert "dir_stamps" not in json.loads(again.to_json())
