"""A host may write an event before the one before it is answered (README, "The bridge
protocol"; our extension does since stop 50, issue 34): the bridge answers in the order written,
its calls are for the oldest unanswered event, and what a prompt records is what it records when
each event waits for its answer, even when an event's facts were taken before an earlier event
appended to the session (the bridge then asks for the session)."""

from __future__ import annotations

from pathlib import Path

import orjson

from ledger.bridge.server import MAX_AHEAD
from ledger.records import TURN
from tests.bridgekit import FakePi
from tests.gitkit import fresh_tree, git


def _tree(repo: Path, commit: str) -> str:
    return git(repo, "rev-parse", f"{commit}^{{tree}}").strip()


def test_events_written_ahead_are_answered_in_order_and_each_prompt_records_exactly(
    repo: Path, isolated_env: Path
) -> None:
    pi = FakePi(repo, isolated_env / ".pi" / "agent", facts=True)
    pi.has_ui = False
    started = pi.ahead(
        [
            ("session_start", {"reason": "startup"}),
            ("before_agent_start", {"prompt": "one"}),
            ("turn_start", {"turnIndex": 0}),
        ]
    )
    assert [r["type"] for r in started] == ["result"] * 3
    for n in range(3):
        before = fresh_tree(repo)
        if n:  # the next prompt's first events, written behind the last one's agent_end
            pi.ahead(
                [("before_agent_start", {"prompt": f"p{n}"}), ("turn_start", {"turnIndex": 0})]
            )
        user = pi.user(f"p{n}")
        (repo / f"ahead-{n}.txt").write_text(f"{n}\n")
        after = fresh_tree(repo)
        assistant = pi.assistant("done")
        # message_end is sent without waiting; turn_end and agent_end follow it at once, and
        # agent_end's record is appended through a call while nothing else is unanswered.
        ended = pi.ahead(
            [
                ("message_end", {"role": "assistant"}),
                ("turn_end", {"turnIndex": 0, "role": "assistant"}),
                ("agent_end", {}),
            ]
        )
        assert all(r["type"] == "result" for r in ended)
        turn = pi.custom(TURN)[-1]
        bound = {entry: turn["snapshots"][i] for entry, i in turn["bindings"]}
        assert _tree(repo, bound[user]) == before, f"prompt {n}: the files before it"
        assert _tree(repo, bound[assistant]) == after, f"prompt {n}: the files after its turn"
    assert len(pi.custom(TURN)) == 3
    assert pi.close() == 0


def _one_prompt_up_to_its_agent_end(repo: Path, isolated_env: Path) -> FakePi:
    pi = FakePi(repo, isolated_env / ".pi" / "agent", facts=True)
    pi.event("session_start", {"reason": "startup"})
    pi.event("before_agent_start", {"prompt": "one"})
    pi.event("turn_start", {"turnIndex": 0})
    pi.user("one")
    (repo / "a.txt").write_text("a\n")
    pi.assistant("done")
    pi.event("turn_end", {"turnIndex": 0, "role": "assistant"})
    return pi


def test_an_event_written_while_the_bridge_waits_for_its_calls_reply_is_answered_after_it(
    repo: Path, isolated_env: Path
) -> None:
    # agent_end appends the prompt's record through a call; the session_shutdown written behind
    # it (with facts taken before that append) is kept until agent_end is answered. Before stop
    # 50 the bridge refused it (`bad-message`: one event at a time).
    pi = _one_prompt_up_to_its_agent_end(repo, isolated_env)
    calls_before = len(pi.entries)
    results = pi.ahead([("agent_end", {}), ("session_shutdown", {"reason": "quit"})])
    assert [r["type"] for r in results] == ["result", "result"]
    assert len(pi.entries) == calls_before + 1 and len(pi.custom(TURN)) == 1
    assert pi.close() == 0


def test_at_most_max_ahead_events_wait_behind_a_call_and_the_next_is_refused(
    repo: Path, isolated_env: Path
) -> None:
    # A bound on what a host can make the bridge hold: past MAX_AHEAD, an event written while a
    # call waits gets a `bad-message` error at once; the ones kept are answered in order after.
    pi = _one_prompt_up_to_its_agent_end(repo, isolated_env)

    def event(event_id: int, name: str) -> bytes:
        ctx = {
            "hasUI": True,
            "cwd": str(repo),
            "sessionFile": str(pi.session_file),
            "leafId": pi.leaf,
        }
        message = {"type": "event", "id": event_id, "event": name, "payload": {}, "ctx": ctx}
        return orjson.dumps(message)

    pi.send_raw(event(1000, "agent_end"))
    call = pi.read()
    while call["method"] == "session":  # the bridge catches up with the session first
        pi.send_raw(orjson.dumps({"type": "reply", "id": call["id"], "result": pi._answer(call)}))
        call = pi.read()
    assert call["type"] == "call" and call["method"] == "appendEntry", call
    for k in range(MAX_AHEAD + 1):
        pi.send_raw(event(2000 + k, "ping"))
    refused = pi.read()
    assert refused["type"] == "error" and refused["id"] == 2000 + MAX_AHEAD, refused
    assert refused["error"]["code"] == "bad-message"
    pi.send_raw(orjson.dumps({"type": "reply", "id": call["id"], "result": pi._answer(call)}))
    answered = [pi.read() for _ in range(MAX_AHEAD + 1)]
    assert [m["id"] for m in answered] == [1000, *range(2000, 2000 + MAX_AHEAD)]
    assert all(m["type"] == "result" for m in answered)
    assert pi.close() == 0
