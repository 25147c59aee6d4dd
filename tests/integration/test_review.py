"""``rewind show`` / ``log --patch`` semantics on real sessions recorded by the engine, with git as the oracle."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.errors import NoRewindPointError
from ledger.git.repo import GitRepo
from ledger.review.diff import diff_trees
from ledger.review.show import colorize_patch, log_text, open_review, show_entry
from tests.enginekit import Agent
from tests.gitkit import git


def _write(rel: str, data: bytes | str, mode: int | None = None):
    def change(repo: Path) -> None:
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        if mode is not None:
            os.chmod(path, mode)

    return change


def _many(*changes):
    def change(repo: Path) -> None:
        for c in changes:
            c(repo)

    return change


def _symlink(rel: str, target: str):
    def change(repo: Path) -> None:
        path = repo / rel
        if path.is_symlink() or path.exists():
            path.unlink()
        path.symlink_to(target)

    return change


def _delete(rel: str):
    return lambda repo: (repo / rel).unlink()


def _git_diff(repo: Path, a: str, b: str, *extra: str) -> str:
    """The oracle: ``git diff`` of the two trees (renames off unless ``-M`` is passed)."""
    return git(repo, "diff", *(extra or ("--no-renames",)), a, b)


@pytest.fixture
def recorded(repo: Path, tmp_path: Path) -> tuple[Agent, dict[str, object]]:
    agent = Agent.start(repo, tmp_path / "agent")
    body = "".join(f"line {i}\n" for i in range(40))
    ids: dict[str, object] = {}
    ids["p1"] = agent.prompt(
        "Create the files",
        _many(
            _write("src/app.py", "def main():\n" + body),
            _write("notes.txt", "no newline at end"),
            _write("empty.txt", ""),
            _write("tool.sh", "#!/bin/sh\necho hi\n"),
        ),
    )
    ids["p2"] = agent.prompt(
        "Edit, binary, link, chmod",
        _many(
            _write("src/app.py", "def main():\n" + body.replace("line 20\n", "LINE 20\n")),
            _write("notes.txt", "still no newline"),
            _write("blob.bin", b"\x00\x01\x02binary"),
            _symlink("link", "notes.txt"),
            lambda r: os.chmod(r / "tool.sh", 0o755),
        ),
        _many(_write("second.txt", "turn two\n"), _delete("empty.txt")),
    )
    ids["p3"] = agent.prompt(
        "Rename and retarget",
        _many(
            lambda r: (r / "second.txt").rename(r / "renamed.txt"),
            _symlink("link", "src/app.py"),
            _write("blob.bin", b"\x00\x03other"),
        ),
    )
    return agent, ids


def test_every_step_patch_is_byte_for_byte_git_diff(
    recorded: tuple[Agent, dict[str, object]],
) -> None:
    agent, _ids = recorded
    review = open_review(GitRepo.discover(agent.repo), agent.session_file)
    kinds = [s.kind for s in review.steps]
    assert kinds == ["prompt", "turn", "prompt", "turn", "turn", "prompt", "turn"]
    for step in review.steps:
        diff = review.diff(step)
        assert diff is not None and step.before and step.after
        assert diff.patch == _git_diff(agent.repo, step.before, step.after), step


def test_a_prompt_spans_all_its_turns_and_a_turn_only_itself(
    recorded: tuple[Agent, dict[str, object]],
) -> None:
    agent, ids = recorded
    user2, (turn_a, turn_b) = ids["p2"]  # type: ignore[misc]
    repo = GitRepo.discover(agent.repo)
    prompt, _ = show_entry(repo, agent.session_file, user2)
    first, _ = show_entry(repo, agent.session_file, turn_a)
    second, _ = show_entry(repo, agent.session_file, turn_b)
    assert prompt.step.before == first.step.before and prompt.step.after == second.step.after
    assert first.step.after == second.step.before
    assert prompt.step.text == "Edit, binary, link, chmod"
    assert prompt.step.summary == "turn 1 of Edit, binary, link, chmod"
    assert {f.path for f in second.diff.files} == {"second.txt", "empty.txt"}  # type: ignore[union-attr]
    patch = prompt.diff.patch  # type: ignore[union-attr]
    assert "Binary files /dev/null and b/blob.bin differ" in patch
    assert "old mode 100644\nnew mode 100755" in patch
    assert "new file mode 120000" in patch
    assert "\\ No newline at end of file" in patch
    assert "deleted file mode 100644\nindex e69de29" in patch


def test_renames_are_detected_only_when_asked(recorded: tuple[Agent, dict[str, object]]) -> None:
    agent, ids = recorded
    user3, _ = ids["p3"]  # type: ignore[misc]
    repo = GitRepo.discover(agent.repo)
    plain, _ = show_entry(repo, agent.session_file, user3)
    renamed, _ = show_entry(repo, agent.session_file, user3, find_renames=True)
    assert {f.status for f in plain.diff.files} >= {"added", "deleted"}  # type: ignore[union-attr]
    assert "rename from second.txt\nrename to renamed.txt" in renamed.diff.patch  # type: ignore[union-attr]
    step = plain.step
    assert renamed.diff.patch == _git_diff(agent.repo, step.before, step.after, "-M")  # type: ignore[arg-type, union-attr]


def test_entries_without_two_points_are_refused_with_a_hint(
    recorded: tuple[Agent, dict[str, object]],
) -> None:
    agent, _ = recorded
    repo = GitRepo.discover(agent.repo)
    with pytest.raises(NoRewindPointError) as err:
        show_entry(repo, agent.session_file, "m0000001")
    assert err.value.hint


def test_log_text_lists_every_prompt_and_turn_and_colour_strips_to_the_plain_text(
    recorded: tuple[Agent, dict[str, object]],
) -> None:
    agent, ids = recorded
    review = open_review(GitRepo.discover(agent.repo), agent.session_file)
    plain = "".join(log_text(review, "patch"))
    for user_id, turn_ids in ids.values():  # type: ignore[misc]
        assert f"prompt {user_id}" in plain
        for turn in turn_ids:
            assert f"turn {turn} (prompt {user_id})" in plain
    import re

    coloured = "".join(log_text(review, "patch", color=True))
    assert "\x1b[32m+" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
    assert colorize_patch("") == ""
    stat = "".join(log_text(review, "stat"))
    assert "files changed" in stat and "diff --git" not in stat


def test_patch_parity_on_a_packed_repository_uses_gits_abbreviation(repo: Path) -> None:
    for i in range(300):
        (repo / f"f{i:03}.txt").write_text(f"{i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "many")
    git(repo, "gc", "-q")
    old = git(repo, "rev-parse", "HEAD^{tree}").strip()
    for i in range(0, 300, 7):
        (repo / f"f{i:03}.txt").write_text(f"{i} changed\n")
    git(repo, "add", "-A")
    new = git(repo, "write-tree").strip()
    r = GitRepo.discover(repo).pygit2
    assert diff_trees(r, old, new).patch == _git_diff(repo, old, new)
    assert diff_trees(r, new, old).patch == _git_diff(repo, new, old)
