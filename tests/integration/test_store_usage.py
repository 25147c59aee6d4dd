"""``rewind doctor``'s disk figures within a bounded time, and the sweep's one walk
(ledger/git/store/usage.py, ledger/git/store/rewrite.py::reclaimable; docs/design.md#disk-upkeep).

The doctor's exact figures are cached per store state (store head, other refs, object layout):
a cache is used when that state is unchanged, ignored when it changed or is corrupt, and a walk
over its time budget gives the last figures marked as an estimate, or none, never a wrong exact
figure. The sweep counts what it frees and its bytes in one walk, equal to the two walks
(``--count`` and ``--disk-usage``) it used to run. Real repositories, real git; no mocks.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from ledger.git.repo import GitRepo
from ledger.git.runner import EMPTY_TREE
from ledger.git.store.chain import STORE_REF, Store
from ledger.git.store.rewrite import reclaimable
from ledger.git.store.upkeep import our_loose_objects
from ledger.git.store.usage import (
    MAX_CACHE_BYTES,
    cache_path,
    measure,
    read_cache,
    usage_key,
    write_cache,
)
from ledger.record_models import build_op
from ledger.records import OP
from ledger.retention.plan import Policy
from ledger.retention.sweep import run_sweep
from ledger.session.store import SessionAppender
from tests.cli.helpers import run_cli
from tests.gitkit import git
from tests.snapshotkit import ledger_session, snapshot


def settle(git_dir: Path, seconds: float = 30.0) -> None:
    """Make the object directories' mtimes ``seconds`` old: the state held still (as it does
    between captures), so a measurement may be cached (the racy rule)."""
    objects = git_dir / "objects"
    for directory, _dirs, _files in os.walk(objects):
        st = os.stat(directory)
        os.utime(directory, (st.st_atime - seconds, st.st_mtime - seconds))


def snaps(repo: Path, count: int, size: int = 20_000) -> list[str]:
    shas = []
    for n in range(count):
        (repo / f"data{n % 3}.bin").write_bytes(os.urandom(size))
        shas.append(snapshot(repo))
    return shas


def old_figures(repo: Path) -> tuple[int, int, int]:
    """The old doctor's three walks: ``rev-list --disk-usage`` of the store, of what only it
    reaches, and a ``stat`` per exclusive object for the loose count."""
    total = int(git(repo, "rev-list", "--disk-usage", "--objects", STORE_REF).strip())
    exclusive = int(
        git(
            repo,
            "rev-list",
            "--disk-usage",
            "--objects",
            STORE_REF,
            "--not",
            f"--exclude={STORE_REF}",
            "--all",
        ).strip()
    )
    return total, exclusive, len(our_loose_objects(GitRepo.discover(repo)))


def doctor_json(capsys: pytest.CaptureFixture[str], repo: Path, agent: Path, *extra: str) -> dict:
    result = run_cli(capsys, "--agent-dir", agent, "doctor", "--json", *extra, cwd=repo)
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    return json.loads(result.out)


# --- the doctor's cache ----------------------------------------------------------------------


def test_exact_figures_equal_the_old_walks_and_are_cached_while_the_state_holds(
    repo: Path,
) -> None:
    snaps(repo, 4)
    gitrepo = GitRepo.discover(repo)
    settle(gitrepo.git_dir)
    usage = measure(gitrepo, budget_s=None)
    assert usage is not None and usage.exact and not usage.cached
    assert (usage.bytes, usage.exclusive_bytes, usage.loose_ours) == old_figures(repo)
    assert usage.head == Store(gitrepo).head()
    assert cache_path(gitrepo).is_file(), "the state held still: cached"

    again = measure(gitrepo, budget_s=0)  # no time at all: only the cache can answer
    assert again is not None and again.exact and again.cached
    assert (again.bytes, again.exclusive_bytes, again.loose_ours) == (
        usage.bytes,
        usage.exclusive_bytes,
        usage.loose_ours,
    )


def test_the_cache_is_what_the_doctor_reports_when_the_state_is_unchanged(
    repo: Path, agent_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snaps(repo, 2)
    gitrepo = GitRepo.discover(repo)
    settle(gitrepo.git_dir)
    measured = measure(gitrepo, budget_s=None)
    assert measured is not None
    # Figures no walk would give, under the current key: the doctor must not walk.
    forged = type(measured)(111, 22, 3, measured.head, measured.measured_s, 0.25)
    assert write_cache(gitrepo, usage_key(gitrepo), forged)
    report = doctor_json(capsys, repo, agent_dir)
    assert report["store"]["bytes"] == 111
    assert report["store"]["exclusiveBytes"] == 22 and report["store"]["looseObjects"] == 3
    assert report["store"]["usage"]["cached"] and report["store"]["usage"]["exact"]


@pytest.mark.parametrize("change", ["capture", "branch", "pack"])
def test_the_cache_is_invalidated_when_the_state_changes(repo: Path, change: str) -> None:
    snaps(repo, 3)
    gitrepo = GitRepo.discover(repo)
    settle(gitrepo.git_dir)
    first = measure(gitrepo, budget_s=None)
    assert first is not None and read_cache(gitrepo) is not None
    old_key = usage_key(gitrepo).digest
    if change == "capture":  # the store head moves
        snaps(repo, 1)
    elif change == "branch":  # another ref: what "nothing else" keeps changes
        snapshot_sha = Store(gitrepo).snapshots()[0]
        git(repo, "branch", "keep-it", snapshot_sha)
    else:  # our loose objects packed (the upkeep, or a user's gc): sizes and loose count change
        git(repo, "repack", "-a", "-d", "-q")
        git(repo, "prune-packed")
    assert usage_key(gitrepo).digest != old_key
    second = measure(gitrepo, budget_s=None)
    assert second is not None and second.exact and not second.cached
    assert (second.bytes, second.exclusive_bytes, second.loose_ours) == old_figures(repo)
    if change == "branch":
        assert second.exclusive_bytes < first.exclusive_bytes
    if change == "pack":
        assert second.loose_ours == 0 < first.loose_ours


def test_a_fresh_state_is_not_cached(repo: Path) -> None:
    """Racy: a directory written twice within one clock tick keeps its mtime, so a state that
    changed in the last seconds is measured but not cached."""
    snaps(repo, 2)
    gitrepo = GitRepo.discover(repo)
    now = time.time()
    os.utime(gitrepo.git_dir / "objects" / "pack", (now, now))
    usage = measure(gitrepo, budget_s=None)
    assert usage is not None and usage.exact
    assert not cache_path(gitrepo).exists()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"[1, 2]",
        b'{"version": 1, "key": "zz", "bytes": 1}',
        b"\xff\xfe garbage",
        b"x" * (MAX_CACHE_BYTES + 10),
        "nan",
        "negative",
        "wrong-key",
    ],
)
def test_a_corrupt_or_oversized_cache_is_ignored(
    repo: Path,
    agent_dir: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes | str,
) -> None:
    snaps(repo, 2)
    gitrepo = GitRepo.discover(repo)
    settle(gitrepo.git_dir)
    key = usage_key(gitrepo)
    valid = {
        "version": 1,
        "key": key.digest,
        "head": key.head,
        "bytes": 5,
        "exclusiveBytes": 5,
        "looseObjects": 1,
        "measuredAt": time.time(),
        "walkSeconds": 0.1,
    }
    if content == "nan":
        data = json.dumps({**valid, "measuredAt": float("nan")}).encode()
    elif content == "negative":
        data = json.dumps({**valid, "bytes": -5}).encode()
    elif content == "wrong-key":
        data = json.dumps({**valid, "key": "0" * 64}).encode()
    else:
        assert isinstance(content, bytes)
        data = content
    path = cache_path(gitrepo)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_bytes(data)
    assert read_cache(gitrepo) is None or read_cache(gitrepo)[0] != key.digest  # type: ignore[index]
    report = doctor_json(capsys, repo, agent_dir)
    expected = old_figures(repo)
    store = report["store"]
    assert (store["bytes"], store["exclusiveBytes"], store["looseObjects"]) == expected
    assert not store["usage"]["cached"]
    cached = read_cache(gitrepo)
    assert cached is not None and cached[0] == key.digest, "replaced by the fresh measurement"


def test_a_walk_over_budget_gives_the_last_figures_as_an_estimate_or_none(
    repo: Path, agent_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snaps(repo, 2)
    gitrepo = GitRepo.discover(repo)
    assert measure(gitrepo, budget_s=0) is None, "nothing cached, no time: no figures"
    settle(gitrepo.git_dir)
    first = measure(gitrepo, budget_s=None)
    assert first is not None and first.exact
    snaps(repo, 1)  # the store changed: the cache holds an earlier state's figures
    stale = measure(gitrepo, budget_s=0)
    assert stale is not None and not stale.exact and stale.head == first.head
    assert stale.bytes == first.bytes
    assert not list(cache_path(gitrepo).parent.glob(".*.tmp")), "no temporary file left"

    import ledger.doctor

    budget = ledger.doctor.USAGE_BUDGET_S
    try:
        ledger.doctor.USAGE_BUDGET_S = 0.0  # a store too large to walk within the budget
        report = doctor_json(capsys, repo, agent_dir)
        text = run_cli(capsys, "--agent-dir", agent_dir, "doctor", cwd=repo).out
    finally:
        ledger.doctor.USAGE_BUDGET_S = budget
    store = report["store"]
    assert store["bytes"] is None and store["looseObjects"] is None, "never an estimate there"
    assert store["usage"]["exact"] is False and store["usage"]["bytes"] == first.bytes
    assert "about " in text and "rewind doctor --exact" in text and "of them loose" in text

    exact = doctor_json(capsys, repo, agent_dir, "--exact")
    assert (exact["store"]["bytes"], exact["store"]["looseObjects"]) == (
        old_figures(repo)[0],
        old_figures(repo)[2],
    )


def test_doctor_writes_only_its_cache_in_the_private_dir(repo: Path, agent_dir: Path) -> None:
    snaps(repo, 2)
    gitrepo = GitRepo.discover(repo)
    settle(gitrepo.git_dir)

    def listing() -> set[str]:
        return {
            str(Path(d, f).relative_to(gitrepo.git_dir))
            for d, _dirs, files in os.walk(gitrepo.git_dir)
            for f in files
        }

    before = listing()
    from ledger.doctor import diagnose

    report = diagnose(gitrepo, agent_dir)
    assert report.usage is not None and report.usage.exact
    assert listing() - before == {"pi-rewind/store-usage.json"}


# --- the sweep's one walk ----------------------------------------------------------------------


def two_walks(repo: Path, old_head: str, kept: list[str]) -> tuple[int, int]:
    """The old sweep's count and bytes: two ``git rev-list`` walks over the same input."""
    lines = [old_head, *(f"^{sha}" for sha in kept), f"^{EMPTY_TREE}"]
    results = []
    for mode in ("--count", "--disk-usage"):
        proc = subprocess.run(
            ["git", "rev-list", "--objects", mode, "--stdin"]
            + ["--not", f"--exclude={STORE_REF}", "--all"],
            cwd=repo,
            input=("\n".join(lines) + "\n").encode(),
            capture_output=True,
            check=True,
        )
        results.append(int(proc.stdout.strip()))
    return results[0], results[1]


@pytest.mark.parametrize("packed", [False, True])
def test_sweep_counts_and_bytes_equal_the_old_two_walks(
    repo: Path, agent_dir: Path, packed: bool
) -> None:
    shas = snaps(repo, 6)
    git(repo, "branch", "other", shas[1])  # a snapshot another ref keeps is not freed
    if packed:
        git(repo, "repack", "-a", "-d", "-q")
        snaps(repo, 1)  # loose and packed objects mixed
    gitrepo = GitRepo.discover(repo)
    head = Store(gitrepo).head()
    assert head is not None
    kept = Store(gitrepo).snapshots()[:2]
    found = reclaimable(gitrepo, head, kept)
    assert found.complete and found.objects > 0 and found.bytes > 0
    assert (found.objects, found.bytes) == two_walks(repo, head, kept)

    path = ledger_session(agent_dir, repo, current=Store(gitrepo).snapshots()[0])
    dry = run_sweep(
        gitrepo,
        path,
        agent_dir,
        scan_mode="repo-sessions",
        policy=Policy(max_snapshots=1, grace_ms=0),
        dry_run=True,
        count_objects=True,
    )
    assert dry.counted and dry.unreachable_objects > 0
    expected = two_walks(repo, head, dry.plan.live)
    assert (dry.unreachable_objects, dry.freed_bytes) == expected
    real = run_sweep(
        gitrepo,
        path,
        agent_dir,
        scan_mode="repo-sessions",
        policy=Policy(max_snapshots=1, grace_ms=0),
        count_objects=True,
    )
    assert real.rewritten and (real.unreachable_objects, real.freed_bytes) == expected


def test_sweep_count_over_budget_is_reported_as_not_counted(repo: Path) -> None:
    shas = snaps(repo, 3)
    gitrepo = GitRepo.discover(repo)
    head = Store(gitrepo).head()
    found = reclaimable(gitrepo, head, shas[-1:], budget_s=0)
    assert not found.complete and (found.objects, found.bytes) == (0, 0)
    assert reclaimable(gitrepo, None, shas).complete, "nothing to ask is a complete answer"


def test_the_key_is_the_same_from_every_worktree(repo: Path, tmp_path: Path) -> None:
    snaps(repo, 1)
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", "--detach", str(other))
    main_key = usage_key(GitRepo.discover(repo)).digest
    assert usage_key(GitRepo.discover(other)).digest == main_key
    git(other, "commit", "-q", "--allow-empty", "-m", "moves the other worktree's HEAD")
    assert usage_key(GitRepo.discover(repo)).digest != main_key, "--all includes that HEAD"


def test_retention_preview_over_budget_says_not_measured(
    repo: Path, agent_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ledger.doctor import preview_retention
    from tests.snapshotkit import retention

    shas = snaps(repo, 3)
    gitrepo = GitRepo.discover(repo)
    path = ledger_session(agent_dir, repo)
    op = build_op(bindings=[("e0", shas[0]), ("e1", shas[1])], current=shas[2])
    SessionAppender(path).append_custom(OP, op.to_data())
    settings = retention(max_snapshots=1, scan_mode="repo-sessions")
    exact = preview_retention(gitrepo, agent_dir, settings, path, budget_s=None)
    assert exact["wouldDrop"] >= 1 and exact["freedBytes"] > 0
    late = preview_retention(gitrepo, agent_dir, settings, path, budget_s=0)
    assert late["wouldDrop"] == exact["wouldDrop"]
    assert late["freedBytes"] is None and late["unreachableObjects"] is None
