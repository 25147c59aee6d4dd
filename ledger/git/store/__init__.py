"""The store: snapshot commits, ``refs/pi-rewind/store`` that keeps them, and the disk they take.

Modules (this ``__init__`` imports nothing; import them directly):

- :mod:`ledger.git.store.snapshot`: taking a snapshot (capture, dedup, commit, keep alive).
- :mod:`ledger.git.store.chain`: the keepalive chain, appended by compare-and-swap;
  :mod:`ledger.git.store.refswap`: git's ref-lock protocol done in-process.
- :mod:`ledger.git.store.rewrite`: retention's rewrite of the chain and what it frees.
- :mod:`ledger.git.store.usage`: the store's disk figures, cached per store state.
- :mod:`ledger.git.store.upkeep`: giving disk space back (our loose objects packed; a shadow
  repacked and pruned); :mod:`ledger.git.store.leftovers`: what a kill left, named and removed.
- :mod:`ledger.git.store.bundle_objects`: objects of an export or import, as plain values.

Invariants: only the retention sweep rewrites the store ref, and only by compare-and-swap; no
pack, ref, reflog or index of the user's is ever written.
"""
