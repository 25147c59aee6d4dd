"""A scripted agent session for ``rewind demo``: a throwaway repository, a Pi-format session, and
prompts whose turns create, edit, rename and delete files, driven through the engine exactly as
an agent's events would drive it.

Why it exists: the main job on an embedded default. It shows, without any model or network,
what the engine records and what the commands do, and it doubles as an end-to-end check.

Invariants: everything lives under the given directory (repository, agent dir, session file);
nothing outside it is read or written, and git runs with an isolated configuration.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ledger.clock import SystemClock, iso_from_ms
from ledger.engine.engine import Engine
from ledger.engine.host import FileHost
from ledger.git.repo import GitRepo
from ledger.session.store import SessionAppender, create_session_file


@dataclass
class Prompt:
    text: str
    reply: str
    act: Callable[[Path], None]


@dataclass
class DemoWorld:
    root: Path
    repo: Path
    agent_dir: Path
    session: Path
    users: list[str] = field(default_factory=list)
    assistants: list[str] = field(default_factory=list)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _prompts() -> list[Prompt]:
    def first(repo: Path) -> None:
        _write(repo / "hello.py", "print('hello')\n")
        _write(repo / "notes.md", "# Notes\n- say hello\n")

    def second(repo: Path) -> None:
        _write(repo / "hello.py", "from greet import greet\n\ngreet('world')\n")
        _write(repo / "greet.py", "def greet(name):\n    print(f'hello {name}')\n")

    def third(repo: Path) -> None:
        (repo / "greet.py").rename(repo / "greeting.py")
        _write(repo / "hello.py", "from greeting import greet\n\ngreet('rewind')\n")
        (repo / "notes.md").unlink()
        _write(repo / "scratch.txt", "an untracked file the agent left around\n")
        _write(repo / "build" / "out.bin", "ignored build output\n")

    return [
        Prompt(
            "Create hello.py that prints hello, and a notes file",
            "Created hello.py and notes.md.",
            first,
        ),
        Prompt(
            "Move the greeting into greet.py", "hello.py now calls greet() from greet.py.", second
        ),
        Prompt(
            "Rename greet.py to greeting.py and drop the notes",
            "Renamed, and removed notes.md.",
            third,
        ),
    ]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=_git_env(repo))


def _git_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return env


def build_world(root: Path) -> DemoWorld:
    """A repository with one commit, a .gitignore, and an empty Pi session for it."""
    repo = (root / "project").resolve()
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.name", "Rewind Demo")
    _git(repo, "config", "user.email", "demo@rewind.invalid")
    _write(repo / "README.md", "# demo project\n")
    _write(repo / ".gitignore", "build/\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "initial")
    agent_dir = root / "agent"
    now = SystemClock().now_ms()
    session = create_session_file(
        agent_dir / "sessions",
        str(repo),
        [
            {
                "type": "model_change",
                "id": "d0000001",
                "parentId": None,
                "timestamp": iso_from_ms(now),
                "provider": "scripted",
                "modelId": "scripted-1",
            },
            {
                "type": "thinking_level_change",
                "id": "d0000002",
                "parentId": "d0000001",
                "timestamp": iso_from_ms(now),
                "thinkingLevel": "off",
            },
        ],
    )
    return DemoWorld(root, repo, agent_dir, session)


def run_prompts(world: DemoWorld) -> DemoWorld:
    """Drive the engine through the scripted prompts, writing messages the way Pi does."""
    host = FileHost(world.session, world.agent_dir / "sessions")
    engine = Engine(host, GitRepo.discover(world.repo))
    writer = SessionAppender(world.session)
    clock = SystemClock()
    engine.session_start("startup")
    for prompt in _prompts():
        engine.before_agent_start(prompt.text)
        engine.turn_start(0)
        user = writer.append_entry(
            {
                "type": "message",
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": prompt.text}],
                    "timestamp": clock.now_ms(),
                },
            }
        )
        prompt.act(world.repo)
        assistant = writer.append_entry(
            {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": prompt.reply}],
                    "api": "scripted",
                    "provider": "scripted",
                    "model": "scripted-1",
                    "stopReason": "stop",
                    "timestamp": clock.now_ms(),
                },
            }
        )
        engine.turn_end(0, assistant_entry_id=assistant["id"])
        engine.agent_end()
        world.users.append(user["id"])
        world.assistants.append(assistant["id"])
    return world


def remove_world(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
