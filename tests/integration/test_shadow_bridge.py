"""``rewind serve --stdio`` in a directory that is not a git repository (docs/shadow.md): the
bridge records into a shadow repository, restores through the menus, writes nothing in the
directory but the user's files, and is off with a notice in the home directory."""

from __future__ import annotations

import os
from pathlib import Path

from ledger.engine import messages as M
from ledger.records import OP, TURN
from tests.bridgekit import FakePi


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _paths(directory: Path) -> set[str]:
    return {
        str(Path(root, name).relative_to(directory))
        for root, dirs, files in os.walk(directory)
        for name in dirs + files
    }


def test_a_plain_directory_records_and_restores_through_a_shadow(
    tmp_path: Path, isolated_env: Path
) -> None:
    plain = tmp_path / "scratch"
    plain.mkdir()
    agent_dir = isolated_env / ".pi" / "agent"
    fake = FakePi(plain, agent_dir)
    try:
        reply = fake.event("session_start", {"reason": "startup"})
        assert (
            reply.error is None and reply.status == "◆ 0 points / 0 snapshots · shadow repository"
        )
        assert any("shadow repository" in n["text"] for n in reply.notices)
        prompts = [
            fake.prompt("create", lambda: _write(plain / "a.txt", "one\n")),
            fake.prompt("edit", lambda: _write(plain / "a.txt", "two\n")),
        ]
        assert len(fake.custom(TURN)) == 2
        reply = fake.navigate(prompts[0][1], M.TREE_RESTORE)
        assert {"level": "info", "text": M.FILES_RESTORED_TO_POINT} in reply.notices
        assert (plain / "a.txt").read_text() == "one\n"
        assert fake.custom(OP)
        assert _paths(plain) == {"a.txt"}
        assert (agent_dir / "rewind" / "shadow").is_dir()
    finally:
        assert fake.close() == 0


def test_the_home_directory_is_off_with_a_notice(isolated_env: Path) -> None:
    fake = FakePi(isolated_env, isolated_env / ".pi" / "agent")
    try:
        reply = fake.event("session_start", {"reason": "startup"})
        assert reply.error is None and reply.status is None
        assert any(n["level"] == "warning" and "home directory" in n["text"] for n in reply.notices)
        fake.prompt("hi")
        assert fake.custom(TURN) == []
        assert not (isolated_env / ".pi" / "agent" / "rewind").exists()
    finally:
        assert fake.close() == 0
