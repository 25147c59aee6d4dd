"""The authorship index (issue 33, docs/authorship.md): who produced each file's content in a
work tree, written as work happens and answered in one lookup per changed path.

- :mod:`ledger.authorship.model`: the records and the one rule (pure);
- :mod:`ledger.authorship.rebuild`: recorded points → records, for the live writer and a rebuild
  (pure);
- :mod:`ledger.authorship.codec`: the file's bytes (pure);
- :mod:`ledger.authorship.store`: the append-only file in the private dir, its lock, tailing,
  compaction and replacement.

Nothing here imports git: paths are bytes, modes ints, blob and snapshot ids hex strings; the
adapter (the engine) supplies tree diffs and the private dir.
"""
