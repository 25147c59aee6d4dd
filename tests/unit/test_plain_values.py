"""ledger/plain.py's value classes behave as the dataclasses they replaced on a spawned bridge's
start path (issue 34: a dataclass costs ~1-1.5 ms to create): equality, hashing, immutability."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ledger.git.liveness import Owner
from ledger.session.parse import ParsedSession, SkippedLine
from ledger.work_tree_scope import Member


@dataclasses.dataclass(frozen=True)
class _OwnerAsDataclass:
    pid: int
    start: int | None
    boot: str | None
    host: str


def test_frozen_values_compare_and_hash_by_their_fields() -> None:
    values = [(1, 2, "b", "h"), (1, 2, "b", "h"), (1, None, "b", "h"), (2, 2, None, "h")]
    for a in values:
        for b in values:
            plain = Owner(*a) == Owner(*b)
            assert plain == (_OwnerAsDataclass(*a) == _OwnerAsDataclass(*b))
            if plain:
                assert hash(Owner(*a)) == hash(Owner(*b))
    assert Owner(1, 2, "b", "h") != _OwnerAsDataclass(1, 2, "b", "h")  # another class
    assert len({Member(Path("/a"), None), Member(Path("/a"), None, own=False)}) == 1
    assert SkippedLine(3, "torn last line") == SkippedLine(3, "torn last line", "")


def test_frozen_values_refuse_assignment_and_deletion() -> None:
    owner = Owner(1, 2, "b", "h")
    with pytest.raises(AttributeError):
        owner.pid = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del owner.host  # type: ignore[misc]
    with pytest.raises(AttributeError):
        owner.other = 1  # type: ignore[attr-defined]
    assert owner.pid == 1


def test_a_parsed_session_is_mutable_and_unhashable_as_before() -> None:
    parsed = ParsedSession({"type": "session"}, [])
    assert parsed.skipped == [] and parsed.size == 0 and parsed.ends_with_newline
    assert parsed.skipped is not ParsedSession({}, []).skipped  # a new list each
    parsed.size = 5
    assert parsed == ParsedSession({"type": "session"}, [], size=5)
    with pytest.raises(TypeError):
        hash(parsed)


def test_repr_names_the_class_and_fields() -> None:
    assert repr(SkippedLine(1, "x")) == "SkippedLine(excerpt='', line=1, reason='x')"
