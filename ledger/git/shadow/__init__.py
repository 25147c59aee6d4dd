"""Shadow repositories: rewind for a directory that is not a git repository (docs/shadow.md).

Modules (this ``__init__`` imports nothing; import them directly):

- :mod:`ledger.git.shadow.open`: ``open_work_tree``: a directory's repository, or its shadow
  (created, or migrated into a repository made since).
- :mod:`ledger.git.shadow.layout`: where shadows live and what they hold; :class:`ShadowRepo`.
- :mod:`ledger.git.shadow.upkeep`: migration into a later ``git init``, listing and removing
  orphaned shadows.

Invariants: nothing is ever written inside the directory itself; a git directory (bare, or a
``--separate-git-dir`` target) is never a work tree.
"""
