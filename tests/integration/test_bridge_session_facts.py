"""Session facts sent with events (issue 34, per prompt): the real bridge asks the host nothing
it was already told, records exactly what it records when it asks, and still asks when the facts
do not continue its mirror (an extension and a bridge of different versions stay safe)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.records import TURN
from tests.bridgekit import FakePi
from tests.gitkit import git


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _session(repo: Path, agent_dir: Path, *, facts: bool) -> tuple[FakePi, list[str]]:
    """Three prompts in a new session; returns the session and the methods the bridge called."""
    pi = FakePi(repo, agent_dir, facts=facts)
    methods: list[str] = []

    def event(name: str, payload: dict[str, Any] | None = None) -> None:
        reply = pi.event(name, payload)
        assert reply.error is None, reply.error
        methods.extend(call["method"] for call in reply.calls)

    event("session_start", {"reason": "startup"})
    for n, text in enumerate(("one\n", "two\n", "three\n")):
        event("before_agent_start", {"prompt": f"prompt {n}"})
        event("turn_start", {"turnIndex": 0})
        pi.user(f"prompt {n}")
        _write(repo / "a.txt", text)
        pi.assistant("done")
        event("turn_end", {"turnIndex": 0, "role": "assistant"})
        event("agent_end", {})
    return pi, methods


def _bound_trees(pi: FakePi) -> list[list[tuple[str, str]]]:
    """Each record's bindings as (entry id, tree of its snapshot): what a restore would use."""
    return [
        [
            (entry, git(pi.cwd, "rev-parse", f"{turn['snapshots'][i]}^{{tree}}").strip())
            for entry, i in turn["bindings"]
        ]
        for turn in pi.custom(TURN)
    ]


def test_a_prompt_with_session_facts_asks_only_to_append_its_record(
    repo: Path, isolated_env: Path
) -> None:
    pi, methods = _session(repo, isolated_env / ".pi" / "agent", facts=True)
    try:
        # Nine calls a prompt before (a session sync per event, three at agent_end).
        assert methods == ["appendEntry"] * 3
        assert pi.event("ping").status == "◆ 6 points / 4 snapshots"
    finally:
        pi.close()


def test_records_are_the_same_with_and_without_facts(repo: Path, isolated_env: Path) -> None:
    told, told_methods = _session(repo, isolated_env / ".pi" / "told", facts=True)
    told.close()
    (repo / "a.txt").unlink()
    asked, asked_methods = _session(repo, isolated_env / ".pi" / "asked", facts=False)
    asked.close()
    assert "session" in asked_methods and "session" not in told_methods
    # The same entries (ids, parents, types, in the same order) and the same records.
    shape = [(e["id"], e["parentId"], e["type"], e.get("customType")) for e in told.entries]
    assert shape == [
        (e["id"], e["parentId"], e["type"], e.get("customType")) for e in asked.entries
    ]
    assert [sorted(t) for t in told.custom(TURN)] == [sorted(t) for t in asked.custom(TURN)]
    assert _bound_trees(told) == _bound_trees(asked)


def test_facts_that_do_not_continue_the_mirror_are_ignored_and_the_host_asked(
    repo: Path, isolated_env: Path
) -> None:
    pi = FakePi(repo, isolated_env / ".pi" / "agent", facts=True)
    try:
        assert pi.event("session_start", {"reason": "startup"}).calls == []
        pi.event("before_agent_start", {"prompt": "p"})
        held = pi.mirrored
        # A gap (the bridge holds fewer entries than `from`): asked from what it holds.
        gap = {**pi.session_facts(), "from": held + 1, "entries": []}
        reply = pi.event("turn_start", {"turnIndex": 0}, facts=gap)
        assert [(c["method"], c["params"]) for c in reply.calls] == [("session", {"from": held})]
        # Incomplete (total says more than was sent): asked too.
        pi.user("p")
        _write(repo / "a.txt", "one\n")
        pi.assistant("done")
        start = pi.mirrored
        cut = {**pi.session_facts(), "entries": []}
        assert cut["from"] == start and cut["total"] == start + 2
        reply = pi.event("turn_end", {"turnIndex": 0, "role": "assistant"}, facts=cut)
        assert [c["method"] for c in reply.calls] == ["session"]
        pi.event("agent_end", {})
        (turn,) = pi.custom(TURN)
        assert {entry for entry, _ in turn["bindings"]} == {
            pi.entries[0]["id"],
            pi.entries[1]["id"],
        }
    finally:
        pi.close()


def test_session_start_says_which_events_may_be_left_out(repo: Path, isolated_env: Path) -> None:
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    try:
        assert pi.event("session_start", {"reason": "startup"}).skip == ["message_end"]
        assert pi.event("ping").skip is None
        # A host that still sends it (an older extension) is answered as before.
        reply = pi.event("message_end", {"role": "user"})
        assert reply.error is None and reply.calls == []
    finally:
        pi.close()
