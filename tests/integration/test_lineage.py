"""Lineage across forks: nearest binding wins, pruned commits are skipped, cycles and holes stop the walk."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from ledger.git.repo import GitRepo
from ledger.lineage import LineageReader
from ledger.record_models import build_turn
from ledger.records import TURN, custom_entry
from ledger.session.store import create_session_file
from tests.gitkit import git
from tests.pisample import materialize_sample, session_file


def snapshot_commit(repo: Path, content: str) -> str:
    (repo / "notes.txt").write_text(content)
    env = {"GIT_INDEX_FILE": str(repo / ".git" / "tmp-index")}
    git(repo, "add", "-A", env=env)
    tree = git(repo, "write-tree", env=env).strip()
    (repo / ".git" / "tmp-index").unlink()
    return git(repo, "commit-tree", tree, "-m", "pi rewind snapshot").strip()


def user(entry_id: str, parent: str | None, text: str = "P") -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-11-22T03:00:01.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1},
    }


def write_session(path: Path, header: dict, entries: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in [header, *entries]))
    return path


def header(session_id: str, cwd: Path, parent: Path | str | None = None) -> dict:
    h = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": "2026-11-22T03:00:00.000Z",
        "cwd": str(cwd),
    }
    if parent is not None:
        h["parentSession"] = str(parent)
    return h


def test_a_fork_child_resolves_entries_bound_in_its_parent(repo: Path, tmp_path: Path) -> None:
    c1 = snapshot_commit(repo, "one\n")
    parent = write_session(
        tmp_path / "parent.jsonl",
        header("p", repo),
        [
            user("u0000001", None),
            custom_entry(
                TURN,
                build_turn([("u0000001", c1)]).to_data(),
                "r0000001",
                "u0000001",
                "2026-11-22T03:00:02.000Z",
            ),
        ],
    )
    child = create_session_file(
        tmp_path / "sessions", str(repo), [user("u0000001", None)], parent_session=str(parent)
    )
    reader = LineageReader()
    lineage = reader.lineage(child)
    assert [link.session_id for link in lineage.links][1] == "p"
    assert lineage.links[0].fast_path, "a file without rewind records is read header-only"
    sha, link = lineage.resolve("u0000001", GitRepo.discover(repo).commit_exists)
    assert (sha, link.session_id) == (c1, "p")


def test_the_nearest_existing_binding_wins_and_pruned_commits_are_skipped(
    repo: Path, tmp_path: Path
) -> None:
    good = snapshot_commit(repo, "good\n")
    pruned = "0123456789abcdef0123456789abcdef01234567"
    grand = write_session(
        tmp_path / "g.jsonl",
        header("g", repo),
        [
            user("u0000001", None),
            custom_entry(TURN, build_turn([("u0000001", good)]).to_data(), "r1", "u0000001", "t"),
        ],
    )
    mid = write_session(
        tmp_path / "m.jsonl",
        header("m", repo, grand),
        [
            user("u0000001", None),
            custom_entry(TURN, build_turn([("u0000001", pruned)]).to_data(), "r1", "u0000001", "t"),
        ],
    )
    lineage = LineageReader().lineage(mid)
    exists = GitRepo.discover(repo).commit_exists
    assert lineage.resolve("u0000001", exists) == (good, lineage.links[1])
    assert lineage.points(exists)["u0000001"][0] == good


def test_a_parent_session_cycle_stops_with_a_warning(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_session(a, header("a", tmp_path, b), [user("u0000001", None)])
    write_session(b, header("b", tmp_path, a), [user("u0000001", None)])
    lineage = LineageReader().lineage(a)
    assert [link.session_id for link in lineage.links] == ["a", "b"]
    assert "cycle" in lineage.warnings[0]


def test_a_self_parent_and_a_symlinked_parent_count_as_cycles(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    os.symlink(a, tmp_path / "alias.jsonl")
    write_session(a, header("a", tmp_path, tmp_path / "alias.jsonl"), [])
    lineage = LineageReader().lineage(a)
    assert len(lineage.links) == 1 and "cycle" in lineage.warnings[0]


def test_a_missing_or_broken_parent_ends_the_walk_with_a_warning(tmp_path: Path) -> None:
    missing = write_session(
        tmp_path / "c.jsonl", header("c", tmp_path, tmp_path / "gone.jsonl"), []
    )
    lineage = LineageReader().lineage(missing)
    assert len(lineage.links) == 1 and "unreadable" in lineage.warnings[0]
    (tmp_path / "broken.jsonl").write_text("garbage\n")
    broken = write_session(
        tmp_path / "d.jsonl", header("d", tmp_path, tmp_path / "broken.jsonl"), []
    )
    assert "not a Pi session file" in LineageReader().lineage(broken).warnings[0]


def test_a_relative_parent_path_resolves_against_the_header_cwd(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    parent = write_session(
        tmp_path / "work" / "sessions" / "p.jsonl", header("p", tmp_path / "work"), []
    )
    child = write_session(
        tmp_path / "elsewhere" / "c.jsonl", header("c", tmp_path / "work", "sessions/p.jsonl"), []
    )
    assert [l.path for l in LineageReader().lineage(child).links] == [
        child.resolve(),
        parent.resolve(),
    ]


def test_the_cache_sees_a_changed_file(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl", header("s", tmp_path), [user("u0000001", None)])
    reader = LineageReader()
    assert reader.load(path).view.entry_to_commit == {}
    sha = "a" * 40
    with path.open("ab") as f:
        f.write(
            orjson.dumps(
                custom_entry(TURN, build_turn([("u0000001", sha)]).to_data(), "r1", "u0000001", "t")
            )
            + b"\n"
        )
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert reader.load(path).view.entry_to_commit == {"u0000001": sha}


def test_the_real_pi_fork_chain_resolves(tmp_path: Path) -> None:
    root = materialize_sample(tmp_path / "sample")
    fork = session_file(root, "agent", "fork")
    clone = session_file(root, "agent", "clone")
    lineage = LineageReader().lineage(clone)
    assert [l.path for l in lineage.links] == [
        clone.resolve(),
        fork.resolve(),
        session_file(root, "agent", "parent").resolve(),
    ]
    assert lineage.warnings == []
    orphan_fork = session_file(root, "agent", "forkFromFirstUserMessage")
    assert len(LineageReader().lineage(orphan_fork).links) == 1, (
        "Pi wrote no parentSession (quirk 12.2)"
    )


@pytest.mark.parametrize("name", ["crossProjectFork", "handoff", "fork", "cloneWithOrphans"])
def test_the_sm_scenario_children_point_at_their_parent(tmp_path: Path, name: str) -> None:
    root = materialize_sample(tmp_path / "sample")
    lineage = LineageReader().lineage(session_file(root, "sm", name))
    assert lineage.links[-1].path == session_file(root, "sm", "parent").resolve()
