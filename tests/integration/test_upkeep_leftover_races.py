"""What a killed upkeep or restore leaves is removed only when its owner is provably gone, and never
a complete pack a live upkeep just installed (issue 32, review findings 1, 4 and 6;
docs/design.md#disk-upkeep). Real repositories, real git, real processes; the only stand-in is a
wrapper around our own functions that acts, at the exact point of the race, as the other process
would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ledger.git.store.leftovers as leftovers_mod
import ledger.git.store.upkeep as upkeep_mod
from ledger.git.liveness import take_lock
from ledger.git.private import make_private_dir, private_dir
from ledger.git.repo import GitRepo
from ledger.git.store.autoupkeep import CHILD_PATH_SETUP
from ledger.git.store.chain import STORE_REF
from ledger.git.store.leftovers import (
    MOVE_FILE,
    OWNER_FILE,
    UPKEEP_PREFIX,
    Leftover,
    clean_leftovers,
    find_leftovers,
)
from ledger.git.store.loose import FLOOR_FILE, loose_floor, save_floor
from ledger.git.store.upkeep import UpkeepReport, pack_ours, try_upkeep_lock
from tests.gitkit import dead_pid, git, lock_holder, run_python


@pytest.fixture(autouse=True)
def upkeep_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """No detached upkeep of the store's own: these tests arrange the objects themselves."""
    monkeypatch.setenv("REWIND_AUTO_UPKEEP", "0")


def _our_objects(repo: Path, count: int = 3) -> list[str]:
    """Loose objects reachable only from the store ref (blobs, a tree, a commit)."""
    blobs = []
    for n in range(count):
        path = repo / f"ours-{n}.txt"
        path.write_text(f"ours {n}\n" * 50)
        blobs.append(git(repo, "hash-object", "-w", str(path)).strip())
        path.unlink()
    listing = "".join(f"100644 blob {b}\tours-{n}.txt\n" for n, b in enumerate(blobs))
    tree = subprocess.run(
        ["git", "mktree"], cwd=repo, input=listing, capture_output=True, text=True, check=True
    ).stdout.strip()
    commit = git(repo, "commit-tree", tree, "-m", "snapshot").strip()
    git(repo, "update-ref", STORE_REF, commit)
    return [*blobs, tree, commit]


def _loose(repo: Path, oid: str) -> Path:
    return repo / ".git" / "objects" / oid[:2] / oid[2:]


def _build_pack(repo: Path, oids: list[str], where: Path) -> str:
    """The pack (and its index) of ``oids``, built as the upkeep builds it, in ``where``."""
    where.mkdir(parents=True, exist_ok=True)
    pack = where / "tmp.pack"
    with open(pack, "wb") as out:
        subprocess.run(
            ["git", "pack-objects", "--stdout", "-q", "--delta-base-offset"],
            cwd=repo,
            input="".join(f"{o}\n" for o in oids).encode(),
            stdout=out,
            check=True,
        )
    out_idx = git(repo, "index-pack", "--no-rev-index", "-o", str(where / "tmp.idx"), str(pack))
    return out_idx.split()[-1]


def _killed_upkeep_with_moved_pack(repo: Path, oids: list[str]) -> tuple[Path, Path, Path]:
    """What upkeep A killed after ``os.rename(tmp.pack)`` leaves: its directory (nobody holds
    its ``owner.lock``) naming the pack in ``move.json``, and ``pack-X.pack`` without ``.idx``.
    Returns (its directory, the pack, the index a live upkeep would build for the same
    objects)."""
    home = make_private_dir(repo / ".git")
    directory = home / f"{UPKEEP_PREFIX}999999-deadbeef"
    name = _build_pack(repo, oids, directory)
    (directory / OWNER_FILE).touch()
    (directory / MOVE_FILE).write_text(json.dumps({"pack": name}))
    pack_dir = repo / ".git" / "objects" / "pack"
    pack_dir.mkdir(exist_ok=True)
    moved = pack_dir / f"pack-{name}.pack"
    os.rename(directory / "tmp.pack", moved)
    spare = repo / "spare"  # the live upkeep's own build of the very same pack
    assert _build_pack(repo, oids, spare) == name, "pack names repeat for the same content"
    os.unlink(spare / "tmp.pack")
    return directory, moved, spare / "tmp.idx"


def _readable(repo: Path, oids: list[str]) -> bool:
    return all(
        subprocess.run(["git", "cat-file", "-e", oid], cwd=repo, check=False).returncode == 0
        for oid in oids
    )


@pytest.mark.parametrize("live_upkeep", ["still-running", "finished"])
def test_sweep_never_removes_a_pack_a_live_upkeep_installed_after_the_sweep_looked(
    repo: Path, monkeypatch: pytest.MonkeyPatch, live_upkeep: str
) -> None:
    """Finding 1: the sweep lists A's pack without index; before it unlinks, upkeep B (holding
    the upkeep lock) installs the same pack name with its index and deletes the loose copies.
    The sweep must then leave the complete pack alone, or the objects are lost."""
    oids = _our_objects(repo)
    directory, moved, idx = _killed_upkeep_with_moved_pack(repo, oids)
    gitrepo = GitRepo.discover(repo)
    held: list[int] = []
    real_find = leftovers_mod.find_leftovers

    def find_then_live_upkeep_installs(r: GitRepo, *, now: float | None = None) -> list[Leftover]:
        found = real_find(r, now=now)
        assert moved in [item.path for item in found if item.removable]
        fd = try_upkeep_lock(r)  # upkeep B, as it installs: under the upkeep lock
        assert fd is not None
        os.rename(idx, moved.with_suffix(".idx"))
        for oid in oids:
            _loose(repo, oid).unlink()
        if live_upkeep == "still-running":
            held.append(fd)
        else:
            os.close(fd)
        return found

    monkeypatch.setattr(leftovers_mod, "find_leftovers", find_then_live_upkeep_installs)
    try:
        removed = [item.path for item in clean_leftovers(gitrepo)]
    finally:
        for fd in held:
            os.close(fd)
    assert moved not in removed
    assert moved.is_file() and moved.with_suffix(".idx").is_file(), "the complete pack survives"
    assert _readable(repo, oids), "every object is still there, in the pack"
    monkeypatch.undo()
    # Once nothing races it, A's directory goes (its pack is complete now: no leftover).
    monkeypatch.setenv("REWIND_AUTO_UPKEEP", "0")
    clean_leftovers(gitrepo)
    assert not directory.exists() and moved.is_file() and _readable(repo, oids)


def test_a_pack_without_index_of_a_killed_upkeep_is_removed_when_no_upkeep_runs(
    repo: Path,
) -> None:
    """The lock does not stop the ordinary case: a killed upkeep's moved pack (its objects are
    still loose) and directory are named and removed."""
    oids = _our_objects(repo)
    directory, moved, _idx = _killed_upkeep_with_moved_pack(repo, oids)
    gitrepo = GitRepo.discover(repo)
    assert {directory, moved} <= {i.path for i in find_leftovers(gitrepo) if i.removable}
    removed = {item.path for item in clean_leftovers(gitrepo)}
    assert {directory, moved} <= removed
    assert not moved.exists() and not directory.exists() and _readable(repo, oids)


def test_a_killed_upkeeps_pack_stays_while_another_upkeep_holds_the_lock(repo: Path) -> None:
    """Busy upkeep lock: neither the pack nor the directory that names it is removed (the
    running upkeep removes them itself, under the lock)."""
    oids = _our_objects(repo)
    directory, moved, _idx = _killed_upkeep_with_moved_pack(repo, oids)
    gitrepo = GitRepo.discover(repo)
    fd = try_upkeep_lock(gitrepo)
    assert fd is not None
    try:
        removed = {item.path for item in clean_leftovers(gitrepo)}
    finally:
        os.close(fd)
    assert not {directory, moved} & removed and moved.exists() and directory.exists()
    removed = {item.path for item in clean_leftovers(gitrepo, upkeep_lock_held=False)}
    assert {directory, moved} <= removed


def test_pack_ours_deletes_no_loose_copy_when_its_pack_vanished(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: if anything removes the pack pack_ours just installed, the loose copies
    are the only ones left and must stay."""
    oids = _our_objects(repo)
    gitrepo = GitRepo.discover(repo)
    real_install = upkeep_mod._install_pack

    def install_then_stale_unlink(r: GitRepo, work: Path, name: str) -> bool:
        installed = real_install(r, work, name)
        os.unlink(repo / ".git" / "objects" / "pack" / f"pack-{name}.pack")  # a stale sweep
        return installed

    monkeypatch.setattr(upkeep_mod, "_install_pack", install_then_stale_unlink)
    report = UpkeepReport()
    pack_ours(gitrepo, report, lambda: False)
    assert report.removed_loose == 0 and report.skipped is not None
    assert all(_loose(repo, oid).is_file() for oid in oids)
    for idx in (repo / ".git" / "objects" / "pack").glob("*.idx"):
        idx.unlink()  # the orphan index (git would complain about its missing pack)
    assert _readable(repo, oids)


# --- finding 4: the restore's scratch tree, the floor's temporary ------------------------------


def _child_in_scratch(repo: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A real process inside the restore's ignore-check scratch tree, stopped there."""
    code = (
        "import sys, time\n"
        "from ledger.git.repo import GitRepo\n"
        "from ledger.git.restore.ignored import _scratch\n"
        f"repo = GitRepo.discover({str(repo)!r})\n"
        "with _scratch(repo) as scratch:\n"
        "    (scratch / '.gitignore').write_text('*.log\\n')\n"
        "    print(scratch, flush=True)\n"
        "    time.sleep(120)\n"
    )
    child = run_python(code, cwd=repo)
    assert child.stdout is not None
    line = child.stdout.readline().decode().strip()
    assert line, child.stderr.read().decode() if child.stderr else "no output"
    return child, Path(line)


def test_a_killed_restores_scratch_tree_is_named_and_removed_a_live_one_never(
    repo: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    gitrepo = GitRepo.discover(repo)
    live, live_scratch = _child_in_scratch(repo)
    dead, dead_scratch = _child_in_scratch(repo)
    children += [live, dead]
    assert live_scratch.parent == private_dir(repo / ".git")
    os.kill(live.pid, signal.SIGSTOP)  # stopped, however long: still its owner's
    try:
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait()
        named = {i.path for i in find_leftovers(gitrepo) if i.removable}
        assert dead_scratch in named, "a killed restore's scratch tree is named"
        assert live_scratch not in named
        assert not any(str(p).startswith(str(live_scratch)) for p in named)
        removed = {i.path for i in clean_leftovers(gitrepo)}
        assert dead_scratch in removed and not dead_scratch.exists()
        assert live_scratch.is_dir() and (live_scratch / ".gitignore").is_file()
        assert not [p for p in private_dir(repo / ".git").iterdir() if str(dead.pid) in p.name]
    finally:
        os.kill(live.pid, signal.SIGCONT)
    assert [i for i in find_leftovers(gitrepo) if i.removable] == []


def test_a_killed_upkeeps_floor_temporary_is_named_and_removed_a_live_one_never(
    repo: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    gitrepo = GitRepo.discover(repo)
    home = make_private_dir(repo / ".git")
    dead = home / f"{FLOOR_FILE}.{dead_pid()}.tmp"  # what a kill inside save_floor left
    dead.write_text("12 3\n")
    live = home / f"{FLOOR_FILE}.cafe0001.tmp"
    children.append(lock_holder(live, cwd=repo))  # a live writer holding its temporary
    named = {i.path for i in find_leftovers(gitrepo) if i.removable}
    assert dead in named and live not in named
    removed = {i.path for i in clean_leftovers(gitrepo)}
    assert dead in removed and not dead.exists() and live.exists()
    save_floor(gitrepo, 7, 1)
    assert loose_floor(gitrepo) == (7, 1)
    assert sorted(p.name for p in home.glob(f"{FLOOR_FILE}.*.tmp")) == [live.name]
    assert take_lock(home / "probe") is not None  # flock works here: the test judged by it


def test_a_killed_authorship_rewrites_temporary_is_named_and_removed_a_live_one_never(
    repo: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    """The authorship index is rewritten through ``authorship.idx.<pid>.<ns>.tmp``, held (its
    flock) from creation through its rename: a ``kill -9`` leaves one that nothing else would
    ever remove; a stopped writer's is never touched."""
    gitrepo = GitRepo.discover(repo)
    home = make_private_dir(repo / ".git")
    dead = (
        home / f"authorship.idx.{dead_pid()}.{time.monotonic_ns()}.tmp"
    )  # what a kill inside a rewrite left
    dead.write_bytes(b"pi-rewind-authorship 1 complete\n")
    live = home / f"authorship.idx.{os.getpid()}.{time.monotonic_ns()}.tmp"
    children.append(lock_holder(live, cwd=repo))  # a live writer holding its temporary
    named = {i.path for i in find_leftovers(gitrepo) if i.removable}
    assert dead in named and live not in named
    removed = {i.path for i in clean_leftovers(gitrepo)}
    assert dead in removed and not dead.exists() and live.exists()


# --- finding 6: the detached child's PYTHONPATH ------------------------------------------------


def test_the_detached_upkeep_child_keeps_the_standard_library_first(tmp_path: Path) -> None:
    """Where ``ledger`` is not importable without help, the child adds the directory holding it
    after the standard library: an old backport beside it (``enum.py`` in a site-packages) must
    not replace the standard module. The interpreter runs with ``-S`` so that nothing makes
    ``ledger`` importable but that directory."""
    site_dir = tmp_path / "site-packages"
    site_dir.mkdir()
    (site_dir / "ledger").symlink_to(Path(upkeep_mod.__file__).resolve().parents[2])
    (site_dir / "enum.py").write_text("raise ImportError('a backport shadowed the stdlib')\n")
    probe = "import enum, ledger\nprint(os.path.realpath(ledger.__file__))\nprint(enum.__file__)\n"
    result = subprocess.run(
        [sys.executable, "-S", "-c", CHILD_PATH_SETUP + probe, str(site_dir)],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    ledger_file, enum_file = result.stdout.splitlines()
    assert ledger_file == str(Path(upkeep_mod.__file__).resolve().parents[2] / "__init__.py")
    assert not enum_file.startswith(str(site_dir)), "the standard library comes first"


def test_the_detached_upkeep_child_adds_nothing_where_ledger_is_ours_already(
    tmp_path: Path,
) -> None:
    """Installed (here: the test's own environment), nothing is added to ``sys.path``."""
    probe = "print(sys.path.count(parent))\n"
    parent = str(Path(upkeep_mod.__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": parent}  # how the tests' interpreter finds ledger
    result = subprocess.run(
        [sys.executable, "-c", CHILD_PATH_SETUP + probe, parent],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "1"
