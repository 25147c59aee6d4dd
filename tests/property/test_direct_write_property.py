"""Property: for any small tree of regular files, executables and symlinks, the restore's
in-process writer (ledger/git/restore/direct_write.py) and ``git checkout-index`` write the same
tree: names, types, permission bits under the umask, bytes, link targets.

Each example draws up to eight entries two levels deep (names with spaces and non-ASCII letters,
contents with CR, LF and NUL bytes), checks them out both ways into fresh directories of one
repository and compares. Bounded to 30 examples so that it runs in seconds.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pygit2.enums import FileMode

from tests.gitkit import files
from tests.integration.test_direct_write import _blobs, _direct, _git_checkout

names = st.text(alphabet="ab é日 .-_x", min_size=1, max_size=8).filter(
    lambda n: n.strip(" .") == n and n not in (".", "..") and not n.lower().startswith(".git")
)
modes = st.sampled_from([FileMode.BLOB, FileMode.BLOB_EXECUTABLE, FileMode.LINK])
contents = st.binary(max_size=300) | st.sampled_from([b"", b"a\r\nb\n", b"\0\r\r\n", b"x" * 5000])
entries = st.lists(
    st.tuples(st.lists(names, min_size=1, max_size=3), modes, contents),
    min_size=1,
    max_size=8,
)


def _tree(drawn: list[tuple[list[str], int, bytes]]) -> list[tuple[str, int, bytes]]:
    """The drawn entries without clashes (a file where another entry needs a directory) and
    without link targets git cannot write (empty, NUL, longer than ``PATH_MAX``)."""
    out: dict[str, tuple[int, bytes]] = {}
    for parts, mode, data in drawn:
        path = "/".join(parts)
        if mode == FileMode.LINK:
            data = data.replace(b"\0", b"_")[:1000] or b"target"  # no link > PATH_MAX
        clash = any(p == path or p.startswith(path + "/") or path.startswith(p + "/") for p in out)
        if not clash:
            out[path] = (mode, data)
    return [(path, mode, data) for path, (mode, data) in out.items()]


def test_the_in_process_writer_and_git_checkout_write_the_same_trees(repo: Path) -> None:
    counter = [0]

    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(drawn=entries, mask=st.sampled_from([0o022, 0o002, 0o077]))
    def check(drawn: list[tuple[list[str], int, bytes]], mask: int) -> None:
        counter[0] += 1
        tree = _tree(drawn)
        writes = _blobs(repo, tree)
        by_git, in_process = f"g{counter[0]}", f"d{counter[0]}"
        before = os.umask(mask)
        try:
            _git_checkout(repo, writes, by_git)
            _direct(repo, writes, in_process)
        finally:
            os.umask(before)
        try:
            assert files(repo / in_process) == files(repo / by_git)
            assert len([p for p in files(repo / by_git) if not p.endswith("/")]) >= len(tree)
        finally:
            shutil.rmtree(repo / by_git)
            shutil.rmtree(repo / in_process)

    check()
