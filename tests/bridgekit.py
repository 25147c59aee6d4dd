"""A stand-in for Pi's side of the bridge: a real ``rewind serve --stdio`` process, driven the way
tools/pi-extension/rewind-ledger.ts drives it, with the session held in memory as Pi holds it.

Pi's own behaviour is checked by the end-to-end tests with the real Pi CLI (tests/e2e); this kit
makes the bridge's protocol and the engine behind it testable without node.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from ledger.records import TURN
from ledger.session.store import create_session_file
from tests.gitkit import fresh_tree, git


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Reply:
    result: dict[str, Any]
    notices: list[dict[str, str]]
    status: str | None
    calls: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    panel: list[str] | None = None
    """The ``panel`` lines of the result (None when absent: leave the panel as it is)."""
    has_status: bool = True
    """False when the result has no ``status`` (leave the footer as it is)."""
    skip: list[str] | None = None
    """The result's ``skip`` (``session_start``: events the bridge does nothing with)."""


class HostedRefused(Exception):
    """The watcher declined the hello (the reason is the message)."""


class HostedConnection:
    """A session on the watcher's bridge socket, shaped like the bridge process it replaces
    (``stdin``, ``stdout``, ``stderr``, ``wait``) for :class:`FakePi`."""

    def __init__(self, path: Path, cwd: Path, env: dict[str, str]) -> None:
        from ledger.bridge.hosted import HELLO_VERSION, bridge_env
        from ledger.bridge.snapshot_socket import find_repository

        found = find_repository(cwd)
        assert found is not None
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        hello = {
            "v": HELLO_VERSION,
            "op": "bridge",
            "root": str(found[0]),
            "gitDir": str(found[1]),
            "env": bridge_env(env),
        }
        self.stdin = self.sock.makefile("wb")
        self.stdout = self.sock.makefile("rb")
        self.stderr: IO[bytes] | None = None
        self.stdin.write(orjson.dumps(hello) + b"\n")
        self.stdin.flush()
        answer = orjson.loads(self.stdout.readline() or b"null")
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            self.sock.close()
            raise HostedRefused(str(answer.get("why") if isinstance(answer, dict) else answer))

    def wait(self, timeout: float | None = None) -> int:
        """Until the watcher closes its end (the session is over)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)  # end of input, as a closed stdin
        self.sock.settimeout(timeout)
        while self.stdout.read(65536):
            pass
        self.sock.close()
        return 0


class FakePi:
    """Pi's in-memory session plus the extension's half of the protocol."""

    def __init__(
        self,
        cwd: Path,
        agent_dir: Path,
        *,
        parent_session: str | None = None,
        entries: list[dict[str, Any]] | None = None,
        session_file: Path | None = None,
        hosted: Path | None = None,
        facts: bool = False,
        bridge_argv: list[str] | None = None,
    ) -> None:
        """``hosted``: the watcher's bridge socket; the session is served there (as the
        extension does when the watcher accepts it) instead of by a bridge process.
        ``facts``: send the session's new entries with each event and after each append, as
        the extension does since issue 34 (per prompt); off, as an older extension.
        ``bridge_argv``: the bridge's command instead of ``python -m ledger serve --stdio``, e.g.
        ``[sys.executable, "-c", LAUNCHER, …]``, a script that patches the real bridge to record
        what it does, then runs it."""
        self.cwd = cwd
        self.facts = facts
        self.mirrored = 0
        """Entries the bridge was given (the extension's ``Link.mirrored``)."""
        self.agent_dir = agent_dir
        self.header: dict[str, Any] = {
            "type": "session",
            "version": 3,
            "id": str(uuid.uuid4()),
            "timestamp": _now_iso(),
            "cwd": str(cwd),
        }
        if parent_session:
            self.header["parentSession"] = parent_session
        self.entries: list[dict[str, Any]] = list(entries or [])
        self.leaf: str | None = self.entries[-1]["id"] if self.entries else None
        self.session_file = session_file or (agent_dir / "sessions" / f"{self.header['id']}.jsonl")
        self.choices: list[str | None] = []
        self.menus: list[tuple[str, list[str]]] = []
        self.has_ui = True
        self._ids = 0
        env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent_dir)}
        self.proc: subprocess.Popen[bytes] | HostedConnection
        if hosted is not None:
            self.proc = HostedConnection(hosted, cwd, env)
            return
        # BRIDGEKIT_BRIDGE_CMD (a JSON argv, like the extension's REWIND_BRIDGE_CMD) lets a benchmark
        # spawn another install's bridge, e.g. a regular `pip install`'s `rewind serve --stdio`.
        command = os.environ.get("BRIDGEKIT_BRIDGE_CMD")
        self.proc = subprocess.Popen(
            bridge_argv
            or (json.loads(command) if command else None)
            or [sys.executable, "-m", "ledger", "serve", "--stdio"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    # --- Pi's session -------------------------------------------------------------------------

    def _append(self, entry: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        entry = {
            "type": entry.pop("type"),
            "id": f"{self._ids:08x}",
            "parentId": self.leaf,
            "timestamp": _now_iso(),
            **entry,
        }
        self.entries.append(entry)
        self.leaf = entry["id"]
        return entry

    def user(self, text: str) -> str:
        return self._append(
            {"type": "message", "message": {"role": "user", "content": text, "timestamp": 1}}
        )["id"]

    def assistant(self, text: str) -> str:
        return self._append(
            {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": text}],
                    "timestamp": 2,
                },
            }
        )["id"]

    @property
    def pi_pid(self) -> int:
        """The pid rewind shows for this session: Pi's, which here is this test process (the
        bridge's parent, or the peer of a hosted session's connection)."""
        return os.getpid()

    def label(self) -> str:
        """How rewind names this session (:mod:`ledger.session_names`): its latest name, else
        its first prompt's words, with the id's random tail."""
        from ledger.session_names import label_from

        names = [e.get("name") for e in self.entries if e["type"] == "session_info"]
        prompts = [
            e["message"]["content"]
            for e in self.entries
            if e["type"] == "message" and e["message"]["role"] == "user"
        ]
        name = names[-1] if names and isinstance(names[-1], str) else None
        return label_from(str(self.header["id"]), name, prompts[0] if prompts else None)

    def write_file(self) -> Path:
        """Flush the session to disk the way Pi does once it has an assistant message."""
        self.session_file.parent.mkdir(parents=True, exist_ok=True)
        lines = [orjson.dumps(self.header)] + [orjson.dumps(e) for e in self.entries]
        self.session_file.write_bytes(b"\n".join(lines) + b"\n")
        return self.session_file

    def custom(self, custom_type: str) -> list[dict[str, Any]]:
        return [
            e["data"]
            for e in self.entries
            if e["type"] == "custom" and e.get("customType") == custom_type
        ]

    def foreign(self, custom_type: str, data: dict[str, Any]) -> str:
        """Another extension's ``pi.appendEntry`` (pi-rewind-hook loaded next to ours)."""
        return self._append({"type": "custom", "customType": custom_type, "data": data})["id"]

    # --- the protocol -------------------------------------------------------------------------

    def send_raw(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line if line.endswith(b"\n") else line + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise EOFError(self.proc.stderr.read().decode() if self.proc.stderr else "")
        return orjson.loads(line)

    def session_facts(self) -> dict[str, Any]:
        """What the extension sends with an event: the entries the bridge was not given yet."""
        start = self.mirrored if self.mirrored <= len(self.entries) else 0
        self.mirrored = len(self.entries)
        facts = {
            "from": start,
            "entries": self.entries[start:],
            "total": len(self.entries),
            "leafId": self.leaf,
            "sessionFile": str(self.session_file),
        }
        return {**facts, "header": self.header} if start == 0 else facts

    def event(
        self,
        name: str,
        payload: dict[str, Any] | None = None,
        *,
        event_id: int | None = None,
        facts: dict[str, Any] | None = None,
    ) -> Reply:
        """``facts``: the ``session`` to send instead of the usual ones (with ``self.facts``)."""
        self._ids += 1
        eid = event_id if event_id is not None else self._ids
        message = self._event_message(eid, name, payload or {}, facts)
        self.send_raw(orjson.dumps(message))
        calls: list[dict[str, Any]] = []
        for message in self._messages():
            if message["type"] == "call":
                calls.append(message)
                self.send_raw(
                    orjson.dumps(
                        {"type": "reply", "id": message["id"], "result": self._answer(message)}
                    )
                )
            elif message["type"] == "result":
                assert message["id"] == eid
                return Reply(
                    message["result"],
                    message["notices"],
                    message.get("status"),
                    calls,
                    panel=message.get("panel"),
                    has_status="status" in message,
                    skip=message.get("skip"),
                )
            else:
                return Reply({}, [], None, calls, error=message["error"])
        raise AssertionError("unreachable")

    def _event_message(
        self, eid: int, name: str, payload: dict[str, Any], facts: dict[str, Any] | None
    ) -> dict[str, Any]:
        """An event as the extension writes it (``facts``: the ``session`` to send instead of
        the usual ones)."""
        message: dict[str, Any] = {
            "type": "event",
            "id": eid,
            "event": name,
            "payload": payload,
            "ctx": {
                "hasUI": self.has_ui,
                "cwd": str(self.cwd),
                "sessionFile": str(self.session_file),
                "leafId": self.leaf,
            },
        }
        if facts is not None:
            message["session"] = facts
        elif self.facts:
            message["session"] = self.session_facts()
        return message

    def ahead(self, events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """Write every event before reading any answer, as the extension does since stop 50
        (each with its facts as they are when it is written), then answer the bridge's calls
        until every event has its result, which must come in the order written."""
        ids: list[int] = []
        for name, payload in events:
            self._ids += 1
            ids.append(self._ids)
            self.send_raw(orjson.dumps(self._event_message(self._ids, name, payload, None)))
        results: list[dict[str, Any]] = []
        for message in self._messages():
            if message["type"] == "call":
                answer = {"type": "reply", "id": message["id"], "result": self._answer(message)}
                self.send_raw(orjson.dumps(answer))
                continue
            assert message["type"] == "result", message
            assert message["id"] == ids[len(results)], (message["id"], ids)
            results.append(message)
            if len(results) == len(ids):
                return results
        raise AssertionError("unreachable")

    def _messages(self) -> Iterator[dict[str, Any]]:
        while True:
            yield self.read()

    def _answer(self, call: dict[str, Any]) -> Any:
        params = call["params"]
        if call["method"] == "session":
            self.mirrored = len(self.entries)
            return {
                "header": self.header,
                "entries": self.entries[params["from"] :],
                "total": len(self.entries),
                "leafId": self.leaf,
                "sessionFile": str(self.session_file),
            }
        if call["method"] == "appendEntry":
            entry = self._append(
                {"type": "custom", "customType": params["customType"], "data": params["data"]}
            )
            if self.facts:
                return {"entryId": entry["id"], "session": self.session_facts()}
            return {"entryId": entry["id"]}
        if call["method"] == "select":
            self.menus.append((params["title"], params["options"]))
            return {"choice": self.choices.pop(0) if self.choices else None}
        raise AssertionError(call)

    # --- a prompt, as Pi fires it ---------------------------------------------------------------

    def prompt(self, text: str, act: Any = None, reply: str = "done") -> tuple[str, str]:
        self.event("before_agent_start", {"prompt": text})
        self.event("turn_start", {"turnIndex": 0})
        user = self.user(text)
        if act is not None:
            act()
        assistant = self.assistant(reply)
        self.event("turn_end", {"turnIndex": 0, "role": "assistant"})
        self.event("agent_end", {})
        return user, assistant

    def navigate(self, target: str, choice: str) -> Reply:
        """Pi's ``/tree`` to ``target`` with ``choice`` picked in our menu: the
        ``session_before_tree`` reply, after Pi moved its leaf and sent ``session_tree``."""
        old_leaf = self.leaf
        self.choices = [choice]
        reply = self.event("session_before_tree", {"targetId": target})
        self.leaf = target
        self.event("session_tree", {"newLeafId": target, "oldLeafId": old_leaf})
        return reply

    def close(self) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()
        return code


def prompts_stay_exact(pi: FakePi, count: int, tag: str) -> None:
    """``count`` prompts that each change files; every turn's snapshot is the work tree then."""
    repo = pi.cwd
    expected: list[str] = []

    def act(n: int) -> Callable[[], None]:
        def run() -> None:
            (repo / f"{tag}-{n}.txt").write_text(f"{n}\n")
            if n:
                (repo / f"{tag}-{n - 1}.txt").unlink()
            expected.append(fresh_tree(repo))

        return run

    before = len(pi.custom(TURN))
    for n in range(count):
        _, assistant = pi.prompt(f"{tag} {n}", act(n))
        turn = pi.custom(TURN)[-1]
        bound = {entry: turn["snapshots"][i] for entry, i in turn["bindings"]}
        tree = git(repo, "rev-parse", f"{bound[assistant]}^{{tree}}").strip()
        assert tree == expected[-1], f"{tag} prompt {n}"
    assert len(pi.custom(TURN)) == before + count


def fork_child(parent: FakePi, entries: list[dict[str, Any]]) -> FakePi:
    """Pi's /fork: a new session file with the copied path and ``parentSession``, then a fresh
    extension instance (a new bridge) that sees ``session_start{reason:"fork"}``."""
    parent_file = parent.write_file()
    child_file = create_session_file(
        parent.agent_dir / "sessions", str(parent.cwd), entries, parent_session=str(parent_file)
    )
    child = FakePi(
        parent.cwd,
        parent.agent_dir,
        parent_session=str(parent_file),
        entries=entries,
        session_file=child_file,
    )
    child._ids = parent._ids + 1000
    return child


def restore_that_waits_for_a_turn(
    argv: list[str], cwd: Path, *, unchanged: Callable[[], bool], end_turn: Callable[[], None]
) -> tuple[int, str]:
    """Run a CLI restore (``argv`` after ``python -m ledger``) that must wait for another
    session's turn: once it says it waits, it must still wait a second later with nothing
    written (``unchanged``); then ``end_turn``. The turn ends on the command's word, not after
    a fixed time: a command that starts slowly under load would find the turn over already
    and never wait. Returns its exit status and standard error."""
    waiting = subprocess.Popen(
        [sys.executable, "-m", "ledger", *argv],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "REWIND_TURN_WAIT": "60"},
    )
    said = b""
    try:
        assert waiting.stderr is not None
        while b"waiting for it to end" not in said:
            line = waiting.stderr.readline()
            assert line, said.decode()
            said += line
        time.sleep(1.0)
        assert waiting.poll() is None, "it waited for the other turn"
        assert unchanged(), "nothing written while it waits"
        end_turn()
        _, rest = waiting.communicate(timeout=120)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    return waiting.returncode, (said + rest).decode()
