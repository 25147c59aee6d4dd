"""The watcher's memory stays flat over a long life (docs/soak.md#watcher-memory): what it keeps
per capture and per hosted session is bounded or released. No timing: counts, references and
weak references."""

from __future__ import annotations

import os
import sys
import threading
import weakref
from pathlib import Path

import pygit2
import pytest

from ledger.bridge.hosted import HostedSessions, socket_path
from ledger.git.feed import service as feed
from ledger.git.feed.tree import (
    OBJECT_CACHE_BYTES,
    PACK_MAPPED_BYTES,
    PACK_WINDOW_BYTES,
    _entry,
)
from tests.bridgekit import FakePi
from tests.gitkit import git

DEFAULT_CACHE = 256 << 20
"""libgit2's own bound of its object cache."""


def _tree(repo: Path, names: list[str]) -> pygit2.Tree:
    for name in names:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
    os.symlink("b", repo / "lnk")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tree")
    return pygit2.Repository(str(repo)).head.peel(pygit2.Tree)


def test_a_fed_lookup_reads_the_base_as_pygit2_does_and_keeps_no_reference_to_the_path(
    repo: Path,
) -> None:
    # pygit2 1.21 keeps a reference to the key of every Tree lookup that takes its by-path
    # branch (a path with '/', a missing name): the watcher kept every dirty path for good.
    names = ["a.b", "a-b", "a/x", "a/y/z", "ab", "a0", "b", "b.txt", "c.d", "c-d/e", "é/ü"]
    names += [f"m/f{i:03d}" for i in range(200)]
    tree = _tree(repo, names)
    probes = [*names, "a", "a/y", "c-d", "lnk", "a/x/q", "nope", "a/nope", "a/", "b/", "m/f"]
    for path in probes:
        try:
            found = tree[path]
            expected: tuple[int, str] | None = (int(found.filemode), str(found.id))
        except (KeyError, ValueError):
            expected = None
        assert _entry(tree, path) == expected, path
    for path in ("a/y/z", "a/nope", "nope", "m/f150"):
        key = "".join(list(path))  # a string of its own, as the watcher's paths are
        before = sys.getrefcount(key)
        for _ in range(50):
            _entry(tree, key)
        assert sys.getrefcount(key) == before, path


def test_a_process_with_a_feed_bounds_libgit2s_object_cache_and_pack_maps(repo: Path) -> None:
    settings = pygit2.settings
    window, mapped = settings.mwindow_size, settings.mwindow_mapped_limit
    settings.cache_max_size(DEFAULT_CACHE)
    try:
        feed.enable(verify=False)
        assert settings.cached_memory[1] == OBJECT_CACHE_BYTES
        assert settings.mwindow_mapped_limit == PACK_MAPPED_BYTES
        assert settings.mwindow_size == PACK_WINDOW_BYTES
        # Many new trees read, as months of fed captures read them: the cache stays bounded.
        handle = pygit2.Repository(str(repo))
        blob = handle.create_blob(b"x")
        kept = []
        for i in range(3000):
            builder = handle.TreeBuilder()
            for j in range(40):
                builder.insert(f"file-{i}-{j:02d}.txt", blob, pygit2.enums.FileMode.BLOB)
            kept.append(handle.get(builder.write()))
        assert pygit2.settings.cached_memory[0] <= OBJECT_CACHE_BYTES
    finally:
        feed.disable()
        settings.cache_max_size(DEFAULT_CACHE)
        settings.mwindow_size, settings.mwindow_mapped_limit = window, mapped


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Unix sockets")
def test_a_hosted_session_that_ended_leaves_nothing_of_its_own_behind(
    repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = isolated_env / ".pi" / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))  # the hello's environment is ours
    hosted = HostedSessions(repo, repo / ".git")
    assert hosted.start(), hosted.refusal
    try:
        servers: list[weakref.ref[object]] = []
        for n in range(3):
            pi = FakePi(repo, agent, hosted=socket_path(repo / ".git"))
            assert pi.event("session_start", {"reason": "startup"}).error is None
            pi.prompt(f"prompt {n}", lambda n=n: (repo / f"f{n}.txt").write_text("x"))
            with hosted._guard:
                (server,) = hosted._servers.values()
            engine = server.state.engine
            assert engine is not None
            servers += [weakref.ref(server), weakref.ref(engine), weakref.ref(engine.repo)]
            del server, engine
            assert pi.close() == 0
            for thread in [t for t in threading.enumerate() if t.name == "rewind-hosted-session"]:
                thread.join(timeout=30)
        # Released when each session ended (the watcher does not wait for a collection that
        # might come many captures later): no engine, server or repository handle stays.
        assert hosted.active() == 0
        assert [ref for ref in servers if ref() is not None] == []
    finally:
        hosted.close()
