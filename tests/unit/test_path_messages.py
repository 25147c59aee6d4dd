"""Messages name paths as git quotes them (issue 32, item 5).

A refusal, a warning or a listed line that printed a raw name could break a line (a newline),
garble a terminal (a raw byte) or name a path nobody can find; each names it as ``git status``
does (``core.quotePath`` on: ``"caf\\351.txt"``), except that a name of printable UTF-8
characters stays readable. git itself is the oracle. Before the fix, these messages held the
surrogate-escaped ``str`` (``caf\\udce9.txt``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ledger.errors import DirtySubmoduleError, UnsafeRestoreError
from ledger.git.restore.apply import mismatch
from ledger.outside_rules import plan_files, short_list
from ledger.quoting import display_name, display_names

QUOTED = [b"caf\xe9.txt", b"new\nline", b"tab\there", b'q"uote', b"back\\slash", b"\xff\xfe"]
READABLE = ["plain.txt", "café.txt", "with space"]


def test_a_name_git_would_quote_is_shown_exactly_as_git_quotes_it(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in QUOTED:
        with open(os.fsencode(tmp_path) + b"/" + name, "wb") as f:
            f.write(b"x")
    listed = subprocess.run(
        ["git", "-c", "core.quotePath=true", "ls-files", "--others"],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    ).stdout.splitlines()
    assert sorted(display_name(os.fsdecode(n)).encode("ascii") for n in QUOTED) == sorted(listed)
    assert sorted(display_name(n).encode("ascii") for n in QUOTED) == sorted(listed)


def test_a_printable_utf8_name_stays_readable() -> None:
    assert [display_name(n) for n in READABLE] == READABLE
    assert display_name("rtl\u202eevil") == '"rtl\\342\\200\\256evil"'  # not printable


def test_refusals_warnings_and_plan_lines_quote_the_names() -> None:
    names = ["caf\udce9.txt", "a\nb", "ok.txt"]
    shown = '"caf\\351.txt", "a\\nb", ok.txt'
    assert str(UnsafeRestoreError("a reason", names)) == f"restore refused: a reason: {shown}"
    assert mismatch(names).endswith(f": {shown}")
    assert short_list(names) == shown
    assert plan_files(names[:1], names[1:2], names[2:]) == 'A "caf\\351.txt"  M "a\\nb"  D ok.txt'
    assert display_names([f"f{i}" for i in range(7)]) == "f0, f1, f2, f3, f4 (and 2 more)"
    dirty = DirtySubmoduleError("sub\udcff")
    assert str(dirty) == 'snapshot failed: dirty submodule: "sub\\377"'
    assert dirty.path == "sub\udcff"  # the value itself stays exact
