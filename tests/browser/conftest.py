"""A real headless Chromium for the report tests, installed from Debian's packages if missing.

The install runs once per test session under a file lock (several workers may ask at once); the
tests are skipped with a message only when Chromium cannot be had (no root, no apt, no network).

:class:`Cdp` drives one headless Chromium over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: file descriptors 3 and 4, no port, no network), for tests that
click, type and read the DOM after the page's script ran; ``tools/bench_report.py`` times pages
with it too.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


_BAD_CONSOLE = ("error", "warning", "assert")


def _high(fds: tuple[int, int]) -> tuple[int, int]:
    """The pipe's two ends moved to descriptors >= 10 (close-on-exec), clear of 3 and 4."""
    out = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds]
    for fd in fds:
        os.close(fd)
    return out[0], out[1]


class Cdp:
    """One headless Chromium and one page target, over ``--remote-debugging-pipe``.

    Events read while waiting for an answer are kept in :attr:`events` (console messages and
    uncaught exceptions among them, once :meth:`open` enabled the domains).
    """

    def __init__(self, binary: str, profile: Path, width: int = 1280, height: int = 900) -> None:
        to_chrome_r, self._to_chrome = _high(os.pipe())
        self._from_chrome, from_chrome_w = _high(os.pipe())

        def fds() -> None:  # in the child: the protocol's fixed descriptors, inheritable
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [
                binary,
                *FLAGS,
                f"--window-size={width},{height}",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds,
            close_fds=False,  # only 3 and 4 (made by fds) are inheritable; the rest is CLOEXEC
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.session: str | None = None
        self.events: list[dict[str, Any]] = []

    def send(
        self, method: str, params: dict[str, Any] | None = None, *, browser: bool = False
    ) -> int:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if self.session and not browser:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        return self._id

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        if "method" in message:
            self.events.append(message)
        return message

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        browser: bool = False,
        timeout: float = 60,
    ) -> dict[str, Any]:
        ident = self.send(method, params, browser=browser)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read(deadline)
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result

    def wait_event(self, name: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read(deadline)
            if msg.get("method") == name:
                return msg

    def open(self, url: str, timeout: float = 180) -> None:
        """A new page target showing ``url``; returns after its load event."""
        target = self.call("Target.createTarget", {"url": "about:blank"}, browser=True)
        self.session = self.call(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, browser=True
        )["sessionId"]
        for domain in ("Page.enable", "Runtime.enable"):
            self.call(domain)
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", timeout)

    def evaluate(self, expression: str, timeout: float = 60) -> Any:
        """The JSON value of ``expression`` in the page (promises awaited)."""
        answer = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        if "exceptionDetails" in answer:
            raise AssertionError(f"page script failed: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def screenshot(self, path: Path) -> None:
        import base64

        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))

    def problems(self) -> list[str]:
        """Console errors and uncaught exceptions seen so far."""
        out = []
        for event in self.events:
            method, params = event["method"], event["params"]
            thrown = method == "Runtime.exceptionThrown"
            logged = method == "Runtime.consoleAPICalled" and params.get("type") in _BAD_CONSOLE
            if thrown or logged:
                out.append(json.dumps(params)[:500])
        return out

    def close(self) -> None:
        try:
            self.send("Browser.close", browser=True)
            self.proc.wait(timeout=10)
        except Exception:  # a browser that will not close is killed: it is ours, by pid
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


_LOCK = Path(tempfile.gettempdir()) / "rewind-ledger-chromium-install.lock"


def _find() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _install() -> str:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "chromium is not installed and cannot be installed here (needs root and apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=900, check=False
        )
        if proc.returncode != 0:
            return f"installing chromium failed ({' '.join(cmd)}): {proc.stderr.strip()[-300:]}"
    return ""


@pytest.fixture(scope="session")
def chromium() -> str:
    found = _find()
    if found:
        return found
    with open(_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _find()
        if found:
            return found
        problem = _install()
    found = _find()
    if not found:
        pytest.skip(f"no Chromium for the browser test: {problem or 'not found after installing'}")
    return found
