"""``rewind sessions``, ``rewind log`` and ``rewind tree`` on real Pi sessions and real git."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest

from ledger.record_models import build_op, build_turn
from ledger.records import OP, TURN, custom_entry
from tests.cli.helpers import run_cli, run_process
from tests.gitkit import git
from tests.pisample import manifest, materialize_sample, session_file


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    root = materialize_sample(tmp_path / "sample")
    project = root / "workspace" / "agent-project"
    git(project, "init", "-q")
    return root


def test_sessions_lists_the_repository_sessions_newest_first(
    sample: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [
        session_file(sample, "agent", n)
        for n in ("parent", "fork", "clone", "forkFromFirstUserMessage")
    ]
    for age, path in enumerate(files):
        os.utime(path, (1_800_000_000 - age * 10, 1_800_000_000 - age * 10))
    result = run_cli(
        capsys,
        "sessions",
        "--json",
        "--agent-dir",
        sample / "agent-home",
        cwd=sample / "workspace" / "agent-project",
    )
    assert result.code == 0, result.err
    rows = result.json_lines()
    assert [Path(r["file"]).resolve() for r in rows] == [p.resolve() for p in files]
    assert set(rows[0]) == {"id", "file", "entries", "points", "parentSession"}
    assert rows[0]["parentSession"] is None and rows[1]["parentSession"] == str(files[0])
    text = run_cli(
        capsys,
        "--agent-dir",
        sample / "agent-home",
        "sessions",
        cwd=sample / "workspace" / "agent-project",
    )
    assert text.out.splitlines()[0].startswith("01a20162-90ea")


def test_session_names_resolve_by_prefix_newest_and_path(
    sample: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = sample / "workspace" / "agent-project"
    parent = session_file(sample, "agent", "parent")
    os.utime(parent, (1_900_000_000, 1_900_000_000))
    args = ("--agent-dir", sample / "agent-home")
    by_prefix = run_cli(capsys, "tree", "01a20162-90ea", "--json", *args, cwd=project)
    newest = run_cli(capsys, "tree", "@", "--json", *args, cwd=project)
    by_path = run_cli(capsys, "tree", parent, "--json", *args, cwd=project)
    assert by_prefix.code == newest.code == by_path.code == 0
    assert by_prefix.out == newest.out == by_path.out
    ambiguous = run_cli(capsys, "tree", "01a20162", *args, cwd=project)
    assert ambiguous.code == 1
    assert (
        "ambiguous" in ambiguous.err
        and "hint: use a longer prefix; candidates: 01a20162-" in ambiguous.err
    )
    unknown = run_cli(capsys, "log", "ffff", *args, cwd=project)
    assert (
        unknown.code == 1
        and "no session matches 'ffff'" in unknown.err
        and "hint: known sessions:" in unknown.err
    )


def test_tree_json_has_one_object_per_entry_in_file_order(
    sample: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = session_file(sample, "sm", "parent")
    expected = json.loads(
        (sample / manifest(sample)["scenarios"]["sm"]["sessions"]["parent"]["expected"]).read_text()
    )
    result = run_cli(capsys, "tree", path, "--json")
    rows = result.json_lines()
    assert result.code == 0
    assert len(rows) == expected["entryCount"]
    assert list(rows[0]) == ["id", "parentId", "type", "role", "text", "label", "leaf", "point"]
    assert [r["id"] for r in rows if r["leaf"]] == [expected["leafIdOnOpen"]]
    assert {r["id"]: r["label"] for r in rows if r["label"]} == expected["labels"]
    texts = {n["id"]: n["text"] for n in expected["tree"] if "text" in n}
    assert {r["id"]: r["text"] for r in rows if r["id"] in texts} == texts


def make_repo_session(repo: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A session in ``repo`` with a turn record binding real snapshot commits, and a pruned one."""
    commits = {}
    for name in ("one", "two"):
        (repo / "f.txt").write_text(name)
        env = {"GIT_INDEX_FILE": str(tmp_path / f"idx-{name}")}
        git(repo, "add", "-A", env=env)
        tree = git(repo, "write-tree", env=env).strip()
        commits[name] = git(repo, "commit-tree", tree, "-m", "pi rewind snapshot").strip()
    pruned = "0123456789abcdef0123456789abcdef01234567"
    entries = [
        {
            "type": "session",
            "version": 3,
            "id": "0199aaaa-1111",
            "timestamp": "2026-11-22T03:00:00.000Z",
            "cwd": str(repo),
        },
        {
            "type": "message",
            "id": "u0000001",
            "parentId": None,
            "timestamp": "2026-11-22T03:00:01.000Z",
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": "Write f.txt"}],
                "timestamp": 1,
            },
        },
        {
            "type": "message",
            "id": "a0000001",
            "parentId": "u0000001",
            "timestamp": "2026-11-22T03:00:02.000Z",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Done."}],
                "timestamp": 2,
            },
        },
        custom_entry(
            TURN,
            build_turn([("u0000001", commits["one"]), ("a0000001", commits["two"])]).to_data(),
            "r0000001",
            "a0000001",
            "2026-11-22T03:00:03.000Z",
        ),
        {
            "type": "message",
            "id": "u0000002",
            "parentId": "r0000001",
            "timestamp": "2026-11-22T03:00:04.000Z",
            "message": {"role": "user", "content": "Again", "timestamp": 3},
        },
        custom_entry(
            OP,
            build_op(
                current=commits["two"], undo=commits["one"], bindings=[("u0000002", pruned)]
            ).to_data(),
            "r0000002",
            "u0000002",
            "2026-11-22T03:00:05.000Z",
        ),
    ]
    path = tmp_path / "agent" / "sessions" / "--repo--" / "s.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in entries))
    return path, {**commits, "pruned": pruned}


def test_log_prints_one_grepable_line_per_reference(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, c = make_repo_session(repo, tmp_path)
    result = run_cli(capsys, "log", path, cwd=repo)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert len(lines) == 5
    assert lines[0].split()[:6] == ["u0000001", "binding", c["one"], "r0000001", "user", "Write"]
    assert [l.split()[1] for l in lines] == ["binding", "binding", "binding", "current", "undo"]
    rows = run_cli(capsys, "log", path, "--json", cwd=repo).json_lines()
    assert list(rows[0]) == [
        "entryId",
        "kind",
        "snapshot",
        "record",
        "recordType",
        "session",
        "file",
        "timestamp",
        "role",
        "text",
    ]
    assert rows[3] == {
        "entryId": "u0000002",
        "kind": "current",
        "snapshot": c["two"],
        "record": "r0000002",
        "recordType": "rewind-op",
        "session": "0199aaaa-1111",
        "file": str(path),
        "timestamp": "2026-11-22T03:00:05.000Z",
        "role": "user",
        "text": "Again",
    }


def test_tree_marks_points_through_lineage_and_skips_pruned_commits(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, c = make_repo_session(repo, tmp_path)
    child = tmp_path / "agent" / "sessions" / "--repo--" / "child.jsonl"
    lines = path.read_bytes().splitlines()
    header = orjson.loads(lines[0])
    header.update(id="0199bbbb-2222", parentSession=str(path))
    child.write_bytes(orjson.dumps(header) + b"\n" + lines[1] + b"\n" + lines[2] + b"\n")
    rows = {r["id"]: r for r in run_cli(capsys, "tree", child, "--json", cwd=repo).json_lines()}
    assert rows["u0000001"]["point"] == c["one"]
    assert rows["a0000001"]["point"] == c["two"]
    assert rows["a0000001"]["leaf"] is True
    parent_rows = {
        r["id"]: r for r in run_cli(capsys, "tree", path, "--json", cwd=repo).json_lines()
    }
    assert parent_rows["u0000002"]["point"] is None, "a pruned commit is no rewind point"
    drawn = run_cli(capsys, "tree", path, cwd=repo).out
    assert f"◆ {c['one'][:8]}" in drawn and "← leaf" in drawn


def test_log_lineage_adds_the_ancestors_references(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, c = make_repo_session(repo, tmp_path)
    child = tmp_path / "child.jsonl"
    child.write_text(
        orjson.dumps(
            {
                "type": "session",
                "version": 3,
                "id": "kid",
                "timestamp": "t",
                "cwd": str(repo),
                "parentSession": str(path),
            }
        ).decode()
        + "\n"
    )
    assert run_cli(capsys, "log", child, "--json", cwd=repo).out == ""
    rows = run_cli(capsys, "log", child, "--lineage", "--json", cwd=repo).json_lines()
    assert {r["session"] for r in rows} == {"0199aaaa-1111"}
    assert len(rows) == 5


# --- bad input: a clear error or a reported skip, never a traceback, the file unchanged ----


def test_bad_inputs_give_errors_with_hints_and_change_nothing(repo: Path, tmp_path: Path) -> None:
    header = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/r"}\n'
    cases = {
        "garbage.jsonl": (header + b"garbage\n\x00\x01\n", 0, "skipped (not valid JSON)"),
        "torn.jsonl": (header + b'{"type":"message","id":"to', 0, "torn last line"),
        "noheader.jsonl": (b'{"type":"message","id":"x"}\n', 1, "not a Pi session file"),
        "binary.jsonl": (
            header + b'{"type":"custom","id":"b","parentId":null,"data":"\xff\xfe"}\n',
            0,
            "invalid UTF-8",
        ),
        "huge.jsonl": (
            header
            + b'{"type":"custom","customType":"x","id":"h","parentId":null,"data":"'
            + b"z" * 10_000_000
            + b'"}\n',
            0,
            "",
        ),
    }
    for name, (data, code, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        for command in ("log", "tree"):
            result = run_process(command, path, cwd=repo)
            assert result.code == code, (name, command, result.err)
            assert "Traceback" not in result.err
            assert message in result.err, (name, command, result.err)
            if code:
                assert result.err.startswith("error: ") and "\nhint: " in result.err
            assert path.read_bytes() == data


def test_a_directory_or_missing_session_is_an_error(repo: Path, tmp_path: Path) -> None:
    directory = tmp_path / "dir.jsonl"
    directory.mkdir()
    for target, message in (
        (directory, "is a directory"),
        (tmp_path / "missing.jsonl", "no such file"),
    ):
        result = run_process("log", target, cwd=repo)
        assert (
            result.code == 1
            and message in result.err
            and "hint:" in result.err
            and "Traceback" not in result.err
        )


def test_parent_cycles_and_missing_parents_are_warnings(repo: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(
        f'{{"type":"session","version":3,"id":"a","timestamp":"t","cwd":"{repo}","parentSession":"{b}"}}\n'
    )
    b.write_text(
        f'{{"type":"session","version":3,"id":"b","timestamp":"t","cwd":"{repo}","parentSession":"{a}"}}\n'
    )
    result = run_process("log", a, "--lineage", cwd=repo)
    assert result.code == 0 and "warning: parentSession cycle" in result.err
    orphan = tmp_path / "o.jsonl"
    orphan.write_text(
        f'{{"type":"session","version":3,"id":"o","timestamp":"t","cwd":"{repo}","parentSession":"/nope.jsonl"}}\n'
    )
    result = run_process("tree", orphan, cwd=repo)
    assert result.code == 0 and "stopped following parents" in result.err


def test_outside_a_repository_named_sessions_need_a_repo(tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    result = run_process("sessions", cwd=outside)
    assert result.code == 1
    assert (
        "is not inside a git repository" in result.err
        and "hint: run inside a git work tree or pass --repo DIR" in result.err
    )


def test_wrong_usage_exits_2_with_a_hint(repo: Path) -> None:
    for args in (("log", "--bogus"), ("frobnicate",), ("tree", "@", "--bogus")):
        result = run_process(*args, cwd=repo)
        assert result.code == 2, args
        assert result.err.startswith("error: ") and "hint: see 'rewind" in result.err


def test_json_is_accepted_before_or_after_the_subcommand(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = make_repo_session(repo, tmp_path)
    before = run_cli(capsys, "--json", "log", path, cwd=repo)
    after = run_cli(capsys, "log", path, "--json", cwd=repo)
    assert before.out == after.out and before.json_lines()
