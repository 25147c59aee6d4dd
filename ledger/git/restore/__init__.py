"""Restore: the work tree made exactly a recorded tree, undoably and crash-safely.

Modules (this ``__init__`` imports nothing; import them directly):

- :mod:`ledger.git.restore.run`: ``restore_commit`` and ``plan_restore``: the entry points and
  the orchestration (undo snapshot, journal, apply, verify, roll back).
- :mod:`ledger.git.restore.plan`: what to change, or a refusal before anything changes.
- :mod:`ledger.git.restore.safety`: hostile trees, work-tree checks, no-follow deletes.
- :mod:`ledger.git.restore.apply`: delete, write, verify, roll back.
- :mod:`ledger.git.restore.placement`: whole-file placement through a staging directory.
- :mod:`ledger.git.restore.nofollow`: the one symlink-safe walk both of those use.
- :mod:`ledger.git.restore.journal`: the restore journal that makes a killed restore undoable.

Invariants: every restore first takes an undo snapshot; touches nothing outside the work tree,
follows no symlink, writes nothing inside a git directory, never moves HEAD or the user's index;
refuses before changing anything when a plan is unsafe (docs/design.md#restore).
"""
