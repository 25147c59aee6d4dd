"""The git layer: the only code in rewind-ledger that imports pygit2 or runs git.

Everything here works on a :class:`~ledger.git.repo.GitRepo`. It never writes the user's index,
HEAD or branches, and writes no ref but ``refs/pi-rewind/store``. Beyond git objects and that
ref, the files it writes are ours, under ``<git-dir>/pi-rewind/``, and the work tree itself, which
only a restore changes (after an undo snapshot, through :mod:`ledger.git.restore_apply` and
:mod:`ledger.git.placement`, never through a symlink and never inside ``.git``).

Modules (import them directly; this package imports only :class:`GitRepo` so that
``import ledger.git`` stays cheap):

- :mod:`ledger.git.repo`: finding the repository; object, configuration and path questions.
- :mod:`ledger.git.runner`: running git with a controlled environment.
- Capture: :mod:`ledger.git.capture` (the scan and its git calls), :mod:`ledger.git.capture_plan`
  (status parsed and classified), :mod:`ledger.git.index` (the private index and its lock),
  :mod:`ledger.git.capture_state` (what a capture remembers), :mod:`ledger.git.fingerprint`
  (what outside the tree invalidates it), :mod:`ledger.git.racy` (git's stat-cache limits),
  :mod:`ledger.git.treeedit` (small captures without rewriting the index), and in ``rewind
  serve`` :mod:`ledger.git.feed` with :mod:`ledger.git.watch_inotify`.
- :mod:`ledger.git.snapshot` (capture + dedup + commit + store) and :mod:`ledger.git.store` (the
  keepalive chain ``refs/pi-rewind/store``); :mod:`ledger.git.rewrite`: retention's side of it.
- :mod:`ledger.git.trees`: reading and diffing tree objects; :mod:`ledger.git.treediff`: tree
  diffs as values in-process, tree ids and object sizes (for :mod:`ledger.review.diff`).
- :mod:`ledger.git.bundle_objects`: a quarantine's objects read and an export commit written as
  plain values (for :mod:`ledger.portable`).
- Restore: :mod:`ledger.git.restore` (entry point and orchestration),
  :mod:`ledger.git.restore_plan` (what to change, or a refusal), :mod:`ledger.git.restore_safety`
  (hostile trees, work-tree checks, no-follow deletes), :mod:`ledger.git.restore_apply` (delete,
  write, verify, roll back), :mod:`ledger.git.placement` (whole-file placement),
  :mod:`ledger.git.journal` (crash-safe restores).
"""

from ledger.git.repo import GitRepo

__all__ = ["GitRepo"]
