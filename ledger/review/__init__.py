"""Reviewing a session turn by turn: diffs between rewind points (git-exact), ``show``/``log``
text and the self-contained HTML report.

Library only: nothing here prints; functions return values and raise ``LedgerError`` subclasses.
"""
