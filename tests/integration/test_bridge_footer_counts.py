"""The footer's count stays exact while the bridge skips recounting a turn's messages
(``BridgeServer._only_messages_since_count``): every move of the leaf elsewhere, and every
record, is counted again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.ledgerview import LedgerView
from ledger.session.model import Session
from ledger.session.parse import Entry, ParsedSession
from tests.bridgekit import FakePi


@pytest.fixture
def pi(repo: Path, isolated_env: Path) -> Iterator[FakePi]:
    fake = FakePi(repo, isolated_env / ".pi" / "agent", facts=True)
    fake.event("session_start", {"reason": "startup"})
    yield fake
    fake.close()


def _expected(pi: FakePi) -> str:
    """The footer counted from scratch: points on the branch to Pi's leaf, distinct snapshots."""
    entries = [Entry(e, i + 2) for i, e in enumerate(pi.entries)]
    session = Session(ParsedSession(pi.header, entries), None)
    bound = LedgerView.of(session).entry_to_commit
    on_branch = [bound[e.id] for e in session.branch(pi.leaf) if e.id in bound]
    return f"◆ {len(on_branch)} points / {len(set(on_branch))} snapshots"


def test_the_count_follows_messages_records_and_moves_of_the_leaf(pi: FakePi) -> None:
    repo = pi.cwd
    first = pi.prompt("one", lambda: (repo / "a.txt").write_text("1\n"))
    pi.prompt("two", lambda: (repo / "a.txt").write_text("2\n"))
    assert pi.event("ping").status == _expected(pi) == "◆ 4 points / 3 snapshots"
    # Messages only, down from the counted leaf: the count stands.
    pi.user("three")
    assert pi.event("turn_start", {"turnIndex": 0}).status == _expected(pi)
    pi.assistant("done")
    assert pi.event("ping").status == _expected(pi)
    # The leaf moved up the tree (a /tree without new entries): counted again.
    pi.leaf = first[1]
    assert pi.event("ping").status == _expected(pi) == "◆ 2 points / 2 snapshots"
    # A message under the moved leaf (a new branch): still exact.
    pi.user("four")
    assert pi.event("ping").status == _expected(pi) == "◆ 2 points / 2 snapshots"
    pi.event("turn_end", {"turnIndex": 0, "role": "assistant"})
    pi.event("agent_end", {})
    assert pi.event("ping").status == _expected(pi)
