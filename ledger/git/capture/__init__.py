"""Capture: the work tree into a tree object, exactly and in O(changed) where it can.

Modules (import them directly: this package's ``__init__`` imports nothing, so that importing
one of them stays cheap and no import runs in a circle):

- :mod:`ledger.git.capture.scan`: ``capture_tree`` and :class:`CaptureResult`: the entry point;
  the private index brought up to date with ``git status``/``git add`` and written as a tree.
- :mod:`ledger.git.capture.plan`: ``git status`` on the private index, parsed and classified
  (protected, skipped, submodules, git directories).
- :mod:`ledger.git.capture.index`: the private index, its files and the capture lock.
- :mod:`ledger.git.capture.state`: what a capture remembers beside the index;
  :mod:`ledger.git.capture.fingerprint`: what outside the tree invalidates it;
  :mod:`ledger.git.capture.racy`: git's stat-cache limits (racily clean entries).
- :mod:`ledger.git.capture.treeedit`: small captures (a few paths) without rewriting the index.
- :mod:`ledger.git.capture.limits`: the first capture's limits (refuse the absurd before writing).

Invariants: a capture equals a fresh-index ``git -c core.autocrlf=false add -A`` tree of the
same files (docs/design.md#the-exactness-contract); it writes only git objects and files under
``<git-dir>/pi-rewind/``; never the user's index, HEAD or refs.
"""
