"""Disk bounded by default (issue 26): the default retention, what doctor and sweep show, the space
given back in a shadow and in a user's repository, and nothing left behind by a kill -9
(docs/design.md#default-retention, docs/design.md#disk-upkeep). Real repositories, real git, real
processes."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.clock import FixedClock
from ledger.git.repo import GitRepo
from ledger.git.restore.journal import restore_open
from ledger.git.restore.run import restore_commit
from ledger.git.shadow.open import open_work_tree
from ledger.git.store.chain import STORE_REF, Store
from ledger.git.store.leftovers import PRUNE_GRACE_S, disk_usage, find_leftovers
from ledger.git.store.snapshot import take_snapshot
from ledger.git.store.upkeep import loose_estimate, our_loose_objects, run_upkeep
from ledger.record_models import build_op
from ledger.records import OP
from ledger.retention.scheduler import SweepScheduler
from ledger.session.store import SessionAppender, create_session_file
from ledger.settings import DEFAULT_RETENTION, Settings, load_settings, resolve_settings
from tests.cli.helpers import run_cli
from tests.gitkit import ROOT, git, one_commit_repo
from tests.snapshotkit import retention

DAY = 86_400_000


@pytest.fixture(autouse=True)
def upkeep_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests run the upkeep themselves, on loose objects they arrange: the store's own
    start after an append (tested in test_upkeep_every_entry_point.py) would pack them first."""
    monkeypatch.setenv("REWIND_AUTO_UPKEEP", "0")


def record(path: Path, when_ms: int, **op: object) -> None:
    SessionAppender(path, clock=FixedClock(when_ms)).append_custom(OP, build_op(**op).to_data())  # type: ignore[arg-type]


def label(path: Path, entry: str, when_ms: int) -> None:
    SessionAppender(path, clock=FixedClock(when_ms)).append_entry(
        {"type": "label", "targetId": entry, "label": "keep"}
    )


def snap(repo: GitRepo, root: Path, name: str, data: bytes) -> str:
    (root / name).write_bytes(data)
    return take_snapshot(repo, last_exact=None).commit


def startup_sweep(repo: Path | GitRepo, agent: Path, settings: Settings, path: Path, now_ms: int):
    gitrepo = repo if isinstance(repo, GitRepo) else GitRepo.discover(repo)
    scheduler = SweepScheduler(
        gitrepo, agent, settings, lambda: path, background=False, clock=FixedClock(now_ms)
    )
    scheduler.on_session_start()
    assert scheduler.drain_notices() == []
    return scheduler


# --- 1. the default retention ------------------------------------------------------------------


def test_absent_retention_is_the_default_and_false_turns_it_off(
    repo: Path, agent_dir: Path
) -> None:
    assert Settings().retention == DEFAULT_RETENTION
    assert load_settings(agent_dir, repo)[0].retention == DEFAULT_RETENTION
    assert DEFAULT_RETENTION.max_age_days == 30 and DEFAULT_RETENTION.pin_labeled_entries
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "settings.json").write_text('{"rewind": {"retention": false}}')
    effective = resolve_settings(agent_dir, repo)
    assert effective.settings.retention is None and effective.warnings == []
    assert ("rewind.retention", False, str(agent_dir / "settings.json")) in effective.rows()
    # An object keeps the reference's meaning (shared settings file): missing keys = unlimited.
    (agent_dir / "settings.json").write_text('{"rewind": {"retention": {"maxSnapshots": 9}}}')
    explicit = load_settings(agent_dir, repo)[0].retention
    assert explicit is not None and not explicit.implicit
    assert explicit.max_age_days is None and explicit.scan_mode == "ancestor-only"
    (agent_dir / "settings.json").write_text('{"rewind": {"retention": "yes"}}')
    settings, warnings = load_settings(agent_dir, repo)
    assert settings.retention == DEFAULT_RETENTION and "rewind.retention" in warnings[0]


def test_default_retention_drops_what_no_session_named_for_30_days_and_keeps_labels(
    repo: Path, agent_dir: Path
) -> None:
    gitrepo = GitRepo.discover(repo)
    now = int(time.time() * 1000)
    labeled, old, other, current = (
        snap(gitrepo, repo, "a.txt", f"{n}\n".encode()) for n in range(4)
    )
    path = create_session_file(agent_dir / "sessions", str(repo))
    record(path, now, bindings=[("e1", labeled), ("e2", old)])
    label(path, "e1", now)
    record(path, now, current=current)
    # An unrelated session (no parent link) of the same repository, active 20 days from now.
    unrelated = create_session_file(agent_dir / "sessions", str(repo))
    record(unrelated, now + 20 * DAY, bindings=[("x", other)])
    unnamed = snap(gitrepo, repo, "a.txt", b"manual checkpoint\n")  # `rewind snapshot` by hand
    later = now + 31 * DAY
    ((_, report),) = startup_sweep(repo, agent_dir, Settings(), path, later).reports
    reasons = {sha: report.plan.decisions[sha].reason for sha in (labeled, old, other, current)}
    assert reasons == {
        labeled: "pinned: label",
        old: "dropped: too old",
        other: "recent",  # read although not an ancestor: the default scans every session
        current: "pinned: current",
    }
    assert report.plan.decisions[unnamed].reason == "dropped: unreferenced"
    kept = set(Store(gitrepo).snapshots())
    assert kept == {labeled, other, current}


def test_default_retention_keeps_an_unnamed_snapshot_as_long_as_a_named_one(
    repo: Path, agent_dir: Path
) -> None:
    gitrepo = GitRepo.discover(repo)
    now = int(time.time() * 1000)
    current = snap(gitrepo, repo, "a.txt", b"live\n")
    path = create_session_file(agent_dir / "sessions", str(repo))
    record(path, now, current=current)
    unnamed = snap(gitrepo, repo, "a.txt", b"manual checkpoint\n")
    two_days = now + 2 * DAY
    ((_, report),) = startup_sweep(repo, agent_dir, Settings(), path, two_days).reports
    assert report.plan.decisions[unnamed].reason == "unrecorded"
    # The reference's meaning for an explicit object: an unnamed snapshot stays one day only.
    ((_, explicit),) = startup_sweep(repo, agent_dir, retention(), path, two_days).reports
    assert explicit.plan.decisions[unnamed].reason == "dropped: unreferenced"


def test_retention_false_keeps_everything(repo: Path, agent_dir: Path) -> None:
    gitrepo = GitRepo.discover(repo)
    now = int(time.time() * 1000)
    old, current = snap(gitrepo, repo, "a.txt", b"old\n"), snap(gitrepo, repo, "a.txt", b"new\n")
    path = create_session_file(agent_dir / "sessions", str(repo))
    record(path, now - 400 * DAY, bindings=[("e", old)])
    record(path, now, current=current)
    (agent_dir / "settings.json").write_text('{"rewind": {"retention": false}}')
    settings = load_settings(agent_dir, repo)[0]
    head = git(repo, "rev-parse", STORE_REF).strip()
    scheduler = startup_sweep(repo, agent_dir, settings, path, now + 400 * DAY)
    scheduler.on_shutdown()
    assert scheduler.reports == [] and scheduler.upkeeps == []
    assert git(repo, "rev-parse", STORE_REF).strip() == head


# --- 2. showing it -----------------------------------------------------------------------------


def test_doctor_and_sweep_dry_run_show_sizes_and_what_a_sweep_frees(
    repo: Path, agent_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gitrepo = GitRepo.discover(repo)
    now = int(time.time() * 1000)
    shas = [snap(gitrepo, repo, "data.bin", os.urandom(40_000)) for _ in range(3)]
    path = create_session_file(agent_dir / "sessions", str(repo))
    record(path, now - 40 * DAY, bindings=[("e0", shas[0]), ("e1", shas[1])])
    record(path, now, current=shas[2])
    head = git(repo, "rev-parse", STORE_REF).strip()

    doctor = run_cli(capsys, "--agent-dir", agent_dir, "doctor", "--json", cwd=repo)
    assert doctor.code == 0, doctor.err
    report = json.loads(doctor.out)
    assert report["store"]["bytes"] >= report["store"]["exclusiveBytes"] > 100_000
    assert report["store"]["looseObjects"] > 6, "3 snapshots, 3 keepalives, trees, blobs"
    assert report["retention"]["default"] and report["retention"]["wouldDrop"] == 2
    assert report["retention"]["freedBytes"] > 75_000, "two 40 kB random files"
    text = run_cli(capsys, "--agent-dir", agent_dir, "doctor", cwd=repo).out
    assert "a sweep now would drop 2 snapshots, about" in text and "of them loose" in text

    dry = run_cli(capsys, "--agent-dir", agent_dir, "sweep", "--dry-run", "--json", cwd=repo)
    plan = json.loads(dry.out)
    assert plan["dropped"] == 2 and plan["freedBytes"] == report["retention"]["freedBytes"]
    text = run_cli(capsys, "--agent-dir", agent_dir, "sweep", "--dry-run", cwd=repo).out
    assert "would drop 2" in text and "KiB) would become unreachable" in text
    assert git(repo, "rev-parse", STORE_REF).strip() == head, "doctor and a dry run change nothing"


# --- 3. giving the space back ------------------------------------------------------------------


def age_objects(git_dir: Path, seconds: float) -> None:
    """Make every file of the object store ``seconds`` older (time passing, as far as mtimes go)."""
    for directory, _dirs, files in os.walk(git_dir / "objects"):
        for name in files:
            path = os.path.join(directory, name)
            st = os.lstat(path)
            os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds))


def test_a_shadow_gives_dropped_snapshots_back_and_every_kept_one_restores_exactly(
    tmp_path: Path, agent_dir: Path
) -> None:
    plain = tmp_path / "scratch"
    plain.mkdir()
    shadow = open_work_tree(plain, agent_dir, create=True).repo
    contents = [os.urandom(300_000) for _ in range(4)]
    shas = [snap(shadow, plain, "data.bin", data) for data in contents]
    now = int(time.time() * 1000)
    path = create_session_file(agent_dir / "sessions", str(plain))
    record(path, now - 40 * DAY, bindings=[("e0", shas[0]), ("e1", shas[1])])
    record(path, now, bindings=[("e2", shas[2])])
    record(path, now, current=shas[3])
    blobs = [shadow.pygit2[shadow.tree_of(sha)]["data.bin"].id for sha in shas]  # type: ignore[index]
    age_objects(shadow.git_dir, 2 * PRUNE_GRACE_S)
    young = hash_object(plain, "written a moment ago, unreachable\n", git_dir=shadow.git_dir)
    before = disk_usage(shadow.git_dir / "objects")

    scheduler = startup_sweep(shadow, agent_dir, Settings(), path, now)
    ((_, sweep),) = scheduler.reports
    ((_, upkeep),) = scheduler.upkeeps
    assert sweep.rewritten and upkeep.action == "repacked-shadow" and upkeep.skipped is None
    after = disk_usage(shadow.git_dir / "objects")
    fresh = open_work_tree(plain, agent_dir, create=False).repo
    assert not any(fresh.commit_exists(dropped) for dropped in shas[:2]), "pruned"
    # The private capture index still names the first capture's blob (it is what a capture
    # builds on, so it stays); the second dropped snapshot's 300 kB are given back.
    assert fresh.object(str(blobs[1])) is None and before - after > 250_000, (before, after)
    fsck = subprocess.run(
        ["git", "--git-dir", str(shadow.git_dir), "fsck", "--connectivity-only", "--no-dangling"],
        capture_output=True,
        check=False,
    )
    assert fsck.returncode == 0, fsck.stderr
    assert fresh.object(young) is not None, "an unreachable object younger than the grace stays"
    for sha, data in zip(shas[2:], contents[2:], strict=True):
        restore_commit(fresh, sha)
        assert (plain / "data.bin").read_bytes() == data
    assert find_leftovers(fresh) == []


def test_repacks_within_the_grace_leave_no_superseded_pack_but_keep_a_young_one_with_news(
    tmp_path: Path, agent_dir: Path
) -> None:
    """The soak compresses months into minutes: with the hour's grace alone, every repack left
    the previous whole pack behind (a shadow reached 900 MB at 4,500 prompts). A young pack all
    of whose objects are in the new one goes; one holding anything else stays."""
    plain = tmp_path / "scratch"
    plain.mkdir()
    shadow = open_work_tree(plain, agent_dir, create=True).repo
    pack_dir = shadow.git_dir / "objects" / "pack"
    for n in range(3):
        snap(shadow, plain, "data.bin", os.urandom(100_000))
        report = run_upkeep(shadow, restore_open=lambda: False, force=True)
        assert report.action == "repacked-shadow" and report.skipped is None
        assert len(list(pack_dir.glob("pack-*.pack"))) == 1, f"round {n}: one pack"
    # A young pack with an object the new pack will not hold (unreachable, a moment old).
    loose = hash_object(plain, "only in the side pack\n", git_dir=shadow.git_dir)
    subprocess.run(
        ["git", "--git-dir", str(shadow.git_dir), "pack-objects", "-q", str(pack_dir / "pack")],
        input=(loose + "\n").encode(),
        capture_output=True,
        check=True,
    )
    snap(shadow, plain, "data.bin", os.urandom(100_000))
    run_upkeep(shadow, restore_open=lambda: False, force=True)
    packs = list(pack_dir.glob("pack-*.pack"))
    assert len(packs) == 2, "the side pack stays: its object is in no other"
    assert shadow.object(loose) is not None


def hash_object(cwd: Path, text: str, *, git_dir: Path | None = None) -> str:
    extra = ["--git-dir", str(git_dir)] if git_dir else []
    return (
        subprocess.run(
            ["git", *extra, "hash-object", "-w", "--stdin"],
            cwd=cwd,
            input=text.encode(),
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )


def crafted_blobs(count: int, prefix: str = "17") -> list[bytes]:
    """Contents whose blob ids start with ``prefix``: deterministic entries in ``objects/17``."""
    found, n = [], 0
    while len(found) < count:
        data = f"crafted {n}\n".encode()
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest().startswith(prefix):
            found.append(data)
        n += 1
    return found


def fingerprint(git_dir: Path, loose: list[str]) -> dict[str, str]:
    """The user's files that must not change: loose objects, packs, refs, reflogs, config."""
    paths = [git_dir / "objects" / oid[:2] / oid[2:] for oid in loose]
    for sub in ("objects/pack", "refs", "logs"):
        for directory, _dirs, files in os.walk(git_dir / sub):
            paths += [Path(directory) / name for name in files]
    paths += [git_dir / name for name in ("packed-refs", "config", "index", "HEAD")]
    return {
        str(p.relative_to(git_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in paths
        if p.is_file()
    }


def user_repository_with_our_loose_objects(tmp_path: Path, big: int = 0) -> tuple[Path, list[str]]:
    """A user repository with its own pack, loose objects and reflogs, and snapshots of ours
    whose loose objects put git's estimate over ``gc.auto`` = 1."""
    repo = one_commit_repo(tmp_path / "user", {"README.md": "hello\n"})
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    git(repo, "repack", "-adq")
    user_loose = [hash_object(repo, f"user {n}\n") for n in range(3)]
    git(repo, "config", "gc.auto", "1")
    gitrepo = GitRepo.discover(repo)
    for n, data in enumerate(crafted_blobs(3)):
        (repo / f"c{n}.txt").write_bytes(data)
    for n in range(big):
        (repo / f"big{n}.bin").write_bytes(os.urandom(200_000))
    take_snapshot(gitrepo, last_exact=None)
    (repo / "c0.txt").write_text("changed\n")
    take_snapshot(gitrepo, last_exact=None)
    return repo, user_loose


def test_our_loose_objects_are_packed_in_a_users_repository_and_nothing_of_theirs_changes(
    tmp_path: Path,
) -> None:
    repo, user_loose = user_repository_with_our_loose_objects(tmp_path)
    gitrepo = GitRepo.discover(repo)
    git_dir = repo / ".git"
    ours = our_loose_objects(gitrepo)
    assert len(ours) > 8 and loose_estimate(gitrepo) > 256
    before = fingerprint(git_dir, user_loose)
    kept = Store(gitrepo).snapshots()

    report = run_upkeep(gitrepo, restore_open=lambda: restore_open(gitrepo))
    assert report.action == "packed-ours" and report.packed_objects == len(ours)
    assert our_loose_objects(GitRepo.discover(repo)) == []
    after = fingerprint(git_dir, user_loose)
    new = {k for k in after if k not in before}
    assert {k: after[k] for k in before} == before, "the user's files are byte-identical"
    assert len(new) == 2 and all(k.startswith("objects/pack/pack-") for k in new), new
    assert all((git_dir / "objects" / o[:2] / o[2:]).is_file() for o in user_loose)
    git(repo, "fsck", "--connectivity-only", "--no-dangling")
    assert Store(GitRepo.discover(repo)).snapshots() == kept
    git(repo, "rev-list", "--objects", "--missing=error", STORE_REF)
    git(repo, "config", "gc.auto", "6700")
    again = GitRepo.discover(repo)
    assert run_upkeep(again, restore_open=lambda: False).action == "none", "below gc.auto"


def test_the_scheduler_packs_our_objects_in_the_background_once_over_gc_auto(
    tmp_path: Path, agent_dir: Path
) -> None:
    repo, _ = user_repository_with_our_loose_objects(tmp_path)
    scheduler = SweepScheduler(GitRepo.discover(repo), agent_dir, Settings(), lambda: None)
    scheduler.on_snapshot_added(9)
    assert not scheduler.running and scheduler.upkeeps == []
    scheduler.on_snapshot_added(1)
    scheduler.wait(timeout=60)
    assert [(reason, r.action) for reason, r in scheduler.upkeeps] == [("upkeep", "packed-ours")]
    assert scheduler.reports == [], "no sweep: only the upkeep"


# --- 4. kill -9 --------------------------------------------------------------------------------


UPKEEP_SCRIPT = """
import sys
from ledger.git.shadow.layout import reopen
from ledger.git.store.upkeep import mark_pending, run_upkeep
from pathlib import Path
repo = reopen(Path(sys.argv[1]), Path(sys.argv[2]))
mark_pending(repo)
run_upkeep(repo, restore_open=lambda: False, force=True)
"""


def kill_during_upkeep(root: Path, git_dir: Path) -> None:
    """Start the upkeep in a process of its own and SIGKILL it (and its git children) while it
    writes its pack."""
    proc = subprocess.Popen(
        [sys.executable, "-c", UPKEEP_SCRIPT, str(root), str(git_dir)],
        cwd=ROOT,
        start_new_session=True,
    )
    home = git_dir / "pi-rewind"
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            packs = list(home.glob("upkeep-*/tmp.pack")) if home.is_dir() else []
            if any(p.stat().st_size > 100_000 for p in packs if p.exists()):
                break
            time.sleep(0.002)
        assert proc.poll() is None, "the upkeep finished before it could be killed: more data"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("where", ["repository", "shadow"])
def test_a_killed_upkeep_leaves_nothing_doctor_does_not_name_and_sweep_does_not_remove(
    tmp_path: Path, agent_dir: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    if where == "repository":
        root, _ = user_repository_with_our_loose_objects(tmp_path, big=60)
        repo: GitRepo = GitRepo.discover(root)
    else:
        root = tmp_path / "scratch"
        root.mkdir()
        repo = open_work_tree(root, agent_dir, create=True).repo
        for n in range(60):
            (root / f"big{n}.bin").write_bytes(os.urandom(150_000))
        take_snapshot(repo, last_exact=None)
    loose_before = sorted(oid for oid, _ in our_loose_objects(repo))
    kill_during_upkeep(root, repo.git_dir)

    leftovers = find_leftovers(repo)
    assert leftovers and all(item.removable for item in leftovers), leftovers
    doctor = run_cli(capsys, "--agent-dir", agent_dir, "doctor", "--json", cwd=root)
    named = {item["path"] for item in json.loads(doctor.out)["leftovers"]}
    assert named == {str(item.path) for item in leftovers}
    assert sorted(oid for oid, _ in our_loose_objects(repo)) == loose_before, "nothing lost"

    swept = run_cli(capsys, "--agent-dir", agent_dir, "sweep", "--json", cwd=root)
    assert swept.code == 0, swept.err
    upkeep = json.loads(swept.out)["upkeep"]
    assert set(upkeep["leftoversRemoved"]) == named
    assert upkeep["action"] in ("packed-ours", "repacked-shadow"), "and then it completes"
    assert find_leftovers(repo) == []
    pack_dir = repo.common_dir / "objects" / "pack"
    assert not [n for n in os.listdir(pack_dir) if n.startswith(("tmp_", ".tmp-"))]
    for pack in pack_dir.glob("*.pack"):
        assert pack.with_suffix(".idx").exists(), "no pack without its index"
    subprocess.run(
        ["git", "--git-dir", str(repo.git_dir), "fsck", "--connectivity-only", "--no-dangling"],
        check=True,
        capture_output=True,
    )
