"""The reader agrees with real Pi on every file of the sample: leaf, branch, labels, tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.session.model import entry_text, short
from ledger.session.store import read_session
from tests.pisample import SAMPLE, iter_cases, manifest, materialize_sample

CASES = [name for name, _path, _expected in iter_cases()]


@pytest.fixture(scope="module")
def relocated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    """The sample relocated into a temporary directory, as the fixture README describes."""
    root = materialize_sample(tmp_path_factory.mktemp("pi") / "sample")
    return {name: (path, expected) for name, path, expected in iter_cases(root)}


def test_the_sample_has_every_scenario() -> None:
    names = {name.split("/")[0] for name in CASES}
    assert names == {"agent", "sm", "legacy", "cli"}
    assert len(CASES) == 14


@pytest.mark.parametrize("name", CASES)
def test_reader_matches_pi_on_header_leaf_branch_and_labels(name: str, relocated: dict) -> None:
    path, expected = relocated[name]
    assert path.exists()
    session = read_session(path)
    assert session.header == expected["header"]
    assert "/pi-fixture-root" not in str(session.header)
    assert len(session.entries) == expected["entryCount"]
    assert session.leaf_id == expected["leafIdOnOpen"]
    assert [e.id for e in session.branch()] == expected["branchIdsRootToLeaf"]
    assert session.labels == expected["labels"]
    assert session.name == expected["sessionName"]
    assert session.migrated_from is None


@pytest.mark.parametrize("name", CASES)
def test_reader_tree_matches_pi_get_tree(name: str, relocated: dict) -> None:
    path, expected = relocated[name]
    session = read_session(path)
    ours = []
    for depth, entry in session.tree():
        node = {
            "depth": depth,
            "id": entry.id,
            "parentId": entry.raw.get("parentId"),
            "type": entry.type,
            "label": session.labels.get(entry.id),
            "childIds": [child.id for child in session.children(entry.id)],
        }
        ours.append(node)
    theirs = [
        {k: n[k] for k in ("depth", "id", "parentId", "type", "label", "childIds")}
        for n in expected["tree"]
    ]
    assert ours == theirs
    # Per-type details Pi's flattening shows (role, text, toolName, command, customType, …).
    for (depth, entry), node in zip(session.tree(), expected["tree"]):
        if "role" in node:
            assert entry.role == node["role"]
        if "text" in node:
            assert short(entry_text(entry)) == node["text"]
        for key in ("customType", "targetId", "fromId", "firstKeptEntryId"):
            if key in node:
                assert entry.raw.get(key) == node[key]
        if "toolName" in node:
            assert entry.raw["message"]["toolName"] == node["toolName"]
        if "command" in node:
            assert entry.raw["message"]["command"] == node["command"]


def test_duplicate_flush_lists_the_root_twice_but_the_branch_once() -> None:
    path = SAMPLE / "external" / "no-assistant-written-externally.jsonl"
    session = read_session(path)
    ids = [e.id for _, e in session.tree()]
    assert ids.count("e0e0e0e0") == 2
    assert [e.id for e in session.branch()].count("e0e0e0e0") == 1
    assert [s.reason for s in session.skipped] == ["repeated session header"]


def test_orphans_after_clone_are_roots_and_stop_the_branch() -> None:
    m = manifest()
    path = SAMPLE / m["scenarios"]["sm"]["sessions"]["cloneWithOrphans"]["file"]
    session = read_session(path)
    roots = [e.id for depth, e in session.tree() if depth == 0]
    assert roots == ["6cf9edd4", "b956e90a"]
    assert session.branch()[0].id == "b956e90a"


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_legacy_inputs_migrate_in_memory_like_pi(version: str, tmp_path: Path) -> None:
    files = manifest()["scenarios"]["legacy"]["files"][version]
    source = SAMPLE / files["input"]
    before = source.read_bytes()
    ours = read_session(source)
    pis = read_session(SAMPLE / files["migrated"])
    assert source.read_bytes() == before, "reading must never rewrite a legacy file"
    assert ours.migrated_from == int(version[1])
    assert ours.header == pis.header
    # v1 ids are random in Pi's rewrite: compare shape, and map positions for references.
    assert [e.type for e in ours.entries] == [e.type for e in pis.entries]
    position = {e.id: i for i, e in enumerate(ours.entries)}
    pi_position = {e.id: i for i, e in enumerate(pis.entries)}
    for mine, theirs in zip(ours.entries, pis.entries):
        assert list(mine.raw) == list(theirs.raw), "keys in Pi's order"
        assert {
            k: v for k, v in mine.raw.items() if k not in ("id", "parentId", "firstKeptEntryId")
        } == {
            k: v for k, v in theirs.raw.items() if k not in ("id", "parentId", "firstKeptEntryId")
        }
        if mine.parent_id is None:
            assert theirs.parent_id is None
        else:
            assert position[mine.parent_id] == pi_position[theirs.parent_id]
        if "firstKeptEntryId" in theirs.raw:
            assert (
                position[mine.raw["firstKeptEntryId"]]
                == pi_position[theirs.raw["firstKeptEntryId"]]
            )
    if version == "v2":
        assert [e.id for e in ours.entries] == [e.id for e in pis.entries]


def test_migrated_ids_are_stable_across_reads() -> None:
    source = SAMPLE / manifest()["scenarios"]["legacy"]["files"]["v1"]["input"]
    assert [e.id for e in read_session(source).entries] == [
        e.id for e in read_session(source).entries
    ]
