"""Paths quoted as git quotes them with ``core.quotePath`` off (``rewind diff`` follows the
user's setting): git itself is the oracle (``git ls-files --others``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ledger.quoting import quote_c_style
from tests.unit.test_quoting import NAMES


def test_with_quote_path_off_every_name_is_quoted_as_git_quotes_it(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in NAMES:
        (tmp_path / os.fsdecode(name)).write_bytes(b"x")
    listed = subprocess.run(
        ["git", "-c", "core.quotePath=false", "ls-files", "--others"],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    ).stdout.splitlines()
    ours = [os.fsencode(quote_c_style(os.fsdecode(name), quote_path=False)) for name in NAMES]
    assert sorted(ours) == sorted(listed)
    assert sorted(os.fsencode(quote_c_style(n, quote_path=False)) for n in NAMES) == sorted(listed)
