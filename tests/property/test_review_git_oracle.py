"""Property: what ``rewind show``/``log`` print for a step is byte for byte what the git CLI
prints for the same two snapshot commits: ``git diff --no-color`` with ``--patch``, ``--stat``,
``--numstat`` and ``--name-status``, with and without ``-M``.

Trees are drawn small but nasty: names with spaces, tabs, quotes, backslashes, newlines and
bytes that are not UTF-8 (Latin-1); contents with CR, CRLF, mixed endings, no final newline,
empty, NUL (binary), control bytes (text to git, binary to libgit2); executable files, symlinks,
file↔symlink changes, renames with and without edits. They are written with git's plumbing
(``hash-object``, ``mktree``, ``commit-tree`` as a parentless snapshot commit), so names that no
file system would accept elsewhere still exist here (Linux only). The values
(:class:`~ledger.review.diff.FileDiff`) must agree with the text: one per numstat line, the
same counts, and their patches joined give the whole patch.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.git.repo import GitRepo
from ledger.review.diff import GitDiffer
from ledger.review.show import diff_text
from tests.gitkit import init_repo

NAMES = [
    b"a.txt",
    b"b c.txt",
    b"t\tab",
    b'q"uote',
    b"back\\slash",
    b"new\nline",
    b"caf\xe9.txt",
    b"dir/x.py",
    b"dir/y z.py",
    b"dir/caf\xe9",
]
LONG = b"".join(b"line %d\n" % i for i in range(12))
CONTENTS = [
    b"",
    b"one\n",
    b"no final newline",
    b"cr\rcr\r",
    b"crlf\r\nline\r\n",
    b"mixed\r\nend\nx\r",
    b"\x00bin\x01",
    b"\x01\x02ctrl\n",
    b"caf\xe9 latin-1\n",
    LONG,
    LONG.replace(b"line 5\n", b"LINE 5\n"),
]
MODES = ["100644", "100755", "120000"]

entry = st.tuples(st.sampled_from(MODES), st.sampled_from(CONTENTS))
tree = st.dictionaries(st.sampled_from(NAMES), entry, max_size=5)
edit = st.one_of(
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.none()),
    st.tuples(st.just("write"), st.sampled_from(NAMES), entry),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("mode"), st.sampled_from(NAMES), st.sampled_from(MODES)),
)
OPTIONS = [
    ("patch", ["-p", "--no-renames"]),
    ("patch", ["-p", "-M"]),
    ("stat", ["--stat", "--no-renames"]),
    ("stat", ["--stat", "-M"]),
    ("numstat", ["--numstat", "--no-renames"]),
    ("numstat", ["--numstat", "-M"]),
    ("name-status", ["--name-status", "--no-renames"]),
    ("name-status", ["--name-status", "-M"]),
]


def _git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "COLUMNS"}
    proc = subprocess.run(
        ["git", *args], cwd=repo, input=input, capture_output=True, check=True, env=env
    )
    return proc.stdout


def _mktree(repo: Path, files: dict[bytes, tuple[str, bytes]]) -> str:
    top: dict[bytes, tuple[str, bytes]] = {}
    sub: dict[bytes, dict[bytes, tuple[str, bytes]]] = {}
    for name, value in files.items():
        head, slash, rest = name.partition(b"/")
        if slash:
            sub.setdefault(head, {})[rest] = value
        else:
            top[name] = value
    lines = b""
    for name, (mode, data) in top.items():
        oid = _git(repo, "hash-object", "-w", "--stdin", input=data).strip()
        lines += mode.encode() + b" blob " + oid + b"\t" + name + b"\0"
    for name, children in sub.items():
        oid = _mktree(repo, children).encode()
        lines += b"040000 tree " + oid + b"\t" + name + b"\0"
    return _git(repo, "mktree", "-z", input=lines).decode().strip()


def _snapshot(repo: Path, files: dict[bytes, tuple[str, bytes]]) -> str:
    tree = _mktree(repo, files)
    env_identity = ["-c", "user.name=Prop", "-c", "user.email=prop@example.com"]
    return (
        _git(repo, *env_identity, "commit-tree", tree, "-m", "pi rewind snapshot").decode().strip()
    )


def _apply(files: dict[bytes, tuple[str, bytes]], edits: list[tuple]) -> dict:
    out = dict(files)
    for op, name, arg in edits:
        if op == "delete":
            out.pop(name, None)
        elif op == "write":
            out[name] = arg
        elif op == "rename" and name in out and arg != name:
            out[arg] = out.pop(name)
        elif op == "mode" and name in out:
            out[name] = (arg, out[name][1])
    return out


@pytest.fixture(scope="module")
def oracle_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_repo(tmp_path_factory.mktemp("oracle") / "repo")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    before=tree, edits=st.lists(edit, min_size=1, max_size=5), independent=st.booleans(), other=tree
)
def test_every_format_is_byte_for_byte_the_git_cli(
    oracle_repo: Path, before: dict, edits: list, independent: bool, other: dict
) -> None:
    after = other if independent else _apply(before, edits)
    a, b = _snapshot(oracle_repo, before), _snapshot(oracle_repo, after)
    repo = GitRepo.discover(oracle_repo)
    for renames in (False, True):
        differ = GitDiffer(repo, find_renames=renames, width=80)
        flag = "-M" if renames else "--no-renames"
        for fmt, args in OPTIONS:
            if args[1] != flag:
                continue
            expected = _git(oracle_repo, "diff", "--no-color", *args, a, b)
            diff = differ.diff(a, b, files=False, texts=(fmt,))  # type: ignore[arg-type]
            ours = diff_text(diff, fmt)  # type: ignore[arg-type]
            assert ours.encode("utf-8", "surrogateescape") == expected, (fmt, args)
        values = differ.diff(a, b, files=True, texts=("patch",))
        numstat = _git(oracle_repo, "diff", "--numstat", flag, a, b).splitlines()
        assert len(values.files) == len(numstat)
        assert "".join(f.patch for f in values.files) == values.patch
        for f, line in zip(values.files, numstat):
            added, deleted = line.split(b"\t")[:2]
            assert (f.binary, f.additions, f.deletions) == (
                (True, 0, 0) if added == b"-" else (False, int(added), int(deleted))
            )


def test_a_typechange_is_one_stat_line_and_two_patch_sections(oracle_repo: Path) -> None:
    a = _snapshot(oracle_repo, {b"LICENSE.txt": ("120000", b"COPYING"), b"b c": ("100644", b"x\n")})
    b = _snapshot(oracle_repo, {b"LICENSE.txt": ("100644", b"text\n"), b"b c": ("100644", b"y\n")})
    differ = GitDiffer(GitRepo.discover(oracle_repo))
    diff = differ.diff(a, b, files=True, texts=("patch", "stat"))
    assert diff.stat().endswith(" 2 files changed, 2 insertions(+), 2 deletions(-)\n")
    assert [f.status for f in diff.files] == ["typechange", "modified"]
    assert diff.files[0].patch.count("diff --git") == 2
    assert "--- a/b c\t\n+++ b/b c\t\n" in diff.patch
