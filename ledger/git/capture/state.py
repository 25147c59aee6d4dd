"""``capture-state.json``: what a capture remembers beside the private index, and its format.

Why it exists: the private index (:mod:`ledger.git.capture.index`) records files, not what decides which
files a capture holds. A capture must also know the fingerprint the index was built under
(:mod:`ledger.git.capture.fingerprint`), each directory's ignore and attribute rules as they were (so that
a changed ``.gitignore`` is seen although no tracked file changed), the gitlinks, the protected
directories kept because the user tracks something there, and the racy-entry bookkeeping of
:mod:`ledger.git.capture.racy`.

The file (version :data:`STATE_VERSION`)::

    {"version": 2, "fingerprint": "<sha256>", "tree": "<tree id>" | null,
     "dirs": {"<dir>": [<.gitignore sig>, <.gitattributes sig>, <has .git>], …},
     "plain_dirs": ["<dir>", …], "synced": true | false,
     "gitlinks": […], "danger": […], "danger_until": <s>, "kept_protected": […],
     "index_mtime_real_ns": <ns>, "index_mtime_set_ns": <ns>}

where a rule-file signature is ``[size, mtime_ns, ctime_ns, inode, digest]`` or ``null`` when
the file is absent (:class:`RuleSig`; a directory's three values are :class:`DirRules`).
``dirs`` holds only the directories with a rule file or a ``.git``; ``plain_dirs`` the other
known directories (no rule file, no ``.git``), so that reading and writing the state costs little
per directory. ``synced``: every signature was read after git's untracked cache last recorded
that directory (docs/capture.md#start-up; the capture may then look at :func:`rule_dirs` alone
when git's status says no directory changed).

Invariants:
- A state file of another version, or one whose shape is not exactly the above, reads as no
  state (:meth:`CaptureState.from_json` gives ``None``): the caller rebuilds the index from
  nothing, never trusts it and never crashes on it.
- A signature's digest is reused only when the stat data is identical and was not recorded within
  two seconds of the file's last change (a same-size rewrite within the second is re-read).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

STATE_VERSION = 2
_SIG_FRESH_NS = 2_000_000_000


class RuleSig(NamedTuple):
    """A rule file's stat data and content digest (``sha1`` of the bytes, ``link:<sha1>`` of a
    symlink's target, ``mode:<octal>`` of anything else, ``unreadable``)."""

    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    digest: str


class DirRules(NamedTuple):
    """One directory's ``.gitignore`` and ``.gitattributes`` signatures (``None``: absent), and
    whether it holds a ``.git`` (an embedded repository)."""

    ignore: RuleSig | None
    attributes: RuleSig | None
    has_git: bool


PLAIN = DirRules(None, None, False)
"""A directory without rule files or ``.git``."""


@dataclass
class CaptureState:
    """The persisted companion of the private index (see the module for the format)."""

    fingerprint: str = ""
    tree: str | None = None
    """The tree of the private index's entries (``git write-tree``), when known."""
    dirs: dict[str, DirRules] = field(default_factory=dict)
    gitlinks: list[str] = field(default_factory=list)
    danger: list[str] = field(default_factory=list)
    """Racy entries too old to guard by the index timestamp: the next capture drops them."""
    danger_until: int = 0
    kept_protected: list[str] = field(default_factory=list)
    git_dirs: list[str] = field(default_factory=list)
    """Git directories inside the work tree that the last capture left out (their entries were
    removed from the private index when first seen)."""
    synced: bool = False
    """Every signature in ``dirs`` was read after git's untracked cache last recorded its
    directory (see the module)."""
    index_mtime_real_ns: int = 0
    """The index file's mtime as git last wrote it."""
    index_mtime_set_ns: int = 0
    """The mtime we last gave the index file (equal to the real one unless moved back)."""

    def to_json(self) -> bytes:
        rules = {k: v for k, v in self.dirs.items() if v is not PLAIN and v != PLAIN}
        return json.dumps(
            {
                "version": STATE_VERSION,
                "fingerprint": self.fingerprint,
                "tree": self.tree,
                "dirs": rules,  # named tuples are written as JSON arrays
                "plain_dirs": [k for k, v in self.dirs.items() if v is PLAIN or v == PLAIN],
                "synced": self.synced,
                "gitlinks": sorted(set(self.gitlinks)),
                "danger": sorted(set(self.danger)),
                "danger_until": self.danger_until,
                "kept_protected": sorted(set(self.kept_protected)),
                "git_dirs": sorted(set(self.git_dirs)),
                "index_mtime_real_ns": self.index_mtime_real_ns,
                "index_mtime_set_ns": self.index_mtime_set_ns,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode("utf-8", "surrogateescape")

    @classmethod
    def from_json(cls, raw: bytes) -> CaptureState | None:
        """The state, or ``None`` for anything but a well-formed file of this version."""
        try:
            data = json.loads(raw.decode("utf-8", "surrogateescape"))
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            return None
        try:
            plain = data["plain_dirs"]
            if not isinstance(plain, list) or not all(isinstance(d, str) for d in plain):
                raise ValueError("not a list of directories")
            dirs = dict.fromkeys(plain, PLAIN)
            dirs.update((str(k), _dir_rules(v)) for k, v in dict(data["dirs"]).items())
            synced = data["synced"]
            if not isinstance(synced, bool):
                raise ValueError("not a boolean")
            return cls(
                fingerprint=str(data["fingerprint"]),
                tree=data["tree"] if isinstance(data.get("tree"), str) else None,
                dirs=dirs,
                gitlinks=[str(p) for p in data["gitlinks"]],
                danger=[str(p) for p in data["danger"]],
                danger_until=int(data["danger_until"]),
                kept_protected=[str(p) for p in data.get("kept_protected", [])],
                git_dirs=[str(p) for p in data.get("git_dirs", [])],
                synced=synced,
                index_mtime_real_ns=int(data.get("index_mtime_real_ns", 0)),
                index_mtime_set_ns=int(data.get("index_mtime_set_ns", 0)),
            )
        except (KeyError, TypeError, ValueError):
            return None


def _dir_rules(value: object) -> DirRules:
    if not isinstance(value, list) or len(value) != 3 or not isinstance(value[2], bool):
        raise ValueError("not a directory's rules")
    return DirRules(_rule_sig(value[0]), _rule_sig(value[1]), value[2])


def _rule_sig(value: object) -> RuleSig | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) != 5
        or not all(type(v) is int for v in value[:4])
        or not isinstance(value[4], str)
    ):
        raise ValueError("not a rule-file signature")
    return RuleSig(value[0], value[1], value[2], value[3], value[4])


# --- signatures of rule files --------------------------------------------------------------


def file_signature(path: Path | str, previous: RuleSig | None = None) -> RuleSig | None:
    """The signature of a file (not followed if a symlink), or ``None`` when absent. The digest
    is reused from ``previous`` only when the stat data is identical and was not recorded within
    two seconds of the file's last change."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    head = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if (
        previous is not None
        and previous[:4] == head
        and time.time_ns() - st.st_ctime_ns > _SIG_FRESH_NS
    ):
        return previous
    if stat.S_ISLNK(st.st_mode):
        digest = "link:" + hashlib.sha1(os.fsencode(os.readlink(path))).hexdigest()
    elif stat.S_ISREG(st.st_mode):
        try:
            with open(path, "rb") as handle:
                digest = hashlib.sha1(handle.read()).hexdigest()
        except OSError:
            digest = "unreadable"
    else:
        digest = f"mode:{st.st_mode:o}"
    return RuleSig(*head, digest)


def same_content(a: RuleSig | None, b: RuleSig | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.digest == b.digest


def dir_signatures(root: str, rel_dir: str, previous: DirRules | None = None) -> DirRules:
    """The rules of one directory (``root`` and ``rel_dir`` as strings: this runs for every
    known directory when the tree's shape changed). Absence is tested with ``faccessat``
    (``os.access`` without following symlinks, like ``lexists``), which costs a third of a
    failing ``lstat`` in Python; only present files are signed."""
    base = os.path.join(root, rel_dir) if rel_dir else root
    ignore = base + "/.gitignore"
    attributes = base + "/.gitattributes"
    rules = DirRules(
        file_signature(ignore, previous.ignore if previous else None)
        if _access(ignore, os.F_OK, follow_symlinks=False)
        else None,
        file_signature(attributes, previous.attributes if previous else None)
        if _access(attributes, os.F_OK, follow_symlinks=False)
        else None,
        bool(rel_dir) and _access(base + "/.git", os.F_OK, follow_symlinks=False),
    )
    return PLAIN if rules == PLAIN else rules  # one shared value: cheap to tell apart


_access = os.access


def rule_dirs(dirs: dict[str, DirRules]) -> list[str]:
    """The known directories holding a rule file or a ``.git``: the only ones whose rules can
    change without changing the directory itself (an edit in place)."""
    return [rel for rel, rules in dirs.items() if rules is not PLAIN and rules != PLAIN]


# --- directories -----------------------------------------------------------------------------


def parent_dirs(path: str) -> Iterable[str]:
    """``a/b/c`` → ``a/b``, ``a``, ``""`` (the root is ``""``)."""
    while True:
        cut = path.rfind("/")
        if cut < 0:
            yield ""
            return
        path = path[:cut]
        yield path


def topmost(dirs: Iterable[str]) -> list[str]:
    """The directories not inside another one of the set (``""`` covers everything)."""
    ordered = sorted(set(dirs), key=lambda d: (d.count("/"), d))
    if "" in ordered:
        return [""]
    kept: set[str] = set()
    for d in ordered:
        if not any(parent in kept for parent in parent_dirs(d)):
            kept.add(d)
    return sorted(kept)


__all__ = [
    "PLAIN",
    "STATE_VERSION",
    "CaptureState",
    "DirRules",
    "RuleSig",
    "dir_signatures",
    "file_signature",
    "parent_dirs",
    "rule_dirs",
    "same_content",
    "topmost",
]
