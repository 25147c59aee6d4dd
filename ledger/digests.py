"""SHA-1 and SHA-256 for the small inputs every capture hashes, without loading OpenSSL.

Why it exists: ``import hashlib`` loads ``_hashlib``, the interpreter's binding to its own
OpenSSL (~2-4 ms per process, measured: ``import hashlib`` 3.9 ms, the built-in modules 0.2 ms),
and every capture hashes a few small things: the fingerprint of what shapes a capture
(:mod:`ledger.git.capture.fingerprint`) and the ignore-rule files' contents
(:mod:`ledger.git.capture.state`). CPython's own implementations (``_sha1``, ``_sha256``;
``_sha2`` from 3.12) give the same digests and are built into every interpreter; ``hashlib`` is
the fallback where one was left out of a build.

Invariants: the same digests as ``hashlib.sha1``/``hashlib.sha256`` (tests/unit/test_digests.py);
for small inputs only (a few KiB: the built-ins are slower than OpenSSL on large data).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hashlib import sha1, sha256
else:
    try:
        from _sha1 import sha1
    except ImportError:  # a build without it
        from hashlib import sha1
    try:
        from _sha2 import sha256  # CPython 3.12 and later
    except ImportError:
        try:
            from _sha256 import sha256  # CPython 3.11
        except ImportError:
            from hashlib import sha256

__all__ = ["sha1", "sha256"]
