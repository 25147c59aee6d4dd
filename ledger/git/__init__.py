"""The git layer: the only code in rewind-ledger that imports pygit2 or runs git.

Everything here works on a :class:`~ledger.git.repo.GitRepo`, never writes the user's index,
HEAD, branches or work tree, and writes no ref but ``refs/pi-rewind/store``. Beyond git objects
and that ref, the only files written are ours, under ``<git-dir>/pi-rewind/``.

Submodules (import them directly; this package imports only :class:`GitRepo` so that
``import ledger.git`` stays cheap):

- :mod:`ledger.git.capture`: exact, incremental capture of the work tree into a tree.
- :mod:`ledger.git.snapshot`: ``take_snapshot`` (capture + dedup + commit + store).
- :mod:`ledger.git.store`: the keepalive chain ``refs/pi-rewind/store``.
- :mod:`ledger.git.restore`: plan and apply an exact restore of a snapshot, with an undo
  snapshot first and a rollback on failure; :mod:`ledger.git.restore_safety` refuses hostile
  target trees (absolute paths, ``..``, ``.git``, writes through symlinks, submodule changes).
- :mod:`ledger.git.index`, :mod:`ledger.git.treeedit`, :mod:`ledger.git.runner`: the private
  index (and what invalidates it), small captures without rewriting it, and running git safely.
"""

from ledger.git.repo import GitRepo

__all__ = ["GitRepo"]
