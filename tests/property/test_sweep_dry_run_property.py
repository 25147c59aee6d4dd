"""A dry run's decision is what the real sweep then does, over generated histories on real git.

Issue 32, item 8: ``rewind sweep --dry-run`` printed "the store already keeps exactly these
snapshots: nothing to rewrite" and the real sweep then rewrote the store. The dry run inferred
that line from counting no unreachable objects; the states below (no store ref, a ref pointing
straight at a snapshot, a chain another ref also reaches, snapshots that fell out of the store)
made the count 0 while the run rewrote. Now both print :func:`decide_sweep`'s one value.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.cli.maintain import _sweep_text
from ledger.clock import FixedClock
from ledger.git.repo import GitRepo
from ledger.git.store.chain import STORE_REF, Store
from ledger.git.store.snapshot import take_snapshot
from ledger.record_models import build_op
from ledger.records import OP
from ledger.retention.plan import DAY_MS, Policy
from ledger.retention.sweep import SweepReport, run_sweep
from ledger.session.store import SessionAppender, create_session_file
from ledger.settings import SnapshotSettings
from tests.gitkit import git, init_repo

SETTINGS = SnapshotSettings(max_untracked_file_bytes=0, protected_dirs=())
STATES = ["intact", "no-ref", "head-is-a-snapshot", "fell-out", "another-ref", "recorded-only"]

history = st.fixed_dictionaries(
    {
        "snapshots": st.integers(2, 5),
        # per snapshot: None (never recorded) or the age in days of the op naming it
        "ages": st.lists(st.none() | st.integers(0, 45), min_size=5, max_size=5),
        "undo": st.booleans(),
        "state": st.sampled_from(STATES),
        "max_snapshots": st.none() | st.integers(0, 3),
        "max_age_days": st.none() | st.sampled_from([1.0, 10.0, 30.0]),
        "session": st.booleans(),
    }
)


def _build(root: Path, case: dict[str, object], now_ms: int) -> tuple[Path, Path, Path | None]:
    repo = init_repo(root / "repo")
    agent_dir = root / "agent"
    gitrepo = GitRepo.discover(repo)
    count = int(str(case["snapshots"]))
    ages = list(case["ages"])  # type: ignore[call-overload]
    shas: list[str] = []
    for n in range(count):
        (repo / "file.txt").write_text(f"version {n}\n")
        # Commit times spread over the last days: old unrecorded snapshots are dropped.
        age = ages[n] if ages[n] is not None else 3 * n
        clock = FixedClock(now_ms - age * DAY_MS)
        shas.append(take_snapshot(gitrepo, SETTINGS, last_exact=None, clock=clock).commit)
    session: Path | None = None
    if case["session"]:
        session = create_session_file(agent_dir / "sessions", str(repo))
        for n, sha in enumerate(shas):
            if ages[n] is None:
                continue
            appender = SessionAppender(session, clock=FixedClock(now_ms - ages[n] * DAY_MS))
            undo = shas[n - 1] if case["undo"] and n > 0 and n == count - 1 else None
            data = build_op(current=sha, undo=undo, bindings=[(f"entry-{n}", sha)])
            appender.append_custom(OP, data.to_data())
    state = case["state"]
    if state == "no-ref":
        git(repo, "update-ref", "-d", STORE_REF)
    elif state == "head-is-a-snapshot":
        git(repo, "update-ref", STORE_REF, shas[0])
    elif state == "fell-out":  # the chain as it was after the first snapshot
        git(repo, "update-ref", STORE_REF, f"{STORE_REF}~{count - 1}")
    elif state == "another-ref":  # a backup of the chain: nothing a rewrite drops is unreachable
        git(repo, "update-ref", "refs/backup/store", STORE_REF)
    elif state == "recorded-only":  # every recorded snapshot kept, the store otherwise empty
        git(repo, "update-ref", "-d", STORE_REF)
        store = Store(gitrepo)
        from ledger.git.store.chain import git_identity

        for sha in shas:
            store.append(sha, git_identity(gitrepo), now_ms // 1000, 0)
    return repo, agent_dir, session


def _sweep(
    repo: Path, agent_dir: Path, session: Path | None, policy: Policy, now_ms: int, dry: bool
) -> SweepReport:
    return run_sweep(
        GitRepo.discover(repo),
        session,
        agent_dir,
        scan_mode="ancestor-only",
        policy=policy,
        dry_run=dry,
        clock=FixedClock(now_ms),
        count_objects=True,
    )


def _head(repo: Path) -> str:
    return git(repo, "rev-parse", "-q", "--verify", STORE_REF, check=False).strip()


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(history)
def test_the_dry_run_decision_is_what_the_sweep_then_does(case: dict[str, object]) -> None:
    now_ms = int(time.time() * 1000)
    policy = Policy(
        max_snapshots=case["max_snapshots"],  # type: ignore[arg-type]
        max_age_days=case["max_age_days"],  # type: ignore[arg-type]
    )
    with tempfile.TemporaryDirectory(prefix="dry-run-") as tmp:
        repo, agent_dir, session = _build(Path(tmp), case, now_ms)
        head_before = _head(repo)
        dry = _sweep(repo, agent_dir, session, policy, now_ms, dry=True)
        assert _head(repo) == head_before, "a dry run changes nothing"
        real = _sweep(repo, agent_dir, session, policy, now_ms, dry=False)

        assert real.decision == dry.decision
        assert real.rewritten == dry.decision.rewrites
        assert real.preserved == dry.preserved == (dry.decision.action == "preserve")
        kept_after = set(Store(GitRepo.discover(repo)).snapshots())
        if dry.decision.rewrites:
            assert kept_after == set(dry.decision.keep)
            assert kept_after != set() and _head(repo) != head_before
        else:
            assert _head(repo) == head_before

        # What the dry run prints is that decision, never an inference from object counts.
        text = _sweep_text(dry)
        said_nothing = "nothing to rewrite" in text
        said_would = "would rewrite" in text or "would create" in text
        if dry.sessions_read:
            assert said_nothing == (dry.decision.action == "unchanged"), text
            assert said_would == dry.decision.rewrites, text
