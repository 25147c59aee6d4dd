"""``rewind restore`` and ``rewind diff`` with names that are not UTF-8 (issue 32, item 5).

A recorded agent creates files named with raw bytes (``caf\\xe9.txt``, a newline, a TAB, a
directory ``d\\xff`` holding files); the user then deletes or changes them outside the agent.
The real CLI, run as a process (the bytes a user's terminal receives), must bring each back byte
for byte, list them as ``git diff --name-status`` quotes them, judge an ignored name by its exact
bytes, and name paths in refusals as git quotes them. Before the fix every such plan was refused:
``error: restore refused: cannot tell whether a path is ignored now: caf\\udce9.txt`` (a
surrogate-escaped ``str`` handed to libgit2's ``path_is_ignored``, which takes only UTF-8).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.enginekit import Agent, fresh_index_tree
from tests.gitkit import ROOT

NAMES = {
    b"caf\xe9.txt": b"latin-1 \xe9\n",
    b"new\nline.txt": b"newline\n",
    b"tab\there.txt": b"tab\n",
    b"d\xff/inner.txt": b"inner\n",
    b"d\xff/two \xfe.bin": b"\x00\xff binary\n",
    b"plain.txt": b"plain\n",
}


def raw(repo: Path, name: bytes) -> bytes:
    return os.fsencode(repo) + b"/" + name


def write(repo: Path, name: bytes, data: bytes) -> None:
    path = raw(repo, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def read(repo: Path, name: bytes) -> bytes | None:
    try:
        with open(raw(repo, name), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def rewind(agent: Agent, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--agent-dir", str(agent.agent_dir), *args],
        cwd=agent.repo,
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def recorded(repo: Path, tmp_path: Path, files: dict[bytes, bytes]) -> tuple[Agent, str]:
    """An agent that wrote ``files`` in its first prompt; the second prompt's user entry (whose
    rewind point holds them)."""
    agent = Agent.start(repo, tmp_path / "agent")

    def create(r: Path) -> None:
        for name, data in files.items():
            write(r, name, data)

    agent.prompt("Create them", create)
    user, _ = agent.prompt("Nothing")
    return agent, user


def test_restore_brings_back_every_non_utf8_name_byte_exact(repo: Path, tmp_path: Path) -> None:
    agent, user = recorded(repo, tmp_path, NAMES)
    shutil.rmtree(raw(repo, b"d\xff"))
    for name in (b"caf\xe9.txt", b"new\nline.txt"):
        os.unlink(raw(repo, name))
    write(repo, b"tab\there.txt", b"changed outside\n")

    result = rewind(agent, "restore", "@", user, "--mode", "files", "--yes")

    assert result.returncode == 0, result.stderr
    assert {name: read(repo, name) for name in NAMES} == NAMES
    assert sorted(os.listdir(raw(repo, b"d\xff"))) == [b"inner.txt", b"two \xfe.bin"]
    assert b'  A "caf\\351.txt"\n' in result.stdout
    assert b'  M "tab\\there.txt"\n' in result.stdout
    assert b"\xe9" not in result.stdout and b"\xff" not in result.stdout  # every name quoted


def test_diff_lists_the_names_as_git_diff_name_status_quotes_them(
    repo: Path, tmp_path: Path
) -> None:
    agent, user = recorded(repo, tmp_path, NAMES)
    shutil.rmtree(raw(repo, b"d\xff"))
    os.unlink(raw(repo, b"new\nline.txt"))
    write(repo, b"caf\xe9.txt", b"changed outside\n")
    write(repo, b"extra\xe9\n.txt", b"new outside\n")
    before = fresh_index_tree(repo)

    result = rewind(agent, "diff", "@", user)
    target = rewind(agent, "diff", "@", user, "--json")

    assert result.returncode == 0, result.stderr
    import json

    commit = json.loads(target.stdout)["target"]
    git = subprocess.run(
        ["git", "diff", "--name-status", "--no-renames", before, commit],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    expected = sorted(line.replace(b"\t", b" ", 1) for line in git.splitlines())
    ours = sorted(line.strip() for line in result.stdout.splitlines()[1:])
    assert ours == expected
    assert b'A "d\\377/two \\376.bin"' in ours and b'D "extra\\351\\n.txt"' in ours
    assert rewind(agent, "diff", "@", user, "--patch").returncode == 0
    assert read(repo, b"caf\xe9.txt") == b"changed outside\n"  # diff changes nothing


def test_an_ignored_non_utf8_name_is_judged_by_its_exact_bytes(repo: Path, tmp_path: Path) -> None:
    files = {
        b"caf\xe9.log": b"ignored now\n",
        b"caf\xe8.log": b"one byte apart: not ignored\n",
        b"ign\xff/a.txt": b"under an ignored directory\n",
        b"keep\xe9.txt": b"kept\n",
    }
    agent, user = recorded(repo, tmp_path, files)
    for name in files:
        os.unlink(raw(repo, name))
    os.rmdir(raw(repo, b"ign\xff"))
    with open(repo / ".git" / "info" / "exclude", "ab") as f:
        f.write(b"caf\xe9.log\nign\xff/\n")

    result = rewind(agent, "restore", "@", user, "--mode", "files", "--yes")

    assert result.returncode == 0, result.stderr
    assert read(repo, b"caf\xe8.log") == files[b"caf\xe8.log"]
    assert read(repo, b"keep\xe9.txt") == files[b"keep\xe9.txt"]
    assert read(repo, b"caf\xe9.log") is None  # ignored now: never written (design#ignored-files)
    assert not os.path.lexists(raw(repo, b"ign\xff"))
    assert (
        b'left alone (ignored or protected now; a restore never writes those): "caf\\351.log", "ign\\377/a.txt"'
        in result.stderr
    )


def test_a_refusal_names_a_non_utf8_path_as_git_quotes_it(repo: Path, tmp_path: Path) -> None:
    agent, user = recorded(repo, tmp_path, {b"d\xe9/f.txt": b"in a directory\n"})
    shutil.rmtree(raw(repo, b"d\xe9"))
    write(repo, b"d\xe9", b"an ignored file where the directory was\n")
    with open(repo / ".git" / "info" / "exclude", "ab") as f:
        f.write(b"d\xe9\n")

    result = rewind(agent, "restore", "@", user, "--mode", "files", "--yes")

    assert result.returncode == 1
    assert result.stderr.startswith(
        b"error: restore refused: a path would replace a file the current capture does not hold "
        b'(ignored or protected): "d\\351/f.txt"\n'
    ), result.stderr
    assert read(repo, b"d\xe9") == b"an ignored file where the directory was\n"
