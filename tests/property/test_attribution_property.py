"""Property (issue 27): for any interleaving of this session's agent, another session's agent
and the user writing files in one work tree, every file a restore would change is attributed to
exactly one of the three, and to the one who wrote its content now.

Two real engines on one real repository, each with its own session file in Pi's directory for
the work tree (so the other is found as a recent sibling, docs/design.md#attribution); the
writes are real files, each with content never written before, so that the ground truth (who
wrote the current content) is unambiguous. The restore is session A's, to the point before its
first prompt, as a dry run (the plan a user would be shown).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.engine import operations
from tests.enginekit import Agent
from tests.gitkit import one_commit_repo

PATHS = ["a.txt", "b.txt", "src/c.py", "src/d.py", "notes.md"]
WHO = ["A", "B", "user"]

steps = st.lists(
    st.tuples(st.sampled_from(WHO), st.sets(st.sampled_from(PATHS), min_size=1, max_size=3)),
    min_size=1,
    max_size=8,
)


def _writer(paths: set[str], tag: str) -> Callable[[Path], None]:
    def write(root: Path) -> None:
        for rel in sorted(paths):
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"{tag} {rel}\n")

    return write


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=steps)
def test_every_changed_file_has_exactly_one_author_and_it_is_the_last_writer(
    isolated_env: Path, script: list[tuple[str, set[str]]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = one_commit_repo(root / "repo", {"a.txt": "base a\n", "src/c.py": "base c\n"})
        agent_dir = root / "agent"
        first = Agent.start(repo, agent_dir)
        other = Agent.start(repo, agent_dir)
        point, _ = first.prompt("the point before everything")
        last: dict[str, str] = {}
        for index, (who, paths) in enumerate(script):
            write = _writer(paths, f"{who}-{index}")
            if who == "A":
                first.prompt(f"prompt {index}", write)
            elif who == "B":
                other.prompt(f"prompt {index}", write)
            else:
                write(repo)
            last.update(dict.fromkeys(paths, who))

        report = operations.restore(first.engine, point, "files", dry_run=True)

        changed = {*report.added, *report.modified, *report.deleted}
        user = {c.path for c in report.outside}
        theirs = {p for group in report.others for p in group.paths}
        assert not user & theirs, "one author per file"
        mine = changed - user - theirs
        assert changed == set(last), "the restore changes exactly the files written since"
        assert {p for p, w in last.items() if w == "user"} == user
        assert {p for p, w in last.items() if w == "B"} == theirs
        assert {p for p, w in last.items() if w == "A"} == mine
        for group in report.others:
            assert group.neighbour.session_id == other.engine.session().id
            assert not group.neighbour.running  # no bridge announced it: a recent sibling
