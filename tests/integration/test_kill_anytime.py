"""``kill -9`` at any moment of a capture, a sweep or a repack leaves nothing behind that
``rewind doctor`` does not name and ``rewind sweep`` does not remove (docs/design.md#disk-upkeep).

Real repositories (a user's repository, and a plain directory through its shadow repository,
docs/shadow.md), real ``rewind`` processes, real SIGKILLs: each command is started as a process
of its own and killed after a seeded random delay between 0 and its measured typical duration
(half the kills hit the whole process group, git children included; the other half hit only the
``rewind`` process and let its git children run on, as ``kill -9 <pid>`` does). Ten kills per
kind of repository, twenty in all, across:

- **capture**: ``rewind snapshot`` of a changed work tree;
- **sweep**: ``rewind sweep --scan repo-sessions --max-snapshots 1`` with older recorded
  snapshots to drop (a store rewrite, then the upkeep: a shadow is repacked after a drop);
- **repack**: ``rewind sweep`` when the upkeep is due and nothing is dropped (``gc.auto`` = 20 and
  loose objects of ours in ``objects/17``: our loose objects packed in a user's repository; a
  pending repack in a shadow).

After every kill: ``rewind doctor --json`` runs without a traceback; every temporary or lock
file in the git directory that was not there before the kills is named by the doctor (or
absent); ``rewind sweep`` then leaves none of them (git's own temporary objects in a user's
repository are only named, by design: ``git gc`` removes them; in a shadow they are removed once
older than the grace, which the test simulates by ageing them); ``git fsck --no-dangling``
passes; the store ref resolves and every snapshot it lists is readable in full; the user's refs,
reflogs, index, HEAD, config, packs and loose objects, and the work tree, are byte-identical.

Leftovers of a known defect (:data:`KNOWN_DEFECTS`, empty now) would be tolerated with a warning;
the two the exploration found are reproduced deterministically by the last tests of this module.

Seed: ``REWIND_KILL_SEED`` (default :data:`SEED`); each kill is printed with its delay so that a
failure can be replayed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ledger.clock import FixedClock
from ledger.git.repo import GitRepo
from ledger.git.shadow.layout import reopen
from ledger.git.shadow.open import open_work_tree
from ledger.git.store.chain import STALE_LOCK_S, STORE_REF, Store
from ledger.git.store.leftovers import PRUNE_GRACE_S, find_leftovers
from ledger.record_models import build_op
from ledger.records import OP
from ledger.session.store import SessionAppender, create_session_file
from tests.gitkit import ROOT, dead_pid, git, one_commit_repo

pytestmark = pytest.mark.slow

SEED = 20_260_531
KILLS_PER_KIND = 10
SCHEDULE = ("capture", "sweep", "repack") * 3 + ("capture",)
"""Ten kills per kind of repository: 4 captures, 3 sweeps, 3 repacks."""
GC_AUTO = 20
BIG_BYTES = 400_000
"""Two incompressible files of this size change per round: git has real work to be killed in."""
COMMAND_TIMEOUT_S = 60

KNOWN_DEFECTS: dict[str, re.Pattern[str]] = {}
"""Leftovers of a known, unfixed defect, tolerated with a warning (none now: libgit2's
``objects/tmp_object_git2_*`` and git's lock on the private index, which the exploration found,
are named and swept since; their reproductions are the last tests of this module)."""


# --- processes ---------------------------------------------------------------------------------


def rewind_env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "REWIND_SERVED": "0",  # capture here, never through a server
        "REWIND_AUTO_WATCH": "0",  # no background watcher outliving the test
        # The sweep's upkeep is the one killed here, on work a capture arranged: the store's own
        # background start after that capture would do the work first.
        "REWIND_AUTO_UPKEEP": "0",
    }


def rewind(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", *args],
        cwd=cwd,
        env=rewind_env(),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    assert "Traceback" not in proc.stderr, f"rewind {' '.join(args)}:\n{proc.stderr}"
    return proc


def rewind_ok(cwd: Path, *args: str) -> dict:
    proc = rewind(cwd, *args, "--json")
    assert proc.returncode == 0, f"rewind {' '.join(args)} failed:\n{proc.stderr}"
    return json.loads(proc.stdout)


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies do not count: nobody may reap
    an orphan in a container)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


@dataclass
class Kill:
    label: str
    delay_s: float
    whole_group: bool
    killed: bool
    """False: the command finished before the signal (not counted as a kill)."""
    stderr: str


def run_and_kill(cwd: Path, args: list[str], delay_s: float, whole_group: bool) -> Kill:
    """Start ``rewind ARGS`` in a session of its own, SIGKILL it after ``delay_s`` (its whole
    process group, or only the ``rewind`` process), and wait until none of its processes runs."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", *args],
        cwd=cwd,
        env=rewind_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        finished = proc.wait(timeout=delay_s) is not None
    except subprocess.TimeoutExpired:
        finished = False
    if not finished:
        if whole_group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=COMMAND_TIMEOUT_S)
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode("utf-8", "replace")
    proc.stderr.close()
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    while group_alive(proc.pid):  # git children of a killed rewind finish on their own
        assert time.monotonic() < deadline, f"rewind {args}: its children never ended"
        time.sleep(0.01)
    if finished:
        assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    return Kill(" ".join(args), delay_s, whole_group, not finished, stderr)


# --- the two kinds of repository ---------------------------------------------------------------


def crafted_blobs(prefix: str = "17") -> Iterator[bytes]:
    """Contents whose blob ids start with ``prefix``: deterministic loose files in
    ``objects/17``, the directory ``gc --auto`` (and our upkeep) estimates loose objects by."""
    n = 0
    while True:
        data = f"crafted for the loose estimate {n}\n".encode()
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest().startswith(prefix):
            yield data
        n += 1


@dataclass
class Site:
    kind: str
    root: Path
    """The work tree (the user's repository, or the plain directory)."""
    git_dir: Path
    area: Path
    """Scanned for leftovers: ``.git``, or the shadow's home (its ``git/`` and ``shadow.json``)."""
    agent_dir: Path
    session: Path
    rng: random.Random
    crafted: Iterator[bytes] = field(default_factory=crafted_blobs)
    round: int = 0
    recorded: int = 0
    user_loose: list[str] = field(default_factory=list)
    user_packs: list[Path] = field(default_factory=list)
    temporaries_before: set[str] = field(default_factory=set)
    listing_before: set[str] = field(default_factory=set)
    accepted: set[str] = field(default_factory=set)
    """git's own temporary objects in a user's repository: named, left to ``git gc``."""
    defects: list[str] = field(default_factory=list)
    hints_followed: list[str] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    typical_s: dict[str, float] = field(default_factory=dict)

    def repo(self) -> GitRepo:
        return reopen(self.root, self.git_dir)

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(
            ["git", "--git-dir", str(self.git_dir), "--work-tree", str(self.root), *args],
            cwd=self.root,
            capture_output=True,
            check=False,
        )
        if check:
            assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr.decode()}"
        return proc

    # --- changing the work tree and recording snapshots ---

    def change(self, *, crafted: int = 0) -> None:
        """A new round of changes: two incompressible files, and ``crafted`` new blobs that land
        in ``objects/17`` once captured."""
        self.round += 1
        for name in ("data-a.bin", "data-b.bin"):
            (self.root / name).write_bytes(self.rng.randbytes(BIG_BYTES))
        (self.root / "notes.txt").write_text(f"round {self.round}\n")
        for n in range(crafted):
            (self.root / f"loose-{self.round}-{n}.txt").write_bytes(next(self.crafted))

    def capture(self) -> str:
        """An unkilled ``rewind snapshot``, recorded in the session as a bound entry."""
        commit = rewind_ok(self.root, "snapshot")["commit"]
        self.recorded += 1
        op = build_op(bindings=[(f"entry-{self.recorded}", commit)])
        clock = FixedClock(int(time.time() * 1000))
        SessionAppender(self.session, clock=clock).append_custom(OP, op.to_data())
        return commit

    def make_upkeep_due(self) -> None:
        """Loose objects of ours in ``objects/17`` over ``gc.auto``; a shadow's repack pending."""
        self.change(crafted=3)
        self.capture()
        if self.kind == "shadow":
            (self.git_dir / "pi-rewind" / "upkeep-pending").touch()

    # --- what must not change ---

    def user_listing(self) -> set[str]:
        """Every path of the git directory outside what is ours (objects, ``pi-rewind/``, the
        store ref and its reflog): no file may appear there or go (a user's repository)."""
        if self.kind != "repository":
            return set()
        ours = ("objects", "pi-rewind", "refs/pi-rewind", "logs/refs/pi-rewind")
        found = set()
        for directory, dirs, files in os.walk(self.git_dir):
            for name in dirs + files:
                rel = (Path(directory) / name).relative_to(self.git_dir)
                if not any(rel.is_relative_to(mine) for mine in ours):
                    found.add(str(rel))
        return found

    def user_state(self) -> dict[str, str]:
        """Everything of the user's: refs, reflogs, packed-refs, index, HEAD, config, the packs
        and loose objects there were before (a user's repository); the work tree (both)."""
        paths: list[Path] = []
        if self.kind == "repository":
            for sub in ("refs", "logs"):
                for directory, _dirs, files in os.walk(self.git_dir / sub):
                    if "pi-rewind" in Path(directory).relative_to(self.git_dir).parts:
                        continue
                    paths += [Path(directory) / name for name in files]
            paths += [self.git_dir / n for n in ("packed-refs", "index", "HEAD", "config")]
            paths += self.user_packs
            paths += [self.git_dir / "objects" / o[:2] / o[2:] for o in self.user_loose]
        state = {
            str(p.relative_to(self.git_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in paths
            if p.is_file()
        }
        for path in sorted(self.root.rglob("*")):
            if ".git" in path.relative_to(self.root).parts or not path.is_file():
                continue
            state[f"worktree/{path.relative_to(self.root)}"] = hashlib.sha256(
                path.read_bytes()
            ).hexdigest()
        return state


def temporaries(area: Path) -> set[str]:
    """Temporary and lock files, interrupted work directories and packs without an index
    under ``area``, relative to it."""
    found: set[str] = set()
    for directory, dirs, files in os.walk(area):
        here = Path(directory)
        for name in dirs + files:
            path = here / name
            rel = str(path.relative_to(area))
            if (
                name.endswith((".lock", ".tmp"))
                or name.startswith(("tmp_", ".tmp-", "tmp-"))
                or (name.startswith("upkeep-") and name != "upkeep-pending")
                or (
                    here.name == "pack"
                    and name.endswith(".pack")
                    and not path.with_suffix(".idx").exists()
                )
            ):
                found.add(rel)
    return found


def user_repository(tmp_path: Path, agent_dir: Path, rng: random.Random) -> Site:
    root = one_commit_repo(tmp_path / "user", {"README.md": "hello\n", "src/app.py": "x = 1\n"})
    git(root, "commit", "-q", "--allow-empty", "-m", "second")
    git(root, "repack", "-adq")
    (root / "src" / "app.py").write_text("x = 2\n")
    git(root, "add", "src/app.py")  # a staged change: the user's index has content of its own
    git(root, "config", "gc.auto", str(GC_AUTO))
    site = Site(
        "repository",
        root,
        root / ".git",
        root / ".git",
        agent_dir,
        create_session_file(agent_dir / "sessions", str(root)),
        rng,
    )
    site.user_loose = [_hash_object(root, f"the user's own loose object {n}\n") for n in range(3)]
    site.user_packs = sorted((root / ".git" / "objects" / "pack").iterdir())
    return site


def _hash_object(cwd: Path, text: str) -> str:
    proc = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=cwd,
        input=text.encode(),
        capture_output=True,
        check=True,
    )
    return proc.stdout.decode().strip()


def shadow_directory(tmp_path: Path, agent_dir: Path, rng: random.Random) -> Site:
    root = tmp_path / "scratch"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "plan.md").write_text("a plain directory, not a repository\n")
    site = Site(
        "shadow",
        root,
        Path("/nonexistent"),
        Path("/nonexistent"),
        agent_dir,
        create_session_file(agent_dir / "sessions", str(root)),
        rng,
    )
    site.change()
    site.capture()  # creates the shadow
    shadow = open_work_tree(root, agent_dir, create=False).repo
    site.git_dir, site.area = shadow.git_dir, shadow.git_dir.parent
    site.git("config", "gc.auto", str(GC_AUTO))
    return site


# --- one kill and everything checked after it --------------------------------------------------


def sweep_args(op: str) -> list[str]:
    if op == "sweep":  # drops every recorded snapshot but the newest: a rewrite, then upkeep
        return ["sweep", "--scan", "repo-sessions", "--max-snapshots", "1", "--json"]
    return ["sweep", "--json"]  # the default retention drops nothing this young: upkeep only


def prepare(site: Site, op: str) -> list[str]:
    """Bring the site to where ``op`` has real work; the command to kill."""
    if op == "capture":
        site.change(crafted=1)
        return ["snapshot", "--json"]
    if op == "sweep":
        for _ in range(2):  # recorded snapshots to drop
            site.change()
            site.capture()
        return sweep_args(op)
    site.make_upkeep_due()
    return sweep_args(op)


def measure(site: Site) -> None:
    """Each command's typical duration, unkilled (the upper bound of the random delays)."""
    for op in ("capture", "sweep", "repack"):
        args = prepare(site, op)
        started = time.monotonic()
        out = rewind_ok(site.root, *args[:-1])
        site.typical_s[op] = time.monotonic() - started
        if op == "sweep":
            assert out["rewritten"] and out["dropped"] >= 2, out
        if op == "repack":
            expected = "packed-ours" if site.kind == "repository" else "repacked-shadow"
            assert out["upkeep"]["action"] == expected, out["upkeep"]


def kill_once(site: Site, op: str, number: int) -> Kill:
    args = prepare(site, op)
    before = site.user_state()
    attempts, bound = 0, site.typical_s[op]
    while True:  # a command that finished first is not a kill: draw again, earlier
        attempts += 1
        delay = site.rng.uniform(0, bound)
        whole_group = number % 2 == 0
        kill = run_and_kill(site.root, args, delay, whole_group)
        print(
            f"{site.kind} kill {number:2} {op:8} after {delay * 1000:6.1f} ms of "
            f"~{site.typical_s[op] * 1000:.0f} ms ({'group' if whole_group else 'rewind only'}"
            f"{'' if kill.killed else ', finished first'})"
        )
        if kill.killed:
            break
        assert attempts < 8, f"{op} always finished before its kill"
        bound /= 2
        if op != "capture":
            prepare(site, op)  # work for the next attempt
        else:
            site.change(crafted=1)
        before = site.user_state()
    site.kills.append(kill)
    assert "Traceback" not in kill.stderr, kill.stderr
    check_after_kill(site, f"{op} #{number}", before)
    return kill


def named_by(named: set[str], rel: str) -> bool:
    parts = Path(rel).parts
    return any(str(Path(*parts[:n])) in named for n in range(1, len(parts) + 1))


def check_after_kill(site: Site, label: str, before: dict[str, str]) -> None:
    site.accepted = {rel for rel in site.accepted if (site.area / rel).exists()}
    # 1. The doctor runs (exit 1 is a finding, e.g. a stale lock; a traceback never is).
    doctor = rewind(site.root, "doctor", "--json")
    assert doctor.returncode in (0, 1), f"{label}: doctor exit {doctor.returncode}: {doctor.stderr}"
    report = json.loads(doctor.stdout)
    leftovers = {Path(item["path"]): item for item in report["leftovers"]}
    named = {str(path.relative_to(site.area)) for path in leftovers}
    if report.get("storeLock"):
        named.add(str(Path(report["storeLock"]["path"]).relative_to(site.area)))

    # 2. Every new temporary or lock file is named (or gone).
    new = temporaries(site.area) - site.temporaries_before - site.accepted
    print(
        f"    after it: {sorted(new) or 'no temporary file'}; doctor named {sorted(named) or '-'}"
        f"; private index {report.get('privateIndex')}"
    )
    unnamed = {rel for rel in new if not named_by(named, rel)}
    known = {rel for rel in unnamed if any(p.match(rel) for p in KNOWN_DEFECTS.values())}
    for rel in sorted(known):
        site.defects.append(f"{label}: {rel}")
        warnings.warn(f"known defect after {site.kind} {label}: {rel} not named", stacklevel=1)
    assert not unnamed - known, (
        f"{site.kind} {label}: left {sorted(unnamed - known)} that rewind doctor does not name "
        f"(it named {sorted(named)})"
    )

    # 3. A killed ref update leaves git's lock on the store ref: named at once, and once stale
    # (10 s) a problem whose hint says to remove it. Let the time pass; the sweep below removes it.
    if report.get("storeLock"):
        lock = Path(report["storeLock"]["path"])
        st = os.lstat(lock)
        os.utime(lock, (st.st_atime, st.st_mtime - 2 * STALE_LOCK_S), follow_symlinks=False)
        stale = rewind(site.root, "doctor", "--json")
        hint = json.loads(stale.stdout)["hint"] or ""
        assert stale.returncode == 1 and f"rm '{lock}'" in hint, (label, stale.stdout)
        site.hints_followed.append(f"{label}: {hint} (rewind sweep removed it)")

    # 4. What the doctor says only time removes: git's own temporaries. In a shadow (ours
    # alone) sweep removes them once older than the grace: let that time pass.
    for path, item in leftovers.items():
        rel = str(path.relative_to(site.area))
        if item["removable"]:
            continue
        assert item["what"] == "git temporary file", f"{label}: {item}"
        if site.kind == "shadow":
            st = os.lstat(path)
            os.utime(path, (st.st_atime, st.st_mtime - 2 * PRUNE_GRACE_S), follow_symlinks=False)
        else:
            site.accepted.add(rel)  # git gc's to remove, after gc.pruneExpire

    # 5. The sweep the doctor's leftovers point to removes the rest.
    swept = rewind_ok(site.root, "sweep")
    assert swept["upkeep"]["skipped"] is None, f"{label}: {swept['upkeep']}"
    left = temporaries(site.area) - site.temporaries_before - site.accepted
    left_known = {rel for rel in left if any(p.match(rel) for p in KNOWN_DEFECTS.values())}
    left -= left_known
    assert not left, f"{site.kind} {label}: rewind sweep left {sorted(left)}"
    for rel in left_known:
        site.accepted.add(rel)  # reported once; each known defect has its reproduction below
    repo = site.repo()
    assert [item for item in find_leftovers(repo) if item.removable] == []
    if site.kind == "shadow":
        assert find_leftovers(repo) == [], f"{label}: aged git temporaries are removed"

    # 6. Sound object store, readable store.
    fsck = site.git("fsck", "--no-dangling", "--no-progress", check=False)
    assert fsck.returncode == 0, f"{label}: git fsck: {fsck.stderr.decode()}"
    site.git("rev-parse", "--verify", "-q", f"{STORE_REF}^{{commit}}")
    snapshots = Store(repo).snapshots()
    assert snapshots, f"{label}: the store lists no snapshot"
    site.git("rev-list", "--objects", "--missing=error", *snapshots)
    for sha in snapshots:
        site.git("ls-tree", "-r", "--full-tree", sha)

    # 7. Nothing of the user's changed, appeared or went.
    assert site.user_state() == before, f"{site.kind} {label}: the user's files changed"
    assert site.user_listing() == site.listing_before, f"{label}: the git directory's listing"


# --- the test ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["repository", "shadow"])
def test_kill_9_anytime_leaves_nothing_unnamed_or_unswept(
    tmp_path: Path, agent_dir: Path, kind: str
) -> None:
    seed = int(os.environ.get("REWIND_KILL_SEED", SEED)) + (0 if kind == "repository" else 1)
    rng = random.Random(seed)
    started = time.monotonic()
    make = user_repository if kind == "repository" else shadow_directory
    site = make(tmp_path, agent_dir, rng)
    site.change()
    site.capture()
    measure(site)
    site.temporaries_before = temporaries(site.area)
    site.listing_before = site.user_listing()
    assert all(
        rel.endswith(("pi-rewind/lock", "pi-rewind/serve.lock")) for rel in site.temporaries_before
    ), site.temporaries_before

    for number, op in enumerate(SCHEDULE[:KILLS_PER_KIND], start=1):
        kill_once(site, op, number)

    assert sum(kill.killed for kill in site.kills) == KILLS_PER_KIND
    print(
        f"{kind}: {KILLS_PER_KIND} kills (seed {seed}) in {time.monotonic() - started:.1f} s; "
        f"typical ms { ({k: round(v * 1000) for k, v in site.typical_s.items()}) }; "
        f"known defects hit: {site.defects or 'none'}; doctor hints followed: "
        f"{site.hints_followed or 'none'}; git temporaries left to git gc: "
        f"{sorted(site.accepted) or 'none'}"
    )


# --- the known defects, reproduced deterministically ------------------------------------------
#
# Each kills a real process at the moment its leftover exists (polled), instead of at a random
# moment, and asserts what the random kills above may only hit now and then.

LIBGIT2_WRITE = """
import os, sys, pygit2
pygit2.Repository(sys.argv[1]).create_blob(os.urandom(int(sys.argv[2])))
"""


def kill_when_present(command: list[str], cwd: Path, pattern: str, where: Path) -> Path | None:
    """Run ``command`` in a session of its own and SIGKILL its process group as soon as a file
    matching ``pattern`` under ``where`` exists; that file, or None when it finished first."""
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=rewind_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    found = None
    try:
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline:
            found = next(iter(where.glob(pattern)), None)
            if found is not None:
                break
            time.sleep(0.0005)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        while group_alive(proc.pid):
            time.sleep(0.01)
    return found if found is not None and found.exists() else None


def make_site(kind: str, tmp_path: Path, agent_dir: Path) -> Site:
    site = (user_repository if kind == "repository" else shadow_directory)(
        tmp_path, agent_dir, random.Random(SEED)
    )
    site.change()
    site.capture()
    return site


@pytest.mark.parametrize("kind", ["repository", "shadow"])
def test_doctor_names_libgit2_temporary_object(tmp_path: Path, agent_dir: Path, kind: str) -> None:
    site = make_site(kind, tmp_path, agent_dir)
    for _attempt in range(3):
        leftover = kill_when_present(
            [sys.executable, "-c", LIBGIT2_WRITE, str(site.git_dir), str(48 << 20)],
            site.root,
            "tmp_object_git2_*",
            site.git_dir / "objects",
        )
        if leftover is not None:
            break
    else:
        pytest.skip("the object write finished before it could be killed")
    doctor = rewind(site.root, "doctor", "--json")
    named = {item["path"]: item for item in json.loads(doctor.stdout)["leftovers"]}
    assert str(leftover) in named, f"{leftover} is not named by rewind doctor: {sorted(named)}"
    if kind == "shadow":  # ours alone: removed by a sweep once older than the grace
        st = os.lstat(leftover)
        os.utime(leftover, (st.st_atime, st.st_mtime - 2 * PRUNE_GRACE_S))
        rewind_ok(site.root, "sweep")
        assert not leftover.exists()


@pytest.mark.parametrize("kind", ["repository", "shadow"])
def test_doctor_names_a_killed_captures_index_lock(
    tmp_path: Path, agent_dir: Path, kind: str
) -> None:
    site = make_site(kind, tmp_path, agent_dir)
    lock = site.git_dir / "pi-rewind" / "index.lock"
    for _attempt in range(5):  # caught at the very end of a short hold, it may be gone: again
        for n in range(12):  # a capture with real hashing to do while git holds index.lock
            (site.root / f"bulk-{n}.bin").write_bytes(site.rng.randbytes(1 << 20))
        leftover = kill_when_present(
            [sys.executable, "-m", "ledger", "snapshot"], site.root, "index.lock", lock.parent
        )
        if leftover is not None:
            break
    else:
        pytest.skip("the capture finished before git took index.lock")
    doctor = rewind(site.root, "doctor", "--json")
    assert doctor.returncode in (0, 1), doctor.stderr
    named = {item["path"] for item in json.loads(doctor.stdout)["leftovers"]}
    assert str(lock) in named, f"{lock} is not named by rewind doctor: {sorted(named)}"
    rewind_ok(site.root, "sweep")
    assert not lock.exists(), "rewind sweep leaves it"


@pytest.mark.parametrize("kind", ["repository", "shadow"])
def test_a_sweep_removes_a_dead_swaps_lock_on_the_store_ref_and_leaves_gits_own(
    tmp_path: Path, agent_dir: Path, kind: str
) -> None:
    """A swap killed between taking and renaming ``store.lock`` (1 in 60 capture kills) made
    every later capture fail until someone removed the lock by hand. Its lock names its owner,
    who is gone: the sweep removes it at once. A lock that is not rewind's (git's own) is never
    removed by age (issue 32: age proves nothing; tests/integration/test_store_lock_owner.py)."""
    from ledger.git.liveness import Owner
    from ledger.git.store.refswap import LOCK_TAG

    site = make_site(kind, tmp_path, agent_dir)
    common = site.git_dir
    lock = common / (STORE_REF + ".lock")
    lock.write_text("0" * 40 + "\n")
    st = os.lstat(lock)
    os.utime(lock, (st.st_atime, st.st_mtime - 2 * STALE_LOCK_S))
    rewind_ok(site.root, "sweep")
    assert lock.exists(), "git's own lock: named by the doctor, never removed by rewind"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    owner = Owner(int(dead.stdout), None, None, Owner.current().host)
    lock.write_text(f"{LOCK_TAG} {owner.to_fields()} flock=1\n")
    swept = rewind_ok(site.root, "sweep")
    assert not lock.exists()
    assert any(str(lock) == p for p in swept["upkeep"]["leftoversRemoved"]), swept["upkeep"]
    site.change()
    site.capture()  # captures work again


@pytest.mark.parametrize("kind", ["repository", "shadow"])
def test_doctor_names_a_killed_rewrites_temporary_of_a_private_file(
    tmp_path: Path, agent_dir: Path, kind: str
) -> None:
    """A capture killed in its last millisecond left ``last-snapshot.json.<pid>.tmp`` (found by
    the test above in CI, seed 1 shadow kill 7); in a shadow, also its ``HEAD``'s temporary.
    Older versions' unlocked temporaries carry no lock: their writer is gone."""
    site = make_site(kind, tmp_path, agent_dir)
    gone = dead_pid()  # older versions named their unlocked temporaries by the writer's pid
    left = [site.git_dir / "pi-rewind" / f"last-snapshot.json.{gone}.tmp"]
    if kind == "shadow":
        left += [site.git_dir / f"HEAD.{gone}.tmp", site.git_dir / "info" / f"exclude.{gone}.tmp"]
    for path in left:
        path.write_text("{}")
    doctor = rewind(site.root, "doctor", "--json")
    assert doctor.returncode in (0, 1), doctor.stderr
    named = {item["path"] for item in json.loads(doctor.stdout)["leftovers"]}
    assert {str(p) for p in left} <= named, f"not named: {sorted(named)}"
    rewind_ok(site.root, "sweep")
    assert not [p for p in left if p.exists()], "rewind sweep leaves them"
    assert not temporaries(site.area) - {
        rel for rel in temporaries(site.area) if rel.endswith(("pi-rewind/lock", "serve.lock"))
    }
