"""The disk upkeep started by the store itself, after a snapshot is appended, whoever appended it.

Why it exists: the upkeep (:mod:`ledger.git.store.upkeep`) used to run only from the engine's
sweep scheduler, i.e. in a Pi session with retention on. ``rewind snapshot``, ``rewind
checkpoint``, library callers and sessions with retention off never ran it: 60 captures of 20
new files left 1,508 loose objects in a repository whose ``gc.auto`` was 400 (issue 32). Every
snapshot passes through :func:`ledger.git.store.snapshot.commit_snapshot`, which calls
:func:`after_append`; retention has no say in it.

Invariants:
- **Off the capture's path**: :func:`after_append` costs what :func:`~ledger.git.store.upkeep.
  upkeep_due` costs (a ``stat`` and a few ``listdir``; all 256 fan-out directories only when
  ``gc.auto`` ≤ 256) and, when due, one ``flock`` probe and the start of a detached process
  (``python -c`` running :mod:`ledger.background_upkeep`, its own session, no terminal, stdio to
  ``/dev/null``; that entry point lives above the git layer because it asks the restore
  subsystem whether a restore journal is open). It never raises and never prints: a failure
  only means the next append tries again. The command that appended never waits for the
  upkeep: packing ours in a user's repository does not take the capture lock.
- **One at a time, none lost**: the parent takes the upkeep ``flock`` before it starts the
  child and hands the locked descriptor over (``pass_fds``), so two appends never start two
  upkeeps. An append that finds the lock taken leaves :data:`AGAIN_FILE` *before* probing it;
  the child looks for that file after every pass and once more after releasing the lock (and
  then takes the lock again if it can), so an append that raced the end of a pass is packed by
  the same child. Hence after the last append and the end of its upkeep, our loose objects
  beyond the floor are at most ``gc.auto`` (the invariant of ``upkeep_due``).
- **Bounded**: a child makes passes while appends keep asking for them, at most
  :data:`BUDGET_S` seconds (then it stops at the upkeep's next step and, if an append asked
  meanwhile, starts a successor), and stops after :data:`MAX_IDLE_ROUNDS` passes in a row that
  found nothing to do. A child that found a
  restore journal open (the upkeep starts no pass then) leaves :data:`DEFERRED_FILE`, and appends
  start no other for :data:`DEFER_S` seconds: an interrupted restore left open for days does not
  cost every capture a process. A killed child leaves
  what any killed upkeep leaves (named by ``rewind doctor``, removed by ``rewind sweep``).
- ``REWIND_AUTO_UPKEEP=0`` in the environment turns the trigger off (the upkeep then runs only
  after sweeps, as before): for measurements that must not see a background process.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ledger.git.private import make_private_dir, private_dir
from ledger.git.repo import GitRepo

ENV_SWITCH = "REWIND_AUTO_UPKEEP"
AGAIN_FILE = "upkeep.again"
"""In ``<common-dir>/pi-rewind``: an append found the upkeep running; look once more."""
DEFERRED_FILE = "upkeep.deferred"
"""In ``<common-dir>/pi-rewind``: the last child found a restore journal open."""
DEFER_S = 60.0
MAX_IDLE_ROUNDS = 3
BUDGET_S = 600.0


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


def after_append(repo: GitRepo) -> None:
    """Called after a snapshot was appended to the store: start the upkeep in the background
    when it is due. Never raises, never waits for the upkeep."""
    if not enabled():
        return
    try:
        from ledger.git.store.upkeep import try_upkeep_lock, upkeep_due

        if not upkeep_due(repo):
            return
        home = make_private_dir(repo.common_dir)
        with contextlib.suppress(OSError):
            if time.time() - os.stat(home / DEFERRED_FILE).st_mtime < DEFER_S:
                return  # a restore journal was open a moment ago: the upkeep would skip
        # The flag first, then the probe: a child that released the lock after our probe
        # failed still finds the flag (see the module).
        (home / AGAIN_FILE).touch()
        fd = try_upkeep_lock(repo)
        if fd is None:
            return
        try:
            _start(repo, fd)
        finally:
            os.close(fd)  # the child holds the same lock through its own copy
    except Exception:  # a capture must never fail for its housekeeping
        return


CHILD_PATH_SETUP = """\
import importlib.util, os, site, sys
parent = sys.argv[1]
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]
spec = importlib.util.find_spec("ledger")
ours = os.path.realpath(os.path.join(parent, "ledger", "__init__.py"))
if spec is None or spec.origin is None or os.path.realpath(spec.origin) != ours:
    sites = {*site.getsitepackages(), site.getusersitepackages()}
    at = next((i for i, p in enumerate(sys.path) if p in sites), len(sys.path))
    sys.path.insert(at, parent)
"""
"""The child's first lines (``python -c``, ``argv[1]`` the directory holding our ``ledger``):
that directory is put on ``sys.path`` only when ``ledger`` would not be ours without it (a source
checkout never installed), and then *after* the standard library (before site-packages, so
that an unrelated ``ledger`` there does not win). Never through ``PYTHONPATH``, which comes
before the standard library: for an installed package that directory is ``site-packages``, and
an old backport there (``enum34``, ``typing``) would replace the standard module in the child,
whose failures nobody sees (issue 32, review finding 6). The cwd (the git dir) is dropped from
``sys.path`` too: nothing is imported from a repository."""
_CHILD_MAIN = "from ledger.background_upkeep import main\nsys.exit(main(sys.argv[2:]))\n"


def _start(repo: GitRepo, fd: int) -> None:
    package_parent = str(Path(__file__).resolve().parents[3])
    subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD_PATH_SETUP + _CHILD_MAIN,
            package_parent,
            str(repo.root),
            str(repo.git_dir),
            str(fd),
        ],
        cwd=str(repo.git_dir),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(fd,),
        start_new_session=True,  # no terminal's signals; outlives the command that started it
        close_fds=True,
    )


def _take_again(home: Path) -> bool:
    """Whether an append asked for another look since the last call (and clear the request)."""
    try:
        os.unlink(home / AGAIN_FILE)
    except FileNotFoundError:
        return False
    except OSError:
        return False
    return True


def run_detached(
    root: Path, git_dir: Path, fd: int, restore_open: Callable[[GitRepo], bool]
) -> int:
    """The child (``fd`` holds the upkeep lock, handed over by :func:`after_append`): passes of
    the upkeep while there is work, then release; again if an append asked meanwhile and the
    lock is free. ``restore_open``: the restore subsystem's question, asked by the upkeep."""
    from ledger.git.shadow.layout import reopen
    from ledger.git.store.upkeep import run_upkeep, try_upkeep_lock, upkeep_due

    deadline = time.monotonic() + BUDGET_S

    def stop() -> bool:
        return time.monotonic() > deadline

    repo = reopen(root, git_dir)
    home = private_dir(repo.common_dir)
    idle = 0
    held: int | None = fd
    while held is not None:
        try:
            while not stop():
                _take_again(home)
                report = run_upkeep(
                    repo, restore_open=lambda: restore_open(repo), stop=stop, lock_held=True
                )
                if report.skipped is not None:
                    if restore_open(repo):
                        with contextlib.suppress(OSError):
                            (home / DEFERRED_FILE).touch()
                    idle = MAX_IDLE_ROUNDS
                    break
                # Passes go on while appends keep asking; a few in a row that found nothing to
                # do end the child whatever the flag says (appends that are not due yet).
                worked = report.removed_loose or report.removed_packs or report.packed_objects
                idle = 0 if worked else idle + 1
                if idle >= MAX_IDLE_ROUNDS:
                    break
                if not ((home / AGAIN_FILE).exists() or upkeep_due(repo)):
                    break
        finally:
            os.close(held)
            held = None
        if idle >= MAX_IDLE_ROUNDS or not (home / AGAIN_FILE).exists():
            break
        if stop():  # out of budget with work asked for: a successor with a budget of its own
            after_append(repo)
            break
        held = try_upkeep_lock(repo)  # None: another upkeep runs and will look itself
    return 0
