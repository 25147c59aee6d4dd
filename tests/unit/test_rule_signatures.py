"""A rule file's signature is never reused when it was read within two seconds of the file's
last change (ledger/git/capture/state.py ``file_signature``; git's racy-timestamp rule).

On a file system whose clock ticks coarsely (a kernel without fine-grained timestamps: every
change in one tick of its coarse clock, ~4 ms, gets the same ctime; FAT: 2 s), a ``.gitignore``
rewritten in place, same size, in the tick in which a capture read it keeps its size, mtime,
ctime and inode. The age was checked only at reuse, by which time the file looked long
unchanged, so the capture kept the old rules. Linux 6.13+ stamps a changed file finely once its
times were read, so the tick is simulated here: ``lstat`` reports the first read's times.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ledger.git.capture import state
from ledger.git.capture.state import RACY_CTIME, file_signature


def _coarse_clock_lstat(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """``lstat`` of ``path`` as a coarse clock has it: the times of the first read, always."""
    first = os.lstat(path)
    real = os.lstat

    def lstat(target: object, *args: object, **kwargs: object) -> os.stat_result:
        st = real(target, *args, **kwargs)  # type: ignore[arg-type]
        if os.fspath(target) != os.fspath(path):  # type: ignore[arg-type]
            return st
        values = list(st)
        values[8], values[9] = first.st_mtime, first.st_ctime
        return os.stat_result(
            values,
            {"st_mtime_ns": first.st_mtime_ns, "st_ctime_ns": first.st_ctime_ns},
        )

    monkeypatch.setattr(state.os, "lstat", lstat)


def test_a_rule_file_rewritten_in_the_tick_it_was_read_is_read_again_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / ".gitignore"
    rules.write_bytes(b"a.txt\n")
    _coarse_clock_lstat(monkeypatch, rules)
    read = file_signature(rules, None, reuse=True)  # the capture reads it, in the same tick
    assert read is not None and read.ctime_ns == RACY_CTIME
    rules.write_bytes(b"b.txt\n")  # same size, same tick: size, times and inode all kept
    later = state.time.time_ns() + 3_000_000_000
    monkeypatch.setattr(state.time, "time_ns", lambda: later)  # the next capture, seconds on
    again = file_signature(rules, read, reuse=True)
    assert again is not None and again.digest == hashlib.sha1(b"b.txt\n").hexdigest()


def test_a_signature_read_long_after_the_change_is_reused_while_nothing_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / ".gitattributes"
    rules.write_bytes(b"* text\n")
    later = state.time.time_ns() + 3_000_000_000
    monkeypatch.setattr(state.time, "time_ns", lambda: later)
    read = file_signature(rules, None, reuse=True)
    assert read is not None and read.ctime_ns == os.lstat(rules).st_ctime_ns
    assert file_signature(rules, read, reuse=True) is read  # reused: no read of the file


def test_the_fingerprints_signatures_keep_the_real_times(tmp_path: Path) -> None:
    """Files outside the tree (``core.excludesFile``, ``info/exclude``) are always read, never
    reused; their signature carries the file's own times (part of the fingerprint)."""
    excludes = tmp_path / "exclude"
    excludes.write_bytes(b"*.log\n")
    signed = file_signature(excludes)
    assert signed is not None and signed.ctime_ns == os.lstat(excludes).st_ctime_ns
