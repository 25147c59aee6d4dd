"""A scripted agent for engine tests: writes messages like Pi and fires the engine's events."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.clock import SystemClock, iso_from_ms
from ledger.engine.engine import Engine
from ledger.engine.host import FileHost
from ledger.git.repo import GitRepo
from ledger.session.store import SessionAppender, create_session_file, read_session


def fresh_index_tree(repo: Path) -> str:
    """What the reference captures: a fresh index, ``git -c core.autocrlf=false add -A``, write-tree."""
    index = repo / ".git" / "fresh-index-for-test"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        subprocess.run(
            ["git", "-c", "core.autocrlf=false", "add", "-A"],
            cwd=repo,
            check=True,
            capture_output=True,
            env={**_env(), **env},
        )
        return subprocess.run(
            ["git", "write-tree"],
            cwd=repo,
            check=True,
            capture_output=True,
            text=True,
            env={**_env(), **env},
        ).stdout.strip()
    finally:
        index.unlink(missing_ok=True)


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def tree_of_commit(repo: Path, commit: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", f"{commit}^{{tree}}"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@dataclass
class Agent:
    repo: Path
    agent_dir: Path
    session_file: Path
    engine: Engine = field(init=False)
    writer: SessionAppender = field(init=False)

    def __post_init__(self) -> None:
        self.host = FileHost(self.session_file, self.agent_dir / "sessions")
        self.engine = Engine(self.host, GitRepo.discover(self.repo))
        self.writer = SessionAppender(self.session_file)

    @classmethod
    def start(cls, repo: Path, agent_dir: Path, *, parent: Path | None = None) -> Agent:
        now = SystemClock().now_ms()
        path = create_session_file(
            agent_dir / "sessions",
            str(repo),
            [
                {
                    "type": "model_change",
                    "id": "m0000001",
                    "parentId": None,
                    "timestamp": iso_from_ms(now),
                    "provider": "scripted",
                    "modelId": "scripted-1",
                }
            ],
            parent_session=str(parent) if parent else None,
        )
        agent = cls(repo, agent_dir, path)
        agent.engine.session_start("startup")
        return agent

    def resume(self) -> Agent:
        """A new process on the same file (``pi -c``): fresh engine state."""
        again = Agent(self.repo, self.agent_dir, self.session_file)
        again.engine.session_start("startup")
        return again

    def user(self, text: str) -> str:
        return self.writer.append_entry(
            {
                "type": "message",
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": text}],
                    "timestamp": SystemClock().now_ms(),
                },
            }
        )["id"]

    def assistant(self, text: str) -> dict[str, Any]:
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "api": "scripted",
            "provider": "scripted",
            "model": "scripted-1",
            "stopReason": "stop",
            "timestamp": SystemClock().now_ms(),
        }
        entry = self.writer.append_entry({"type": "message", "message": message})
        return {"id": entry["id"], "message": message}

    def prompt(self, text: str, *turns: Any) -> tuple[str, list[str]]:
        """One prompt; each turn is a callable that changes files (or None). Returns (user id, assistant ids)."""
        e = self.engine
        e.before_agent_start(text)
        e.turn_start(0)
        user_id = self.user(text)
        assistant_ids = []
        for index, change in enumerate(turns or (None,)):
            if index:
                e.turn_start(index)
            if change is not None:
                change(self.repo)
            reply = self.assistant(f"turn {index} of {text}")
            e.turn_end(index, message=reply["message"])
            assistant_ids.append(reply["id"])
        e.agent_end()
        return user_id, assistant_ids

    def session(self):
        return read_session(self.session_file)

    def records(self, custom_type: str) -> list[dict[str, Any]]:
        return [e.raw["data"] for e in self.session().entries if e.custom_type == custom_type]
