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
     "plain_dirs": ["<dir>", …], "synced": true | false, "dir_stamps3": "<base64>",
     "gitlinks": […], "danger": […], "danger_until": <s>, "kept_protected": […],
     "index_mtime_real_ns": <ns>, "index_mtime_set_ns": <ns>}

where a rule-file signature is ``[size, mtime_ns, ctime_ns, inode, digest]`` or ``null`` when
the file is absent (:class:`RuleSig`; a directory's three values are :class:`DirRules`).
``dirs`` holds only the directories with a rule file or a ``.git``; ``plain_dirs`` the other
known directories (no rule file, no ``.git``), so that reading and writing the state costs little
per directory. ``dir_stamps3`` (optional): each known directory's own ``(mtime_ns, ctime_ns,
inode)`` (:func:`dir_stamp`), read just before its signatures were, as little-endian 64-bit
triples in the order ``plain_dirs`` then ``dirs`` (base64; ``(0, 0, 0)``: unknown). The
``dir_stamps`` of earlier versions (pairs, without the inode) are ignored: all unknown.
``synced``: every signature was read after git's untracked cache last recorded that directory
(docs/capture.md#start-up; the capture may then look at :func:`rule_dirs` alone when git's
status says no directory changed).

Invariants:
- A state file of another version, or one whose shape is not exactly the above, reads as no
  state (:meth:`CaptureState.from_json` gives ``None``): the caller rebuilds the index from
  nothing, never trusts it and never crashes on it.
- A signature's digest is reused only when the stat data is identical and was not recorded within
  two seconds of the file's last change (a same-size rewrite within the second is re-read).
- A directory's stamp is read before its signatures and only ever replaced together with them, so
  a stamp never postdates the signatures it vouches for: a path whose stamp is still the same
  names the same directory (the inode), which had no entry created, removed or renamed since its
  signatures were read. A stamp read within three seconds of the directory's last change (a
  coarse or lagging file-system clock could give a later change the same timestamps;
  :func:`stamp_limit`) is recorded as unknown, and an unknown stamp never matches.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import stat
import sys
import time
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import NamedTuple

from ledger.digests import sha1
from ledger.plain import Plain

STATE_VERSION = 2
_SIG_FRESH_NS = 2_000_000_000
RACY_CTIME = -1
"""The ctime of a rule-file signature read within :data:`_SIG_FRESH_NS` of the file's last
change: never equal to a file's, so the digest is read again next time."""

Stamp = tuple[int, int, int]
"""A directory's ``(mtime_ns, ctime_ns, inode)`` (:func:`dir_stamp`)."""
UNKNOWN_STAMP: Stamp = (0, 0, 0)
"""A directory stamp that never matches (unreadable, not a directory, or too recent)."""
STAMP_MARGIN_NS = 3_000_000_000
"""A directory changed less than this before a stamp is read gets no stamp: the coarsest
timestamp granularity git knows of (2 s, FAT) plus a second for a kernel clock that lags."""


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


class CaptureState(Plain):
    """The persisted companion of the private index (see the module for the format)."""

    __slots__ = (
        "_stamp_source",
        "_stamps",
        "danger",
        "danger_until",
        "dirs",
        "fingerprint",
        "git_dirs",
        "gitlinks",
        "index_mtime_real_ns",
        "index_mtime_set_ns",
        "kept_protected",
        "synced",
        "tree",
    )
    fingerprint: str
    tree: str | None
    """The tree of the private index's entries (``git write-tree``), when known."""
    dirs: dict[str, DirRules]
    gitlinks: list[str]
    danger: list[str]
    """Racy entries too old to guard by the index timestamp: the next capture drops them."""
    danger_until: int
    kept_protected: list[str]
    git_dirs: list[str]
    """Git directories inside the work tree that the last capture left out (their entries were
    removed from the private index when first seen)."""
    synced: bool
    """Every signature in ``dirs`` was read after git's untracked cache last recorded its
    directory (see the module)."""
    index_mtime_real_ns: int
    """The index file's mtime as git last wrote it."""
    index_mtime_set_ns: int
    """The mtime we last gave the index file (equal to the real one unless moved back)."""
    _stamps: Stamps | None
    _stamp_source: tuple[list[str], str] | None
    """The stamps as read (names in file order, base64), decoded only when used."""

    def __init__(
        self,
        fingerprint: str = "",
        tree: str | None = None,
        dirs: dict[str, DirRules] | None = None,
        gitlinks: list[str] | None = None,
        danger: list[str] | None = None,
        danger_until: int = 0,
        kept_protected: list[str] | None = None,
        git_dirs: list[str] | None = None,
        synced: bool = False,
        index_mtime_real_ns: int = 0,
        index_mtime_set_ns: int = 0,
        _stamps: Stamps | None = None,
        _stamp_source: tuple[list[str], str] | None = None,
    ) -> None:
        self.fingerprint = fingerprint
        self.tree = tree
        self.dirs = {} if dirs is None else dirs
        self.gitlinks = [] if gitlinks is None else gitlinks
        self.danger = [] if danger is None else danger
        self.danger_until = danger_until
        self.kept_protected = [] if kept_protected is None else kept_protected
        self.git_dirs = [] if git_dirs is None else git_dirs
        self.synced = synced
        self.index_mtime_real_ns = index_mtime_real_ns
        self.index_mtime_set_ns = index_mtime_set_ns
        self._stamps = _stamps
        self._stamp_source = _stamp_source

    def _names(self) -> tuple[str, ...]:
        # As the dataclass's ``field(repr=False, compare=False)``: the stamps (decoded or not)
        # are neither shown nor compared.
        return tuple(name for name in self.__slots__ if not name.startswith("_"))

    @property
    def stamps(self) -> Stamps:
        """Each known directory's stamp (:func:`dir_stamp`) as read before its signatures; a
        directory missing here has an unknown stamp."""
        if self._stamps is None:
            source = self._stamp_source
            self._stamps = _decode_stamps(*source) if source is not None else Stamps()
            self._stamp_source = None
        return self._stamps

    def to_json(self) -> bytes:
        rules = {k: v for k, v in self.dirs.items() if v is not PLAIN and v != PLAIN}
        plain = [k for k, v in self.dirs.items() if v is PLAIN or v == PLAIN]
        names = plain + list(rules)
        source = self._stamp_source
        if self._stamps is None and source is not None and source[0] == names:
            stamps = source[1]  # never looked at, same directories: written back as read
        else:
            stamps = self.stamps.encode(names)
        return json.dumps(
            {
                "version": STATE_VERSION,
                "fingerprint": self.fingerprint,
                "tree": self.tree,
                "dirs": rules,  # named tuples are written as JSON arrays
                "plain_dirs": plain,
                "synced": self.synced,
                "dir_stamps3": stamps,
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
            rules = dict(data["dirs"])
            dirs.update((str(k), _dir_rules(v)) for k, v in rules.items())
            synced = data["synced"]
            if not isinstance(synced, bool):
                raise ValueError("not a boolean")
            stamps = data.get("dir_stamps3")  # "dir_stamps" (no inode): ignored
            names = plain + [str(k) for k in rules]
            if stamps is not None and (
                not isinstance(stamps, str) or len(stamps) != _stamps_length(len(names))
            ):
                raise ValueError("not the directories' stamps")
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
                _stamp_source=(names, stamps) if stamps is not None else None,
            )
        except (KeyError, TypeError, ValueError):
            return None


def _stamps_length(count: int) -> int:
    """The base64 length of ``count`` stamps (24 bytes each)."""
    return 4 * ((24 * count + 2) // 3)


class Stamps(dict[str, Stamp]):
    """Directory stamps by directory; remembers the array they were decoded from and which ones
    were set since, so that writing them back after a pass that changed a few costs little."""

    def __init__(self, names: list[str] | None = None, values: array[int] | None = None) -> None:
        super().__init__()
        self._names = names
        self._values = values
        self._set: set[str] = set()
        if names is not None and values is not None:
            flat = iter(values.tolist())
            super().update(zip(names, zip(flat, flat, flat)))

    def __setitem__(self, key: str, value: Stamp) -> None:
        self._set.add(key)
        super().__setitem__(key, value)

    def clear(self) -> None:
        self._names = self._values = None
        super().clear()

    def encode(self, names: list[str]) -> str:
        """The stamps of ``names`` (unknown where missing), base64 (see the module)."""
        if self._values is not None and self._names == names:
            values = array("q", self._values)
            position = {name: i for i, name in enumerate(names)} if self._set else {}
            for name in self._set:
                i = position.get(name)
                if i is not None:
                    values[3 * i : 3 * i + 3] = array("q", self[name])
        else:
            get = self.get
            values = array("q", chain.from_iterable([get(name, UNKNOWN_STAMP) for name in names]))
        if sys.byteorder == "big":
            values.byteswap()
        return base64.b64encode(values.tobytes()).decode("ascii")


def _decode_stamps(names: list[str], text: str) -> Stamps:
    """The stamps of ``names``; none (all unknown) if the text does not decode to exactly them."""
    values = array("q")
    try:
        values.frombytes(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        return Stamps()
    if len(values) != 3 * len(names):
        return Stamps()
    if sys.byteorder == "big":
        values.byteswap()
    return Stamps(names, values)


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


def file_signature(
    path: Path | str, previous: RuleSig | None = None, *, reuse: bool = False
) -> RuleSig | None:
    """The signature of a file (not followed if a symlink), or ``None`` when absent. ``reuse``
    (the work tree's rule files; the fingerprint's files are always read): the digest is reused
    from ``previous`` only when the stat data is identical and was not recorded within two
    seconds of the file's last change; a signature read that soon gets :data:`RACY_CTIME`."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    head = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    # Exactness (git's racy-timestamp rule): the file may change again within the same tick
    # of the kernel's coarse clock, same size, leaving all four values as they are. Checking
    # the age only now, at reuse, let such an edit go unseen: the file was long unchanged by
    # the time it was compared (tests/unit/test_rule_signatures.py).
    fresh = time.time_ns() - st.st_ctime_ns <= _SIG_FRESH_NS
    if reuse and previous is not None and previous[:4] == head and not fresh:
        return previous
    if reuse and fresh:
        head = (st.st_size, st.st_mtime_ns, RACY_CTIME, st.st_ino)
    if stat.S_ISLNK(st.st_mode):
        digest = "link:" + sha1(os.fsencode(os.readlink(path))).hexdigest()
    elif stat.S_ISREG(st.st_mode):
        try:
            with open(path, "rb") as handle:
                digest = sha1(handle.read()).hexdigest()
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
        file_signature(ignore, previous.ignore if previous else None, reuse=True)
        if _access(ignore, os.F_OK, follow_symlinks=False)
        else None,
        file_signature(attributes, previous.attributes if previous else None, reuse=True)
        if _access(attributes, os.F_OK, follow_symlinks=False)
        else None,
        bool(rel_dir) and _access(base + "/.git", os.F_OK, follow_symlinks=False),
    )
    return PLAIN if rules == PLAIN else rules  # one shared value: cheap to tell apart


_access = os.access


STAMPS_ENV = "REWIND_DIR_STAMPS"
"""``0`` turns directory stamps off (see :func:`stamp_limit`); on by default."""


def stamp_limit(marker: Path | str) -> int:
    """The bound for :func:`dir_stamp`, read before any directory: :data:`STAMP_MARGIN_NS` before
    the earlier of the wall clock and ``marker``'s mtime (a file this capture touched when it
    began: the time as file systems see it, on the git directory's file system), or 0 (no stamp
    is known) when the marker cannot be read. Any change after this call gets timestamps at or
    after the bound plus the margin, minus the coarsest granularity (2 s, FAT): never the
    timestamps of a directory last changed before the bound."""
    # On by default since stop 45. They were off from stop 40, after the capture property test
    # once found a capture that differed from a fresh index with stamps on. The search for it
    # (docs/defects.md, "Directory stamps and nested repositories") found that failure in a
    # defect with stamps on or off (a new nested repository captured as its files), and one
    # of the stamps themselves (another directory moved to the same path with the same times:
    # the inode is now part of the stamp). REWIND_DIR_STAMPS=0 signs every directory again.
    if os.environ.get(STAMPS_ENV) == "0":
        return 0
    try:
        marker_ns = os.lstat(marker).st_mtime_ns
    except OSError:
        return 0
    return min(time.time_ns(), marker_ns) - STAMP_MARGIN_NS


def dir_stamp(path: str, limit_ns: int) -> Stamp:
    """A directory's ``(mtime_ns, ctime_ns, inode)``. Both times change whenever an entry in it
    is created, removed or renamed (ctime cannot be set by a user; mtime is the one coarse file
    systems such as FAT keep). The inode tells this directory from another one moved to the same
    path: renaming a parent changes neither time of the directories below it, and directories
    given their mtimes one after another (tar, ``rsync -a``, ``cp -p``, ``touch -d``) share both
    (the same tick of the kernel's coarse clock); an inode number used again belongs to a
    directory made after the stamp was read, so its ctime differs. An inode that is not stable
    (some FUSE or FAT mounts) only makes the stamp miss: signed again, never skipped wrongly.
    :data:`UNKNOWN_STAMP` when it is not a directory or cannot be read, or when it changed at or
    after ``limit_ns`` (:func:`stamp_limit`): a later change within the same tick of a coarse
    timestamp, or of a kernel clock lagging the wall clock, could otherwise leave both times as
    they are."""
    try:
        st = os.lstat(path)
    except OSError:
        return UNKNOWN_STAMP
    if not stat.S_ISDIR(st.st_mode) or max(st.st_mtime_ns, st.st_ctime_ns) >= limit_ns:
        return UNKNOWN_STAMP
    ino = st.st_ino  # stored as a signed 64-bit value (see the module)
    return (st.st_mtime_ns, st.st_ctime_ns, ino - (1 << 64) if ino >= 1 << 63 else ino)


def to_sign(
    root: str,
    dirs: Sequence[str],
    known: dict[str, DirRules],
    stamps: Stamps,
    limit_ns: int,
    *,
    after_rules: bool,
) -> Iterator[str]:
    """The directories of ``dirs`` whose rules must be signed again, each one's new stamp
    recorded in ``stamps`` before it is yielded (so before its signatures are read).

    Skipped: a directory whose stamp is known and the same as when its signatures were last
    read: the same directory (inode), none of whose entries was created, removed or renamed
    since, so no rule file or ``.git`` appeared or vanished there, and one without any
    (:data:`PLAIN`) still has none. A rule file may still have been edited in place: a
    directory holding one is skipped only ``after_rules``, in a pass that follows the capture's
    own pass over the rule directories (which signs them whatever their stamp). This loop runs
    for every known directory: one ``lstat`` and two comparisons each (~50 ms at 10k
    directories, against ~90 ms to sign)."""
    stamp_of = dir_stamp
    for rel in dirs:
        stamp = stamp_of(f"{root}/{rel}" if rel else root, limit_ns)
        if (
            stamps.get(rel) == stamp
            and stamp != UNKNOWN_STAMP
            and (after_rules or known[rel] is PLAIN or known[rel] == PLAIN)
        ):
            continue
        stamps[rel] = stamp
        yield rel


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
    "UNKNOWN_STAMP",
    "CaptureState",
    "DirRules",
    "RuleSig",
    "Stamps",
    "dir_signatures",
    "dir_stamp",
    "file_signature",
    "parent_dirs",
    "rule_dirs",
    "same_content",
    "stamp_limit",
    "to_sign",
    "topmost",
]
