"""Property: a capture whose late pass looks only at the directories git's untracked cache read
again (ledger/git/capture/untracked_cache.py) still equals a fresh-index ``git add -A`` tree.

The late pass runs when the capture is in step with git's untracked cache (``synced``) and status
was not quiet. It must still see what status cannot list: a self-ignoring ``.gitignore``, a new
nested repository, a directory removed or made again with rules in it, a directory moved. Each
example reaches that state first (work tree backdated, captures until one is in step), checks
that a plain rename there takes the narrowed pass, then applies random edits across nested
directories, capturing after each batch, with or without a pause (a pause lets git's racy-time
window close; no pause keeps directories racy, which the narrowed pass must include).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger.git.capture.scan as scan
from ledger.git.capture.index import PrivateIndex
from ledger.git.capture.scan import capture_tree
from ledger.git.repo import GitRepo
from tests.gitkit import fresh_tree, git, ls_tree
from tests.snapshotkit import NO_PROTECTION as NONE

DIRS = ["", "a", "a/b", "c", "c/d", "e"]
SUBDIRS = DIRS[1:]
IDENTITY = ("-c", "user.name=Prop", "-c", "user.email=prop@example.com")

edit = st.one_of(
    st.tuples(st.just("rename-in-place"), st.sampled_from(DIRS)),
    st.tuples(st.just("new-file"), st.sampled_from(DIRS)),
    st.tuples(st.just("delete-file"), st.sampled_from(DIRS)),
    st.tuples(st.just("self-ignoring"), st.sampled_from(DIRS)),
    st.tuples(st.just("rules-renamed-away"), st.sampled_from(DIRS)),
    st.tuples(st.just("nested-repo"), st.sampled_from(SUBDIRS)),
    st.tuples(st.just("remove-dir"), st.sampled_from(SUBDIRS)),
    st.tuples(st.just("remake-dir"), st.sampled_from(SUBDIRS)),
    st.tuples(st.just("move-dir"), st.sampled_from(SUBDIRS)),
    st.tuples(st.just("pause"), st.just("")),
)


def _file(repo: Path, rel: str, name: str) -> Path:
    return repo / rel / name if rel else repo / name


def _apply(repo: Path, op: str, rel: str, counter: list[int]) -> None:
    base = repo / rel if rel else repo
    counter[0] += 1
    if op == "pause":
        time.sleep(1.05)
        return
    if op in ("remake-dir",) or base.is_dir():
        pass
    else:
        return
    if any((parent / ".git").exists() for parent in [base, *base.parents] if parent != repo):
        return  # inside a nested repository: a dirty one fails a capture on purpose
    if op == "rename-in-place":
        target = _file(repo, rel, "f.txt")
        if target.is_file():
            tmp = target.with_name("f.txt.tmp")
            tmp.write_bytes(target.read_bytes() + b"+")
            os.replace(tmp, target)
    elif op == "new-file":
        _file(repo, rel, f"n{counter[0]}.txt").write_bytes(b"new\n")
    elif op == "delete-file":
        _file(repo, rel, "f.txt").unlink(missing_ok=True)
    elif op == "self-ignoring":
        _file(repo, rel, ".gitignore").write_bytes(b".gitignore\n*.md\n")
        _file(repo, rel, "x.md").write_bytes(b"ignored\n")
    elif op == "rules-renamed-away":
        rules = _file(repo, rel, ".gitignore")
        if rules.is_file():
            rules.rename(rules.with_name(f"old-rules{counter[0]}"))
    elif op == "nested-repo":
        if not any(p.name == ".git" for p in base.rglob(".git")):
            git(base, "init", "-q")
            git(base, "add", "-A")
            git(base, *IDENTITY, "commit", "-q", "--allow-empty", "-m", "nested")
    elif op == "remove-dir":
        shutil.rmtree(base)
    elif op == "remake-dir":
        if base.exists():
            shutil.rmtree(base)
        base.mkdir(parents=True)
        (base / "f.txt").write_bytes(b"again\n")
        (base / ".gitignore").write_bytes(b".gitignore\nf.txt\n")
    elif op == "move-dir":
        base.rename(base.with_name(f"{base.name}-moved{counter[0]}"))


def _age(repo: Path) -> None:
    when = time.time() - 30
    for top, dirs, names in os.walk(repo):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*names, *dirs]:
            os.utime(os.path.join(top, name), (when, when), follow_symlinks=False)
    os.utime(repo, (when, when))


@contextmanager
def _narrowed_passes() -> Iterator[list[bool]]:
    """Whether each late pass could name the directories git read again."""
    seen: list[bool] = []
    real = scan.reread_dirs

    def spy(*args: object) -> list[str] | None:
        result = real(*args)  # type: ignore[arg-type]
        seen.append(result is not None)
        return result

    scan.reread_dirs = spy  # type: ignore[assignment]
    try:
        yield seen
    finally:
        scan.reread_dirs = real


def _check(gitrepo: GitRepo, repo: Path, steps: object) -> None:
    tree = capture_tree(gitrepo, NONE).tree
    expected = fresh_tree(repo)
    assert tree == expected, (
        f"{steps}\nours:\n{ls_tree(repo, tree)}\nexpected:\n{ls_tree(repo, expected)}"
    )


def _synced(gitrepo: GitRepo) -> bool:
    state = PrivateIndex(gitrepo.git_dir).load_state()
    return state is not None and state.synced


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.lists(edit, min_size=1, max_size=3), min_size=1, max_size=5))
def test_a_narrowed_late_pass_captures_what_a_fresh_index_holds(
    steps: list[list[tuple[str, str]]],
) -> None:
    root = Path(tempfile.mkdtemp(prefix="late-pass-prop-"))
    try:
        repo = root / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        for rel in DIRS:
            (repo / rel).mkdir(parents=True, exist_ok=True)
            _file(repo, rel, "f.txt").write_bytes(f"{rel}\n".encode())
            _file(repo, rel, "g.txt").write_bytes(b"g\n")
        _age(repo)
        gitrepo = GitRepo.discover(repo)
        _check(gitrepo, repo, "start")
        for _ in range(5):
            time.sleep(1.05)  # the index written is older than the next status
            _check(gitrepo, repo, "until in step")
            if _synced(gitrepo):
                break
        assert _synced(gitrepo), "git's untracked cache never quiet on an aged work tree"
        counter = [0]
        with _narrowed_passes() as narrowed:
            _apply(repo, "rename-in-place", "c/d", counter)
            _check(gitrepo, repo, "rename in c/d")
            assert narrowed == [True], "the late pass after a rename looked everywhere"
            for batch in steps:
                for op, rel in batch:
                    _apply(repo, op, rel, counter)
                _check(gitrepo, repo, steps)
            _check(gitrepo, repo, steps)  # and the capture after agrees too
    finally:
        shutil.rmtree(root, ignore_errors=True)
