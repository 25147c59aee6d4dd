"""Property: after any sequence of work-tree edits, a capture from the kept private index equals
a fresh-index ``git -c core.autocrlf=false add -A`` tree.

Edits are drawn from what breaks stat caches and ignore/attribute caches: same-size rewrites
that restore the mtime, deletions, renames (including case-only), mode flips, symlinks, CRLF
content, ``.gitignore`` and ``.gitattributes`` edits in the root and a subdirectory (also in place,
same size, mtime restored; also self-ignoring ones), rule files in new directories, and new
nested repositories in directories whose files were captured. ``age`` backdates the work tree
and captures twice, so that the edits after it meet a capture that takes the shortcut of
docs/capture.md#start-up (git's untracked cache quiet, only rule directories re-signed).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.git.capture.scan import capture_tree
from ledger.git.repo import GitRepo
from tests.gitkit import fresh_tree, git
from tests.snapshotkit import NO_PROTECTION as NONE

NAMES = ["a.txt", "A.txt", "b.md", "dir/c.txt", "dir/D.txt", "dir/sub/e.bin", "x*y.txt"]
CONTENTS = [b"", b"one\n", b"two\n", b"one\r\ntwo\r\n", b"\x00bin", b"eins\n"]
IGNORES = [
    b"",
    b"*.md\n",
    b"dir/\n",
    b"sub/\n",
    b"*.txt\n!a.txt\n",
    b"e.bin\n",
    b".gitignore\n*.md\n",
    b".gitignore\n.gitattributes\nc.txt\n",
]
ATTRIBUTES = [b"", b"*.txt text eol=lf\n", b"*.txt -text\n", b"* text=auto\n"]

edit = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.sampled_from(CONTENTS)),
    st.tuples(st.just("same-size"), st.sampled_from(NAMES), st.sampled_from(CONTENTS)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.none()),
    st.tuples(st.just("chmod"), st.sampled_from(NAMES), st.none()),
    st.tuples(st.just("symlink"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("ignore"), st.sampled_from(["", "dir/"]), st.sampled_from(IGNORES)),
    st.tuples(st.just("attributes"), st.sampled_from(["", "dir/"]), st.sampled_from(ATTRIBUTES)),
    st.tuples(
        st.just("ignore-in-place"), st.sampled_from(["", "dir/", "new/"]), st.sampled_from(IGNORES)
    ),
    st.tuples(
        st.just("attributes-in-place"),
        st.sampled_from(["", "dir/", "new/"]),
        st.sampled_from(ATTRIBUTES),
    ),
    st.tuples(st.just("ignore"), st.just("new/"), st.sampled_from(IGNORES)),
    st.tuples(st.just("nested-repo"), st.sampled_from(["dir", "dir/sub"]), st.none()),
    st.tuples(st.just("age"), st.just(""), st.none()),
)
IDENTITY = ("-c", "user.name=Prop", "-c", "user.email=prop@example.com")


def _apply(repo: Path, op: str, name: str, arg: object) -> None:
    path = repo / name
    if op in ("write", "same-size"):
        if path.is_symlink() or path.is_dir():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        content = arg if isinstance(arg, bytes) else b""
        if op == "same-size" and path.exists():
            before = path.stat()
            content = (content * 8)[: before.st_size].ljust(before.st_size, b"z")
            path.write_bytes(content)
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        else:
            path.write_bytes(content)
    elif op == "delete":
        if path.is_symlink() or path.is_file():
            path.unlink()
    elif op == "chmod":
        if path.is_file() and not path.is_symlink():
            path.chmod(path.stat().st_mode ^ 0o111)
    elif op == "symlink":
        if not path.exists() and not path.is_symlink():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(str(arg))
    elif op == "rename":
        target = repo / str(arg)
        if (
            (path.is_file() or path.is_symlink())
            and not target.exists()
            and not target.is_symlink()
        ):
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
    elif op in ("ignore", "attributes"):
        base = repo / name
        base.mkdir(parents=True, exist_ok=True)
        rule_file = base / (".gitignore" if op == "ignore" else ".gitattributes")
        rule_file.write_bytes(arg if isinstance(arg, bytes) else b"")
        if name == "new/":
            (base / "c.txt").write_bytes(b"c\r\n")
            (base / "e.bin").write_bytes(b"e\n")
    elif op in ("ignore-in-place", "attributes-in-place"):
        rule_file = repo / name / (".gitignore" if op == "ignore-in-place" else ".gitattributes")
        if rule_file.is_file() and not rule_file.is_symlink():
            before = rule_file.stat()
            content = arg if isinstance(arg, bytes) else b""
            content = content[: before.st_size].ljust(before.st_size, b"\n")
            with open(rule_file, "r+b") as handle:
                handle.write(content)
            os.utime(rule_file, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif op == "nested-repo":
        nested = repo / name
        if nested.is_dir() and not nested.is_symlink() and not _has_repo_near(repo, nested):
            git(nested, "init", "-q")
            _commit_nested(nested)


def _has_repo_near(repo: Path, path: Path) -> bool:
    """A ``.git`` in ``path``, above it (below the root) or below it."""
    for parent in [path, *path.parents]:
        if parent == repo:
            break
        if (parent / ".git").exists():
            return True
    return any(p.name == ".git" for p in path.rglob(".git"))


def _commit_nested(nested: Path) -> None:
    git(nested, "add", "-A")
    git(nested, *IDENTITY, "commit", "-q", "--allow-empty", "-m", "nested")


def _nested_clean(repo: Path) -> None:
    """Commit what changed in nested repositories: a dirty one fails a capture on purpose."""
    for dotgit in repo.rglob(".git"):
        if dotgit.parent != repo and git(dotgit.parent, "status", "--porcelain"):
            _commit_nested(dotgit.parent)


def _age(repo: Path) -> None:
    when = time.time() - 30
    for base, dirs, names in os.walk(repo):
        dirs[:] = [d for d in dirs if d != ".git"]
        for entry in [*dirs, *names]:
            os.utime(os.path.join(base, entry), (when, when), follow_symlinks=False)
    os.utime(repo, (when, when))


def _check(gitrepo: GitRepo, repo: Path, steps: object) -> None:
    _nested_clean(repo)
    assert capture_tree(gitrepo, NONE).tree == fresh_tree(repo), steps


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.lists(edit, min_size=1, max_size=3), min_size=1, max_size=6))
def test_capture_equals_fresh_index_after_any_edit_sequence(steps: list[list[tuple]]) -> None:
    root = Path(tempfile.mkdtemp(prefix="capture-prop-"))
    try:
        repo = root / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        (repo / "a.txt").write_bytes(b"start\n")
        (repo / "dir").mkdir()
        (repo / "dir" / "c.txt").write_bytes(b"c\r\n")
        gitrepo = GitRepo.discover(repo)
        assert capture_tree(gitrepo, NONE).tree == fresh_tree(repo)
        for batch in steps:
            for op, name, arg in batch:
                if op == "age":
                    _age(repo)
                    _check(gitrepo, repo, steps)
                    _check(gitrepo, repo, steps)
                else:
                    _apply(repo, op, name, arg)
            _check(gitrepo, repo, steps)
    finally:
        shutil.rmtree(root, ignore_errors=True)
