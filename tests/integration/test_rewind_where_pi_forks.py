"""``/rewind`` and ``session_before_fork`` on a real ``rewind serve --stdio``, for what Pi 0.73.1
can and cannot do (issue 32):

- Pi forks only from a prompt (a user message; any entry only for ``position: "at"``, i.e.
  ``/clone``), and checks that only *after* ``session_before_fork``: a fork at any other entry
  must change nothing (no menu, no restore, no ``rewind-fork-pending``), and ``/rewind`` offers
  and accepts a fork only at a prompt, with a label that says so.
- A prompt without a point to restore says why: no snapshot was ever taken while it ran (no
  binding), or retention pruned it (bound, commit gone).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.engine import messages as M
from ledger.engine.preview_model import FORK_LABEL, NEVER_TAKEN, PRUNED
from ledger.records import FORK_PENDING, OP
from tests.bridgekit import FakePi
from tests.gitkit import git


@pytest.fixture
def pi(repo: Path, isolated_env: Path) -> Iterator[FakePi]:
    fake = FakePi(repo, isolated_env / ".pi" / "agent")
    assert fake.event("session_start", {"reason": "startup"}).error is None
    yield fake
    fake.close()


def two_prompts(pi: FakePi) -> tuple[str, str, str, str]:
    first, first_reply = pi.prompt("write a", lambda: (pi.cwd / "a.txt").write_text("1\n"))
    second, second_reply = pi.prompt("write b", lambda: (pi.cwd / "b.txt").write_text("2\n"))
    return first, first_reply, second, second_reply


def files(repo: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(repo.iterdir()) if p.is_file()}


def test_a_fork_at_an_assistant_entry_changes_nothing_even_with_restore_all_chosen(
    pi: FakePi,
) -> None:
    _, first_reply, _, _ = two_prompts(pi)
    before, entries = files(pi.cwd), len(pi.entries)
    pi.choices = [M.FORK_RESTORE_ALL]
    reply = pi.event("session_before_fork", {"entryId": first_reply, "position": "before"})
    assert reply.error is None and reply.result == {}, "not cancelled: Pi refuses it itself"
    assert pi.menus == [], "no menu for a fork Pi will refuse"
    assert files(pi.cwd) == before, "no file restored"
    assert len(pi.entries) == entries and pi.custom(FORK_PENDING) == [], "no stray hand-off"


def test_a_fork_at_an_entry_pi_does_not_know_changes_nothing(pi: FakePi) -> None:
    two_prompts(pi)
    before, entries = files(pi.cwd), len(pi.entries)
    reply = pi.event("session_before_fork", {"entryId": "ffffffff", "position": "at"})
    assert reply.error is None and pi.menus == [] and files(pi.cwd) == before
    assert len(pi.entries) == entries


def test_a_rewind_fork_intent_at_an_assistant_entry_is_refused_before_pi_is_asked(
    pi: FakePi,
) -> None:
    first, first_reply, _, _ = two_prompts(pi)
    before, entries = files(pi.cwd), len(pi.entries)
    reply = pi.event("rewind_intent", {"action": "fork", "entryId": first_reply})
    assert reply.error is not None
    message = reply.error["message"]
    assert message.startswith("no fork made, nothing changed: Pi forks only from a prompt")
    assert f"{first_reply} is an assistant" in message
    assert files(pi.cwd) == before and len(pi.entries) == entries
    # No intent was kept: the /fork of the prompt that follows shows its menu as usual.
    pi.choices = [None]
    pi.event("session_before_fork", {"entryId": first, "position": "before"})
    assert len(pi.menus) == 1 and pi.menus[0][0].startswith(M.MENU_TITLE)


def test_a_fork_intent_at_a_prompt_still_restores_and_hands_the_files_over(pi: FakePi) -> None:
    _, _, second, _ = two_prompts(pi)
    assert pi.event("rewind_intent", {"action": "fork", "entryId": second}).result == {
        "intent": "fork"
    }
    reply = pi.event("session_before_fork", {"entryId": second, "position": "before"})
    assert reply.error is None and not reply.result.get("cancel")
    assert pi.menus == [] and "b.txt" not in files(pi.cwd)
    assert len(pi.custom(FORK_PENDING)) == 1


def test_the_preview_offers_a_fork_only_at_a_prompt_and_says_it_forks_from_the_prompt(
    pi: FakePi,
) -> None:
    _, first_reply, second, _ = two_prompts(pi)
    at_prompt = pi.event("rewind_preview", {"entryId": second}).result["preview"]
    (fork,) = [a for a in at_prompt["actions"] if a["id"] == "fork"]
    assert fork == {"id": "fork", "label": FORK_LABEL, "available": True, "why": None}
    assert FORK_LABEL.startswith("Fork from this prompt")
    at_reply = pi.event("rewind_preview", {"entryId": first_reply}).result["preview"]
    (fork,) = [a for a in at_reply["actions"] if a["id"] == "fork"]
    assert fork["available"] is False and fork["why"].startswith("Pi forks only from a prompt")
    restore = next(a for a in at_reply["actions"] if a["id"] == "both")
    assert restore["available"] is True, "the other restores stay offered at a reply"


def test_a_prompt_whose_snapshot_was_never_taken_says_so_and_what_to_do(pi: FakePi) -> None:
    first, _, _, _ = two_prompts(pi)
    # A prompt that ran while the bridge was not running (killed): Pi wrote it, no event came.
    lost = pi.user("written while rewind was not running")
    pi.assistant("ok")
    listing = pi.event("rewind_list").result["list"]
    row = next(p for p in listing["points"] if p["entryId"] == lost)
    assert row["snapshot"] is None and row["missing"] == "never" and row["pruned"] is False
    assert row["missingText"] == NEVER_TAKEN.row and "no snapshot was taken" in row["missingText"]
    assert "pruned" not in row["missingText"]
    kept = next(p for p in listing["points"] if p["entryId"] == first)
    assert kept["missing"] is None and kept["missingText"] is None
    preview = pi.event("rewind_preview", {"entryId": lost}).result["preview"]
    assert preview["missing"] == NEVER_TAKEN.line
    assert "choose the prompt before or after it" in preview["missing"]
    (both,) = [a for a in preview["actions"] if a["id"] == "both"]
    assert both["available"] is False and both["why"] == NEVER_TAKEN.why


def test_a_prompt_whose_snapshot_retention_pruned_says_so_and_what_to_do(pi: FakePi) -> None:
    first, _, _, _ = two_prompts(pi)
    pi.write_file()
    pi.close()
    # What retention ends in: the store no longer names the snapshots and gc drops them. Then
    # the session is resumed (a new bridge: a running one may still hold the objects in its
    # object cache).
    git(pi.cwd, "update-ref", "-d", "refs/pi-rewind/store")
    git(pi.cwd, "reflog", "expire", "--expire=now", "--all")
    git(pi.cwd, "gc", "--prune=now", "--quiet")
    resumed = FakePi(pi.cwd, pi.agent_dir, entries=pi.entries, session_file=pi.session_file)
    resumed.header = pi.header
    try:
        assert resumed.event("session_start", {"reason": "resume"}).error is None
        listing = resumed.event("rewind_list").result["list"]
        row = next(p for p in listing["points"] if p["entryId"] == first)
        assert row["snapshot"] is None and row["missing"] == "pruned" and row["pruned"] is True
        assert row["missingText"] == PRUNED.row
        preview = resumed.event("rewind_preview", {"entryId": first}).result["preview"]
        assert preview["missing"] == PRUNED.line and "rewind.retention" in preview["missing"]
        assert resumed.custom(OP) == []
    finally:
        resumed.close()
