"""The authorship index as the engine writes and reads it (issue 33, docs/authorship.md#wiring):
the flows the old recomputation got wrong, the index written as work happens, its rebuild, and a
plan's cost that does not grow with the history.

Each test drives real engines on a real git repository and asks what a restore plan would say
(``operations.restore``/``undo`` dry runs: the same plan the CLI and the menus show)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.authorship import store as store_module
from ledger.authorship.store import AuthorshipStore
from ledger.engine import authorship_log, operations
from ledger.engine.authorship_log import AuthorshipLog
from ledger.engine.operations import restore, undo
from ledger.git.private import private_dir
from tests.enginekit import Agent


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _writes(files: dict[str, str]) -> Callable[[Path], None]:
    def act(root: Path) -> None:
        for name, text in files.items():
            _write(root / name, text)

    return act


def _own(report: operations.RestoreReport) -> list[str]:
    return sorted(c.path for c in report.outside)


def _others(report: operations.RestoreReport) -> dict[str, list[str]]:
    return {g.neighbour.session_id: list(g.paths) for g in report.others}


def test_files_the_agent_wrote_on_a_branch_left_by_a_conversation_rewind_stay_the_agents(
    repo: Path, tmp_path: Path
) -> None:
    a = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("one", _writes({"a.txt": "a1\n"}))
    second, _ = a.prompt("two", _writes({"b.txt": "b2\n", "a.txt": "a2\n"}))
    restore(a.engine, second, "conversation")  # "Conversation only": the files stay
    plan = restore(a.engine, first, "files", dry_run=True)
    assert sorted(plan.deleted) == ["a.txt", "b.txt"]
    assert _own(plan) == [] and plan.others == [], "P2's agent wrote them, on the branch left"


def test_content_a_restore_put_back_is_never_called_the_users(repo: Path, tmp_path: Path) -> None:
    _write(repo / "README.md", "the user's readme\n")
    a = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("one", _writes({"README.md": "agent readme\n"}))
    a.prompt("two", _writes({"c.txt": "c\n"}))
    restore(a.engine, first, "files")  # README back to the user's text: written by the restore
    plan = undo(a.engine, dry_run=True)
    assert "README.md" not in [c.path for c in plan.outside]
    assert plan.modified == ["README.md"] or "README.md" in plan.modified
    # What the user changes after the restore is theirs again.
    _write(repo / "README.md", "edited after the restore\n")
    plan = undo(a.engine, dry_run=True)
    assert _own(plan) == ["README.md"]


def test_another_sessions_agent_work_is_named_and_the_users_apart_from_it(
    repo: Path, tmp_path: Path
) -> None:
    a = Agent.start(repo, tmp_path / "agent")
    b = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("one", _writes({"a.txt": "by A\n"}))
    b.prompt("b works", _writes({"b.txt": "by B\n"}))
    _write(repo / "mine.txt", "by hand\n")
    plan = restore(a.engine, first, "files", dry_run=True)
    assert _others(plan) == {b.engine.session().id: ["b.txt"]}
    assert _own(plan) == ["mine.txt"]
    assert "a.txt" not in _own(plan)


def test_a_forks_parent_turns_before_the_fork_are_this_conversations_not_another_sessions(
    repo: Path, tmp_path: Path
) -> None:
    a = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("one", _writes({"a.txt": "parent's agent, prompt 1\n"}))
    second, _ = a.prompt("two", _writes({"a.txt": "parent's agent, prompt 2\n"}))
    # "Fork from this prompt" at prompt 2 keeping the files: the child holds prompt 1's
    # entries, not prompt 2's, yet prompt 2 ran in this conversation before the fork.
    forked = operations.fork(a.engine, second, "conversation")
    child = Agent(repo, tmp_path / "agent", forked.child)
    child.engine.session_start("fork", str(a.session_file))
    child.prompt("child one", _writes({"c.txt": "child's agent\n"}))
    plan = restore(child.engine, first, "files", dry_run=True)
    assert sorted(plan.deleted) == ["a.txt", "c.txt"]
    assert _own(plan) == [] and plan.others == [], "nothing of this conversation is named"
    # The parent's turns after the fork are another session's: named as the one it forked from.
    again = Agent(repo, tmp_path / "agent", a.session_file)
    again.engine.session_start("startup")
    again.prompt("parent after the fork", _writes({"p.txt": "parent later\n"}))
    plan = restore(child.engine, first, "files", dry_run=True)
    assert _others(plan) == {a.engine.session().id: ["p.txt"]}
    assert plan.others[0].neighbour.label.startswith("the session this one was forked from")


def test_the_index_is_written_as_work_happens_and_a_rebuild_answers_the_same(
    repo: Path, tmp_path: Path
) -> None:
    a = Agent.start(repo, tmp_path / "agent")
    b = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("one", _writes({"a.txt": "a\n"}))
    b.prompt("b", _writes({"b.txt": "b\n"}))
    _write(repo / "mine.txt", "mine\n")
    a.prompt("two", _writes({"d/e.txt": "e\n"}))
    store = AuthorshipStore(private_dir(a.engine.repo.git_dir))
    written = store.read()
    assert written.status in ("partial", "ok") and written.records
    kinds = [(r.author.kind, r.author.session) for r in written.records]
    assert ("agent", b.engine.session().id) in kinds
    live = restore(a.engine, first, "files", dry_run=True)
    assert store.read().status == "ok", "complete: from its first record, or rebuilt at this read"

    store.path.unlink()  # gone: the next plan rebuilds it from the ledgers
    fresh = Agent(repo, tmp_path / "agent", a.session_file)
    fresh.engine.session_start("startup")
    rebuilt = restore(fresh.engine, first, "files", dry_run=True)
    assert fresh.engine.authorship.rebuilds == 1
    assert (_own(rebuilt), _others(rebuilt)) == (_own(live), _others(live))
    assert _own(live) == ["mine.txt"] and _others(live) == {b.engine.session().id: ["b.txt"]}


def test_a_damaged_index_is_rebuilt_and_never_fails_a_restore(repo: Path, tmp_path: Path) -> None:
    a = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("one", _writes({"a.txt": "a\n"}))
    _write(repo / "mine.txt", "mine\n")
    path = private_dir(a.engine.repo.git_dir) / "authorship.idx"
    path.write_bytes(b"not an index at all\n")
    plan = restore(a.engine, first, "files", dry_run=True)
    assert _own(plan) == ["mine.txt"]
    done = restore(a.engine, first, "files")
    assert done.changed and not (repo / "a.txt").exists()
    assert AuthorshipStore(path.parent).read().status == "ok"


def test_a_small_plan_reads_only_the_frames_naming_its_paths(repo: Path, tmp_path: Path) -> None:
    a = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("one", _writes({"a.txt": "a\n"}))
    for n in range(30):
        a.prompt(f"p{n}", _writes({f"f{n}.txt": f"{n}\n"}))
    restore(a.engine, first, "files", dry_run=True)  # a partial file would be rebuilt here
    fresh = Agent(repo, tmp_path / "agent", a.session_file)
    fresh.engine.session_start("startup")
    _write(repo / "a.txt", "by hand\n")
    index = fresh.engine.authorship.index_for({b"a.txt"})
    assert fresh.engine.authorship.rebuilds == 0
    assert {key[0] for key in index} == {b"a.txt"}
    assert index.last_snapshot is not None, "the base of the next capture, from the last frame"


def test_a_capture_whose_base_was_pruned_does_not_make_every_file_the_users(
    repo: Path, tmp_path: Path
) -> None:
    from ledger.authorship.model import Author, Record

    a = Agent.start(repo, tmp_path / "agent")
    b = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("one", _writes({"a.txt": "a\n"}))
    b.prompt("b works", _writes({"b.txt": "by B\n"}))
    restore(a.engine, first, "files", dry_run=True)  # a partial file would be rebuilt: "ok"
    # The index's latest snapshot is gone (pruned, or from a repository copied away).
    gone = Record("0" * 40, Author("user", "elsewhere"), ((b"x.txt", 0o100644, "1" * 40),))
    AuthorshipStore(private_dir(a.engine.repo.git_dir)).append([gone])
    a.prompt("two", _writes({"c.txt": "c\n"}))
    plan = restore(a.engine, first, "files", dry_run=True)
    assert _others(plan) == {b.engine.session().id: ["b.txt"]}, "still B's, not found as the user's"
    assert _own(plan) == []


def test_a_restore_reads_the_index_once_and_then_only_what_another_writer_appended(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cold restore's plan reads the index for its paths; the record of its rewind needs the
    # latest recorded snapshot, which that read found: nothing is read again while the file is
    # the same, and once another process appended, only the bytes from the latest known record
    # on (docs/authorship.md#one-read-per-restore: a watcher's next session reads that way too).
    a = Agent.start(repo, tmp_path / "agent")
    a.prompt("one", _writes({"a.txt": "a1\n"}))
    a.prompt("two", _writes({"b.txt": "b\n"}))
    a.engine.authorship.index_for(None)  # the file made whole (it was begun by appends)
    store = AuthorshipStore(private_dir(a.engine.repo.git_dir))
    assert store.read().status == "ok"
    size = store.path.stat().st_size
    monkeypatch.setattr(authorship_log, "_LATEST", {})  # a fresh process's: nothing known
    ranges: list[tuple[int, int]] = []
    real = store_module._read_range

    def counting(fd: int, start: int, end: int) -> bytes:
        ranges.append((start, end))
        return real(fd, start, end)

    monkeypatch.setattr(store_module, "_read_range", counting)
    log = AuthorshipLog(a.engine.repo)
    log.index_for({b"a.txt"})
    assert ranges == [(0, size)]
    known = dict(authorship_log._LATEST)
    assert log._last() == store.read().last_snapshot
    assert ranges[1:] == [(0, size)], "only the check's own whole read: _last read nothing"
    a.prompt("three", _writes({"c.txt": "c\n"}))  # another writer appends
    monkeypatch.setattr(authorship_log, "_LATEST", known)  # what this process knew before it
    grown = store.path.stat().st_size
    ranges.clear()
    assert log._last() == store.read().last_snapshot
    start, end = ranges[0]
    assert len(ranges) == 2 and end == grown and 0 < start < size, ranges


def _records(store: AuthorshipStore) -> list[tuple[str, str, str | None, tuple[object, ...]]]:
    return sorted(
        (r.snapshot, r.author.kind, r.author.session, tuple(sorted(r.entries)))
        for r in store.read().records
    )


def test_a_new_repositorys_index_starts_complete_and_holds_what_a_rebuild_writes(
    repo: Path, tmp_path: Path
) -> None:
    a = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("one", _writes({"a.txt": "a\n"}))
    _write(repo / "mine.txt", "mine\n")
    a.prompt("two", _writes({"d/e.txt": "e\n"}))
    store = AuthorshipStore(private_dir(a.engine.repo.git_dir))
    assert store.read().status == "ok", "created by the first record, with nothing before it"
    fresh = Agent(repo, tmp_path / "agent", a.session_file)
    fresh.engine.session_start("startup")
    live = restore(fresh.engine, first, "files", dry_run=True)
    assert fresh.engine.authorship.rebuilds == 0, "the first plan reads the file as written"
    written = _records(store)

    store.path.unlink()
    again = Agent(repo, tmp_path / "agent", a.session_file)
    again.engine.session_start("startup")
    rebuilt = restore(again.engine, first, "files", dry_run=True)
    assert again.engine.authorship.rebuilds == 1
    assert _records(store) == written, "a rebuild writes exactly what the appends wrote"
    assert (_own(rebuilt), _others(rebuilt)) == (_own(live), _others(live)) == (["mine.txt"], {})


def test_an_index_created_after_other_snapshots_were_kept_starts_partial(
    repo: Path, tmp_path: Path
) -> None:
    a = Agent.start(repo, tmp_path / "agent")
    first, _ = a.prompt("one", _writes({"a.txt": "a\n"}))
    store = AuthorshipStore(private_dir(a.engine.repo.git_dir))
    store.path.unlink()  # lost, or never written (the reference's sessions write none)
    a.prompt("two", _writes({"b.txt": "b\n"}))
    assert store.read().status == "partial", "the store keeps points the file does not hold"
    restore(a.engine, first, "files", dry_run=True)
    assert a.engine.authorship.rebuilds == 1 and store.read().status == "ok"
