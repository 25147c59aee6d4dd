"""Property: files named with any bytes (no ``/``, no NUL, nothing git refuses to check out)
come back exactly after snapshot → delete → restore (issue 32, item 5).

Each example writes a few files at the root and in a directory whose name is drawn the same
way, snapshots them, deletes them all (and changes one outside the snapshot), restores the
snapshot through the git layer, and compares the work tree with what was written, name bytes
and content bytes. Before the fix the first name that is not UTF-8 made the plan refuse
(``cannot tell whether a path is ignored now``). Bounded to 25 examples on one repository
(each example starts from the README alone), so that it runs in seconds.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pygit2.enums import FileMode

from ledger.git.tree_names import name_problem
from tests.snapshotkit import restore, snapshot

_RESERVED = {b"README.md", b".gitignore", b".gitattributes", b".gitmodules", b".mailmap"}


def _usable(name: bytes) -> bool:
    return (
        name_problem(name, FileMode.BLOB) is None
        and name not in _RESERVED
        and not name.startswith(b".pi-rewind")
    )


names = st.binary(min_size=1, max_size=24).map(lambda b: b.replace(b"/", b"_").replace(b"\0", b"_"))
usable = names.filter(_usable)
contents = st.binary(max_size=64)


def test_any_byte_names_round_trip_through_snapshot_delete_restore(repo: Path) -> None:
    root = os.fsencode(repo)
    readme = (repo / "README.md").read_bytes()

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(
        top=st.dictionaries(usable, contents, min_size=1, max_size=4),
        directory=usable,
        inside=st.dictionaries(usable, contents, min_size=1, max_size=3),
    )
    def example(top: dict[bytes, bytes], directory: bytes, inside: dict[bytes, bytes]) -> None:
        reset(root, readme)  # a failed example (while shrinking) may have left files
        top = {name: data for name, data in top.items() if name != directory}
        expected = {**top, **{directory + b"/" + name: data for name, data in inside.items()}}
        for name, data in expected.items():
            os.makedirs(os.path.dirname(root + b"/" + name), exist_ok=True)
            with open(root + b"/" + name, "wb") as f:
                f.write(data)
        target = snapshot(repo)
        for name in top:
            os.unlink(root + b"/" + name)
        shutil.rmtree(root + b"/" + directory)
        with open(root + b"/README.md", "ab") as f:
            f.write(b"changed after the snapshot\n")

        outcome = restore(repo, target)

        assert outcome.exact
        assert work_tree(root) == {b"README.md": readme, **expected}

    example()


def reset(root: bytes, readme: bytes) -> None:
    """The work tree back to its one commit: ``README.md`` alone."""
    for name in os.listdir(root):
        if name == b".git":
            continue
        full = root + b"/" + name
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)
    with open(root + b"/README.md", "wb") as f:
        f.write(readme)


def work_tree(root: bytes) -> dict[bytes, bytes]:
    """Every file under ``root`` (less ``.git``): its path's bytes → its content."""
    found: dict[bytes, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == root:
            dirnames.remove(b".git")
        for name in filenames:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                found[full[len(root) + 1 :]] = f.read()
    return found
