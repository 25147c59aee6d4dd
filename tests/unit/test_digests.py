"""ledger.digests: the built-in SHA implementations give hashlib's digests."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from ledger import digests


@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=4096))
def test_digests_equal_hashlibs_whole_and_in_parts(data: bytes, cut: int) -> None:
    for ours, theirs in ((digests.sha1, hashlib.sha1), (digests.sha256, hashlib.sha256)):
        assert ours(data).hexdigest() == theirs(data).hexdigest()
        parted = ours(data[:cut])
        parted.update(data[cut:])
        assert parted.hexdigest() == theirs(data).hexdigest()


def test_a_restore_process_loads_neither_openssls_hashlib_nor_secrets_nor_random() -> None:
    """What a cold ``rewind restore`` imports loads no ``_hashlib`` (OpenSSL, ~4 ms per
    process), nor ``secrets`` (``hmac``, ``random``, ``hashlib``) for its random names, nor
    ``random`` for a retry that never comes (issue 34)."""
    code = (
        "import sys, ledger.cli.app, ledger.engine.operations, ledger.git.restore.run, "
        "ledger.git.capture.fingerprint, ledger.git.capture.state, ledger.overwrite_notices, "
        "ledger.git.shadow.layout, ledger.git.shadow.upkeep, ledger.git.store.chain, "
        "ledger.git.store.usage, ledger.git.owned, ledger.presence; "
        "print(sorted({'_hashlib', 'hashlib', 'secrets', 'hmac', 'random'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
