"""Paths quoted exactly as git quotes them (``core.quotePath`` on, its default): git itself is
the oracle (``git ls-files --others`` prints untracked names quoted)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.quoting import quote_c_style

NAMES = [
    b"a.txt",
    b"b c",
    b"caf\xe9.txt",
    b"tab\tname",
    b'q"uote',
    b"back\\slash",
    b"uni\xc3\xa9",
    b"del\x7f",
    b"nl\nx",
    b"bell\x07",
    b"\xff\xfe",
]


def git_listing(root: Path, names: list[bytes]) -> list[bytes]:
    for name in names:
        (root / os.fsdecode(name)).write_bytes(b"x")
    out = subprocess.run(
        ["git", "-c", "core.quotePath=true", "ls-files", "--others"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout
    return out.splitlines()


def test_every_name_is_quoted_as_git_quotes_it(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    listed = git_listing(tmp_path, NAMES)
    ours = sorted(quote_c_style(name).encode("latin-1") for name in NAMES)
    assert ours == sorted(listed)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=12))
def test_quoting_is_reversible_and_ascii(raw: bytes) -> None:
    quoted = quote_c_style(raw)
    assert quoted.isascii()
    if quoted.startswith('"'):
        body = quoted[1:-1].encode("ascii")
        assert body.decode("unicode_escape").encode("latin-1") == raw
    else:
        assert quoted.encode("ascii") == raw
