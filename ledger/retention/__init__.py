"""Retention: which snapshots ``refs/pi-rewind/store`` keeps (docs/design.md#retention, docs/defects.md#d7).

- :mod:`ledger.retention.plan`: the pure plan (references, pins, age and count, live set).
- :mod:`ledger.retention.sweep`: discovery of the ledgers and the compare-and-swap rewrite.
- :mod:`ledger.retention.scheduler`: when a running engine sweeps.
"""
