"""rewind-ledger: exact, undoable rewind of files and conversation for AI coding agents.

The package is layered (see docs/design.md): pure cores (`records`, `ledgerview`,
`lineage`, `retention.plan`, `engine.conversation`) take values and return values;
adapters do I/O (`session.store` for session files, `git` for the repository, the only
code that imports pygit2); `engine` drives a session through the `SessionHost` protocol;
`cli` and `bridge` are thin front ends that parse, call and format.

Importing this package does no work and imports nothing heavy, so `rewind --help`
stays fast.
"""
