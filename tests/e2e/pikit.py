"""The real Pi CLI (``@mariozechner/pi-coding-agent@0.73.1``), offline, with our extension loaded.

- :func:`ensure_pi` installs Pi with npm into a cache directory outside the repository, once
  (``$REWIND_PI_CACHE``, else ``~/.cache/rewind-ledger/pi-0.73.1`` of the real home), under a
  lock so that parallel runs do not clash.
- :class:`PiRunner` runs ``pi -p`` (print mode: no UI, menus are not shown) and
  :class:`RpcPi` drives ``pi --mode rpc`` (a UI over JSON: ``ctx.ui.select`` arrives as an
  ``extension_ui_request`` that the test answers).

The model is the scripted provider in ``tests/e2e/pi/scripted-provider.mjs``: a prompt says which
tool calls each turn makes (``[[turns: …]]``), so the real built-in tools change the files.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue
from typing import Any

from ledger.session.store import read_session

PI_VERSION = "0.73.1"
HERE = Path(__file__).resolve().parent
SCRIPTED = HERE / "pi" / "scripted-provider.mjs"
EXTENSION = HERE.parent.parent / "tools" / "pi-extension" / "rewind-ledger.ts"
# Read at import, before the test-wide fixture points $HOME at a temporary directory.
CACHE = Path(
    os.environ.get("REWIND_PI_CACHE")
    or Path.home() / ".cache" / "rewind-ledger" / f"pi-{PI_VERSION}"
)


class PiUnavailable(Exception):
    """node or npm is missing, or the install failed: the reason says which."""


def ensure_pi() -> Path:
    """The path of Pi's ``cli.js``, installing the package first if needed."""
    modules = _npm_install_once(CACHE, {"@mariozechner/pi-coding-agent": PI_VERSION})
    return modules / "@mariozechner" / "pi-coding-agent" / "dist" / "cli.js"


TYPESCRIPT_PACKAGES = {"typescript": "5.9.3", "@types/node": "20.19.43"}
"""Pinned, both: Pi's own install brings some ``@types/node`` through dependencies that do not
pin it, which would change the check under us."""
TYPESCRIPT_CACHE = CACHE.parent / f"typescript-{TYPESCRIPT_PACKAGES['typescript']}"


def ensure_typescript() -> Path:
    """The ``node_modules`` holding TypeScript's compiler and Node's types (pinned), installed
    first if needed, beside Pi's cache (tests/e2e/test_pi_extension_types.py)."""
    return _npm_install_once(TYPESCRIPT_CACHE, TYPESCRIPT_PACKAGES)


MARKER = ".installed"


def _npm_install_once(cache: Path, packages: dict[str, str]) -> Path:
    """``npm install name@version …`` into ``cache`` unless its marker says they are there:
    under a lock, so that parallel runs do not clash; the marker is written last, so an
    interrupted install has none. The cache's ``node_modules``."""
    specs = [f"{name}@{version}" for name, version in packages.items()]
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise PiUnavailable(
            f"{'node' if node is None else 'npm'} is not installed: the end-to-end tests need "
            f"Node.js and npm to install {' '.join(specs)}"
        )
    modules = cache / "node_modules"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed(cache, packages):
            (cache / MARKER).unlink(missing_ok=True)
            if not (cache / "package.json").exists():
                (cache / "package.json").write_text(
                    '{"name": "rewind-ledger-test-cache", "private": true}\n'
                )
            result = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *specs],
                cwd=cache,
                check=False,
                capture_output=True,
                text=True,
                timeout=900,
            )
            if result.returncode != 0 or not _versions_ok(modules, packages):
                raise PiUnavailable(
                    f"npm install of {' '.join(specs)} into {cache} failed: {result.stderr[-2000:]}"
                )
            (cache / MARKER).write_text(" ".join(specs) + "\n")
    return modules


def _versions_ok(modules: Path, packages: dict[str, str]) -> bool:
    for name, version in packages.items():
        try:
            if json.loads((modules / name / "package.json").read_text())["version"] != version:
                return False
        except (OSError, ValueError, KeyError):
            return False
    return True


def _installed(cache: Path, packages: dict[str, str]) -> bool:
    return (cache / MARKER).is_file() and _versions_ok(cache / "node_modules", packages)


def pi_env(agent_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PI_CODING_AGENT_DIR=str(agent_dir),
        PI_OFFLINE="1",
        PI_TELEMETRY="0",
        REWIND_BRIDGE_CMD=os.environ.get("E2E_BRIDGE_CMD")
        or json.dumps([sys.executable, "-m", "ledger", "serve", "--stdio"]),
    )
    return env


def pi_args(cli: Path, *, extension: bool = True) -> list[str]:
    args = [
        shutil.which("node") or "node",
        str(cli),
        "--provider",
        "scripted",
        "--model",
        "scripted-1",
        "--no-extensions",
        "--no-skills",
        "--no-prompt-templates",
        "--no-context-files",
        "--no-themes",
        "-e",
        str(SCRIPTED),
    ]
    return args + (["-e", str(EXTENSION)] if extension else [])


def turns(*calls: list[dict[str, Any]]) -> str:
    """The ``[[turns: …]]`` script for a prompt: one list of tool calls per turn."""
    return f"[[turns: {json.dumps(list(calls))}]]"


def write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write", "args": {"path": path, "content": content}}


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"name": "edit", "args": {"path": path, "edits": [{"oldText": old, "newText": new}]}}


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "args": {"command": command}}


def store_snapshots(repo: Path) -> list[str]:
    """The snapshots ``refs/pi-rewind/store`` keeps alive, newest first (rewind-v2 §5.1: a
    first-parent chain of keepalives with the empty tree, each with one snapshot as its last parent)."""
    empty_tree = subprocess.run(
        ["git", "hash-object", "-t", "tree", "/dev/null"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    chain = subprocess.run(
        ["git", "log", "--first-parent", "--format=%T %P", "refs/pi-rewind/store"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [line.split()[-1] for line in chain if line.split()[0] == empty_tree]


class PiRunner:
    """``pi -p`` runs in one repository with one agent dir."""

    def __init__(self, cli: Path, repo: Path, agent_dir: Path, *, extension: bool = True) -> None:
        self.cli, self.repo, self.agent_dir, self.extension = cli, repo, agent_dir, extension
        self.stderrs: list[str] = []
        """Each run's standard error (the extension's warnings in print mode), for failures."""

    def run(
        self, prompt: str, *extra: str, timeout: float = 180, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*pi_args(self.cli, extension=self.extension), "-p", *extra, prompt],
            cwd=self.repo,
            check=False,
            env={**pi_env(self.agent_dir), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.stderrs.append(result.stderr)
        if result.returncode != 0:
            raise AssertionError(f"pi failed ({result.returncode}): {result.stderr[-3000:]}")
        return result

    def sessions(self) -> list[Path]:
        """Session files, newest first (by mtime, as ``pi -c`` picks them)."""
        files = list((self.agent_dir / "sessions").rglob("*.jsonl"))
        return sorted(files, key=lambda p: p.stat().st_mtime_ns, reverse=True)


class RpcPi:
    """``pi --mode rpc``: send commands, answer menus, collect notices."""

    def __init__(
        self,
        cli: Path,
        repo: Path,
        agent_dir: Path,
        *extra: str,
        extension: bool = True,
        env: dict[str, str] | None = None,
    ) -> None:
        self.proc = subprocess.Popen(
            [*pi_args(cli, extension=extension), "--mode", "rpc", *extra],
            cwd=repo,
            env={**pi_env(agent_dir), **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: Queue[dict[str, Any] | None] = Queue()
        self.choices: list[str | None] = []
        self.think_seconds = 0.0  # how long the "user" looks at a menu before answering
        self.menus: list[tuple[str, list[str]]] = []
        self.notices: list[tuple[str, str]] = []
        self.status: str | None = None
        self._ids = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self.lines.put(json.loads(raw))
            except ValueError:
                continue
        self.lines.put(None)

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read().decode("utf-8", "replace")

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def _next(self, deadline: float) -> dict[str, Any]:
        try:
            message = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except Empty:
            raise AssertionError("pi --mode rpc did not answer in time") from None
        if message is None:
            raise AssertionError(f"pi --mode rpc exited: {getattr(self, 'stderr', '')[-3000:]}")
        if message.get("type") == "extension_ui_request":
            self._ui(message)
        return message

    def _ui(self, request: dict[str, Any]) -> None:
        method = request.get("method")
        if method == "select":
            self.menus.append((request["title"], request["options"]))
            choice = self.choices.pop(0) if self.choices else None
            time.sleep(self.think_seconds)
            reply = {"type": "extension_ui_response", "id": request["id"]}
            reply.update({"value": choice} if choice is not None else {"cancelled": True})
            self._send(reply)
        elif method == "notify":
            self.notices.append((request.get("notifyType", "info"), request.get("message", "")))
        elif method == "setStatus" and request.get("statusKey") == "rewind":
            self.status = request.get("statusText")
        elif method in ("confirm", "input", "editor"):
            self._send({"type": "extension_ui_response", "id": request["id"], "cancelled": True})

    def command(self, message: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
        self._ids += 1
        request_id = f"t{self._ids}"
        self._send({**message, "id": request_id})
        deadline = time.monotonic() + timeout
        while True:
            reply = self._next(deadline)
            if reply.get("type") == "response" and reply.get("id") == request_id:
                if not reply.get("success"):
                    raise AssertionError(f"rpc {message['type']} failed: {reply.get('error')}")
                return reply

    def prompt(self, text: str, timeout: float = 180) -> None:
        """Send a prompt and wait until the agent is idle again."""
        self.command({"type": "prompt", "message": text})
        deadline = time.monotonic() + timeout
        while True:
            message = self._next(deadline)
            if message.get("type") == "agent_end":
                break
        self.wait_idle(deadline)

    def wait_idle(self, deadline: float | None = None) -> None:
        deadline = deadline or time.monotonic() + 60
        while self.command({"type": "get_state"})["data"].get("isStreaming"):
            time.sleep(0.05)
            if time.monotonic() > deadline:
                raise AssertionError("pi stayed busy")

    def run_command(self, text: str, done_notice: str, timeout: float = 120) -> None:
        """An extension command (e.g. /e2e-tree): runs at once; wait for its closing notice."""
        before = len(self.notices)
        self.command({"type": "prompt", "message": text})
        deadline = time.monotonic() + timeout
        while not any(n[1].startswith(done_notice) for n in self.notices[before:]):
            try:
                self._next(deadline)
            except AssertionError:
                raise AssertionError(
                    f"no '{done_notice}' notice; notices: {self.notices[before:]}"
                ) from None

    def state(self) -> dict[str, Any]:
        return self.command({"type": "get_state"})["data"]

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class TmuxUnavailable(Exception):
    """tmux is missing and could not be installed."""


def ensure_tmux() -> str:
    """tmux's path, installing it with apt-get when it is missing (and we may)."""
    found = shutil.which("tmux")
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is not None and os.geteuid() == 0:
        subprocess.run([apt, "update"], capture_output=True, check=False, timeout=600)
        subprocess.run(
            [apt, "install", "-y", "tmux"], capture_output=True, check=False, timeout=600
        )
    found = shutil.which("tmux")
    if found is None:
        raise TmuxUnavailable("tmux is not installed and apt-get could not install it")
    return found


class TmuxPi:
    """The real interactive Pi (its terminal UI) in a tmux pane: type keys, read the screen.

    Every instance has its own tmux server (``-L``), so tests never share a pane. Screens are read
    with ``capture-pane -p`` once Pi has redrawn; :meth:`wait_for` polls until text shows up.
    """

    WIDTH, HEIGHT = 160, 50
    SETTLE_S = 0.15
    """How long the screen must stay unchanged to count as drawn (:meth:`settled_screen`)."""

    def __init__(
        self,
        tmux: str,
        cli: Path,
        repo: Path,
        agent_dir: Path,
        *extra: str,
        extension: bool = True,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ) -> None:
        self.tmux = tmux
        self.socket = f"rewind-e2e-{os.getpid()}-{id(self)}"
        self.repo = repo
        script = agent_dir.parent / f"run-pi-{id(self)}.sh"
        environment = {**pi_env(agent_dir), **(env or {})}
        environment.update(TERM="xterm-256color", COLUMNS=str(self.WIDTH), LINES=str(self.HEIGHT))
        exports = "".join(
            f"export {k}={shlex.quote(v)}\n" for k, v in environment.items() if k.isidentifier()
        )
        argv = args if args is not None else pi_args(cli, extension=extension)
        script.write_text(
            f"#!/bin/sh\n{exports}cd {shlex.quote(str(repo))}\n"
            f"exec {' '.join(shlex.quote(a) for a in [*argv, *extra])} 2>>{shlex.quote(str(script))}.err\n"
        )
        script.chmod(0o755)
        self.stderr_file = Path(f"{script}.err")
        self._tmux(
            "new-session",
            "-d",
            "-s",
            "pi",
            "-x",
            str(self.WIDTH),
            "-y",
            str(self.HEIGHT),
            str(script),
        )
        self._tmux("set-option", "-t", "pi", "remain-on-exit", "on")

    def _tmux(self, *args: str) -> str:
        return subprocess.run(
            [self.tmux, "-L", self.socket, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout

    def screen(self) -> str:
        """The visible pane, as text (wrapped lines joined)."""
        return self._tmux("capture-pane", "-p", "-J", "-t", "pi")

    def settled_screen(self, first: str | None = None, timeout: float = 1) -> str:
        """The screen once it stops changing: two captures ``SETTLE_S`` apart that are equal.
        A capture can land in the middle of Pi's redraw (the top of an overlay new, its bottom
        still the old one); a person reads the screen after it is drawn. A screen that keeps
        changing (a spinner) is returned as it is after ``timeout``."""
        deadline = time.monotonic() + timeout
        screen = self.screen() if first is None else first
        while True:
            time.sleep(self.SETTLE_S)
            again = self.screen()
            if again == screen or time.monotonic() > deadline:
                return again
            screen = again

    def wait_for(self, *texts: str, timeout: float = 60, gone: bool = False) -> str:
        """Poll the screen until every text is shown (or, with ``gone``, none is) on a settled
        screen (:meth:`settled_screen`)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            shown = [t in screen for t in texts]
            if (not gone and all(shown)) or (gone and not any(shown)):
                screen = self.settled_screen(screen)
                shown = [t in screen for t in texts]
                if (not gone and all(shown)) or (gone and not any(shown)):
                    return screen
            if time.monotonic() > deadline:
                err = self.stderr_file.read_text()[-2000:] if self.stderr_file.exists() else ""
                raise AssertionError(
                    f"timed out waiting for {texts!r} {'to go' if gone else ''}\n"
                    f"--- screen ---\n{screen}\n--- stderr ---\n{err}"
                )
            time.sleep(0.1)

    def keys(self, *keys: str) -> None:
        """tmux key names (``Enter``, ``Up``, ``Escape``, ``C-c``)."""
        self._tmux("send-keys", "-t", "pi", *keys)

    def type(self, text: str, *, enter: bool = True) -> None:
        """Type ``text`` and wait until the screen shows it (keys sent while Pi is still starting
        are lost: then type again), then press Enter."""
        probe = text[:24]
        for _ in range(3):
            before = self.screen().count(probe)
            self._tmux("send-keys", "-t", "pi", "-l", text)
            try:
                self.wait_for_count(probe, before + 1, timeout=5)
                break
            except AssertionError:
                continue
        if enter:
            self.keys("Enter")

    def wait_for_count(self, text: str, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.screen().count(text) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not shown {count} times")
            time.sleep(0.05)

    def prompt(self, text: str, done: str, timeout: float = 120) -> str:
        """Submit a prompt and wait for its final answer (``done``) and for Pi to be idle."""
        self.type(text)
        screen = self.wait_for(done, timeout=timeout)
        self.wait_idle()
        return screen

    def wait_idle(self, timeout: float = 60) -> None:
        """Pi shows a working indicator while the agent runs; wait until it is gone."""
        self.wait_for("Working", "esc to interrupt", gone=True, timeout=timeout)

    def choose(self, title: str, option: str, timeout: float = 60) -> None:
        """In a select menu titled ``title``, move to ``option`` and press Enter."""
        screen = self.wait_for(title, option, timeout=timeout)
        for _ in range(20):
            selected = [line for line in screen.splitlines() if line.lstrip().startswith("→")]
            if selected and option in selected[0]:
                self.keys("Enter")
                return
            self.keys("Down")
            time.sleep(0.1)
            screen = self.screen()
        raise AssertionError(f"option {option!r} never selected\n{screen}")

    def alive(self) -> bool:
        out = self._tmux("list-panes", "-t", "pi", "-F", "#{pane_dead}")
        return out.strip() == "0"

    def close(self) -> None:
        try:
            if self.alive():
                self.keys("C-c")
                time.sleep(0.2)
                self.keys("C-c")
                deadline = time.monotonic() + 15
                while self.alive() and time.monotonic() < deadline:
                    time.sleep(0.1)
        except subprocess.SubprocessError:
            pass
        subprocess.run(
            [self.tmux, "-L", self.socket, "kill-server"], capture_output=True, check=False
        )
        socket_dir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        (socket_dir / self.socket).unlink(missing_ok=True)  # the server is gone; so is its socket


# --- shared by the tmux tests -----------------------------------------------------------

FIRST = "first [[done: first-ok]] " + turns([write("a.txt", "one\n")])
SECOND = "second [[done: second-ok]] " + turns([write("a.txt", "two\n"), write("b.txt", "new\n")])


def sessions(agent_dir: Path) -> list[Path]:
    return sorted((agent_dir / "sessions").rglob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)


def records(path: Path, custom_type: str) -> list[dict]:
    return [e.raw["data"] for e in read_session(path).entries if e.custom_type == custom_type]


def open_tree(tui: TmuxPi, search: str) -> None:
    tui.type("/tree")
    tui.wait_for("Session Tree")
    tui.type(search)  # type-to-search, then Enter selects the match


def open_fork(tui: TmuxPi, *, up: int = 0) -> None:
    tui.type("/fork")
    tui.wait_for("Fork from Message")
    for _ in range(up):
        tui.keys("Up")
    tui.keys("Enter")
