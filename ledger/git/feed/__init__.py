"""The change feed: captures in O(changed) inside a long-lived process (``rewind serve``).

Modules (this ``__init__`` imports nothing; import them directly):

- :mod:`ledger.git.feed.service`: :class:`ChangeFeed`: a watcher, a base capture and its
  verification; answers "what changed since the last capture" or says it cannot.
- :mod:`ledger.git.feed.tree`: the feed's tree: a base capture plus the paths the watcher saw.
- :mod:`ledger.git.feed.inotify`: the Linux watcher (inotify through ctypes). Where the platform
  has none (:mod:`ledger.facilities`), the feed is off and every capture scans.

Invariants: a fed capture equals a full capture (verified in idle time; any doubt falls back to
a full scan); nothing here runs unless a process lives long enough to keep a watcher.
"""
