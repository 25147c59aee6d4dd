"""Pi's session files: parsing (pure), the session model, reading and appending, and finding them.

Invariants: only :mod:`ledger.session.store` writes, and only by appending whole lines under the
file's lock (docs/formats.md#appending-rules). Importing the package imports nothing.
"""
