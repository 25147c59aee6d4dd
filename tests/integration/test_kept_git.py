"""The change feed's kept git processes answer runs of paths exactly as one-shot git does.

``KeptGit`` sends ``hash-object --stdin-paths`` and ``check-ignore --stdin`` several paths at a
time (runs of at most one pipe page of input) and reads as many answers; these tests compare its
answers with one-shot ``git`` for batches that span many runs, a path that fills most of a run, negated ignore patterns and attribute conversions."""

from __future__ import annotations

from pathlib import Path

from ledger.git.feed.tree import CHECK_IGNORE, HASH_PATHS, PIPE_PAGE, KeptGit
from ledger.git.repo import GitRepo
from tests.gitkit import git


def _layout(repo: Path) -> list[str]:
    (repo / ".gitignore").write_text("*.log\n!keep.log\nbuild/\n")
    (repo / ".gitattributes").write_text("*.crlf text eol=crlf\n")
    paths = []
    for i in range(400):  # ~12 KB of input: several runs
        name = f"dir{i % 7}/file-{i:04d}" + (".log" if i % 5 == 0 else ".txt")
        paths.append(name)
    paths[200:200] = ["dir1/keep.log", "build/out.txt", "dir2/text.crlf"]
    deep = "/".join(["d" * 200] * 17) + "/deep.txt"  # most of a run by itself (PATH_MAX)
    assert PIPE_PAGE // 2 < len(deep) < PIPE_PAGE
    paths[100:100] = [deep]
    for name in paths:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(f"content of {name[-40:]}\nline two\n")
    (repo / "dir2" / "text.crlf").write_bytes(b"a\nb\n")
    return paths


def test_kept_hash_object_answers_many_runs_like_one_shot_git(repo: Path) -> None:
    paths = _layout(repo)
    gitrepo = GitRepo.discover(repo)
    kept = KeptGit(gitrepo.root, gitrepo.git_dir)
    try:
        data = "".join(f"{p}\n" for p in paths).encode()
        for _ in range(2):  # the second time through the same, still running process
            answer = kept.run(list(HASH_PATHS), input=data).stdout.decode().split()
            expected = git(repo, "hash-object", "--", *paths).split()
            assert answer == expected and len(answer) == len(paths)
    finally:
        kept.close()


def test_kept_check_ignore_answers_many_runs_like_one_shot_git(repo: Path) -> None:
    paths = _layout(repo)
    gitrepo = GitRepo.discover(repo)
    kept = KeptGit(gitrepo.root, gitrepo.git_dir)
    try:
        data = b"".join(p.encode() + b"\0" for p in paths)
        answer = kept.run(
            list(CHECK_IGNORE), input=data, extra_env={"GIT_LITERAL_PATHSPECS": "0"}
        ).stdout
        ignored = sorted(p.decode() for p in answer.split(b"\0") if p)
        one_shot = git(repo, "check-ignore", "--no-index", "--", *paths, check=False)
        assert ignored == sorted(one_shot.split("\n")[:-1])
        assert "dir1/keep.log" not in ignored and "build/out.txt" in ignored
        assert sum(p.endswith(".log") for p in ignored) == 80
    finally:
        kept.close()
