"""The git layer: the only code in rewind-ledger that imports pygit2 or runs git.

Everything here works on a :class:`~ledger.git.repo.GitRepo`. It never writes the user's index,
HEAD or branches, and writes no ref but ``refs/pi-rewind/store``. Beyond git objects and that
ref, the files it writes are ours, under ``<git-dir>/pi-rewind/``, and the work tree itself, which
only a restore changes (after an undo snapshot, never through a symlink, never inside ``.git``).

One subpackage per subsystem, the basics beside them (import modules directly; this package and
the subpackages import nothing (:class:`GitRepo` is loaded on first use), so that ``import ledger.git`` stays cheap
and no import runs in a circle):

- basics: :mod:`ledger.git.repo` (finding the repository; object, configuration and path
  questions), :mod:`ledger.git.runner` (running git with a controlled environment),
  :mod:`ledger.git.private` (our private directory and the serve lock),
  :mod:`ledger.git.liveness` (whether a lock's or a file's owner still runs), :mod:`ledger.git.trees`
  (reading and diffing tree objects) and :mod:`ledger.git.treediff` (tree diffs as values);
- :mod:`ledger.git.capture`: the work tree into a tree, exactly, with the private index;
- :mod:`ledger.git.feed`: the change feed, captures in O(changed) in a long-lived process;
- :mod:`ledger.git.store`: snapshots, ``refs/pi-rewind/store``, and the disk they take;
- :mod:`ledger.git.restore`: the work tree made a recorded tree, undoably and crash-safely;
- :mod:`ledger.git.shadow`: shadow repositories for directories outside git.

Dependencies point one way, layer by layer (checked by ``tests/unit/test_architecture.py``):
the basics; :mod:`ledger.git.shadow.layout` (a shadow is a kind of repository every capture must
know); capture; the feed and the store; restore (it takes undo snapshots), and
:mod:`ledger.git.shadow.upkeep` (it migrates a shadow's store); :mod:`ledger.git.shadow.open`.
"""

from __future__ import annotations

# Not imported here: ledger.git.repo loads pygit2 (~65-130 ms with ssl, via pygit2.settings),
# and every ``ledger.git.<module>`` import runs this file first. A spawned bridge answers Pi's
# ``session_start`` with modules of this package that never touch pygit2 (liveness, private;
# ledger/bridge/quick_start.py), so ``ledger.git.GitRepo`` is loaded on first use (PEP 562).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.git.repo import GitRepo

# Before any module of this package can import pygit2: load it without parsing the system's CA
# bundle, which we never use (~10 ms of every process that opens a repository).
from ledger.git.pygit2_start import install as _install_pygit2_start  # noqa: E402

_install_pygit2_start()


def __getattr__(name: str) -> object:
    if name == "GitRepo":
        from ledger.git.repo import GitRepo

        return GitRepo
    raise AttributeError(f"module 'ledger.git' has no attribute {name!r}")


__all__ = ["GitRepo"]
