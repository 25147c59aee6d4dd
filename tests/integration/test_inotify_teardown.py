"""A bridge's inotify watches are torn down by a reaper that outlives it, not on Pi's path
(ledger/git/feed/teardown.py): closing an instance with 10k watches costs ~25 ms of kernel time,
in ``close()`` or in the exit Pi waits for. Real inotify, real processes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from ledger.git.feed import teardown
from ledger.git.feed.inotify import InotifyWatcher, live_watchers
from tests.bridgekit import FakePi, prompts_stay_exact
from tests.integration.test_early_status import _watches

pytestmark = pytest.mark.needs("change_feed")


def _ready(root: Path) -> InotifyWatcher:
    watcher = InotifyWatcher(str(root), background=False)
    watcher.start()
    deadline = time.monotonic() + 30
    while not watcher.ready:
        assert time.monotonic() < deadline and watcher.failed is None
        time.sleep(0.01)
    return watcher


def _reapers_of(pid: int) -> list[int]:
    """``cat`` processes started by ``pid`` (its children, found through /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and (entry / "comm").read_text().strip() == "cat":
                found.append(int(entry.name))
    return found


def test_a_handed_off_instance_lives_in_the_reaper_until_this_process_lets_it_go(
    tmp_path: Path,
) -> None:
    for i in range(4):
        (tmp_path / f"d{i}").mkdir()
    watcher = _ready(tmp_path)
    assert watcher in live_watchers()
    try:
        assert teardown.hand_off() >= 1
        reapers = _reapers_of(os.getpid())
        assert len(reapers) == 1
        assert _watches(reapers[0]) >= 5  # the root and its four directories
        watcher.stop()  # our close only drops a reference
        assert watcher not in live_watchers()
        assert _watches(reapers[0]) >= 5
    finally:
        teardown.release()
    assert not _reapers_of(os.getpid())  # end-of-file: gone, and its watches with it


def test_nothing_is_handed_off_without_an_open_instance() -> None:
    assert not [w for w in live_watchers() if w.descriptor() >= 0]
    assert teardown.hand_off() == 0
    assert not _reapers_of(os.getpid())


def test_a_print_mode_bridge_leaves_its_watches_to_a_reaper_that_ends_with_it(
    repo: Path, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the real bridge: at its end a reaper starts holding the walked inotify instance;
    once the bridge has exited, the reaper reads end-of-file and is gone too. The reaper is the
    real ``cat``, reached through a script first on ``PATH`` that notes what it inherited."""
    for i in range(4):
        (repo / f"d{i}").mkdir()
        (repo / f"d{i}" / "f.txt").write_text(f"{i}\n")
    bin_dir, log = tmp_path / "bin", tmp_path / "reaper.log"
    bin_dir.mkdir()
    real_cat = subprocess.run(["sh", "-c", "command -v cat"], capture_output=True, text=True)
    script = bin_dir / "cat"
    script.write_text(
        "#!/bin/sh\n"
        f"echo pid $$ >> '{log}'\n"
        f"for fd in /proc/$$/fd/*; do readlink \"$fd\" >> '{log}'; done\n"
        f"echo listed >> '{log}'\n"
        f"exec {real_cat.stdout.strip()}\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("REWIND_BRIDGE_NO_UI", "1")
    pi = FakePi(repo, isolated_env / ".pi" / "agent")
    pi.has_ui = False
    assert pi.event("session_start", {"reason": "startup"}).error is None
    prompts_stay_exact(pi, 1, "print")
    assert pi.close() == 0
    deadline = time.monotonic() + 10
    # Until the script has listed every descriptor: read sooner, the log missed the last ones
    # (the glob lists 0, 1, 10, 2, 3: the inotify descriptor, 3, came last; a flaky test).
    while not log.exists() or "listed" not in log.read_text():
        assert time.monotonic() < deadline, "no reaper started at the bridge's end"
        time.sleep(0.01)
    text = log.read_text()
    assert "anon_inode:inotify" in text, text
    reaper = int(text.split()[1])
    while _alive(reaper):
        assert time.monotonic() < deadline, "the reaper outlived the bridge"
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for init."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
