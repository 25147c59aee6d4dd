"""``rewind export`` / ``rewind import``: a session, its ancestors and its snapshots, as one file
or through a git remote.

Why it exists: rewind points live in one repository and one agent dir. Exporting gathers the
session file, its ``parentSession`` ancestors and every snapshot their ledgers reference;
importing puts them into another clone and agent dir so that ``rewind restore``, ``/tree`` and
``/fork`` work there exactly as on the original.

Import plans first and writes last: it reads and checks the whole archive (or the remote's
export commit), computes every target path, refuses a conflicting file, checks the snapshot
objects in a quarantine — and only then moves the objects in, appends to
``refs/pi-rewind/store`` and writes the session files. The session files keep their bytes except
the header line, whose ``cwd`` becomes the importing repository's (the same relative directory)
and whose ``parentSession`` points at the imported ancestor (or is dropped when the archive holds
no ancestor: an archive's path never leaks into a header here). Pi's naming is kept
(``<agent-dir>/sessions/--<encoded cwd>--/<time>_<id>.jsonl``), so importing twice is a no-op.

Invariants: writes only ``.git/objects``, ``refs/pi-rewind/store``, ``refs/pi-rewind/sessions/<id>``
(remote export only) and new session files under the agent dir's ``sessions``; never replaces an
existing session file.
"""

from __future__ import annotations

import errno
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ledger.errors import (
    CorruptArchiveError,
    HostileArchiveError,
    ImportConflictError,
    LedgerError,
)
from ledger.git.repo import GitRepo
from ledger.git.runner import ZERO_SHA, GitRunner
from ledger.git.store.bundle_objects import (
    ObjectView,
    head_commit,
    ref_target,
    write_blob,
    write_commit,
    write_tree,
)
from ledger.lineage import LineageReader
from ledger.portable.archive import (
    ArchiveContents,
    ArchiveFile,
    Limits,
    Manifest,
    SessionMember,
    open_archive,
    sha256,
    write_archive,
)
from ledger.portable.history import check_history
from ledger.portable.objects import (
    EXPORT_SUBJECT,
    SESSION_REF_PREFIX,
    append_to_store,
    check_commits,
    keepalive_chain,
    quarantine,
    read_bundle_header,
    write_bundle,
)
from ledger.session.parse import NoHeaderError, parse_session_bytes
from ledger.session.store import encode_cwd, read_bytes, session_file_name

_SAFE_NAME = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]{0,200}\.jsonl$")


def _ledger_version() -> str:
    try:
        from importlib.metadata import version

        return version("rewind-ledger")
    except Exception:
        return "unknown"


# --- export -------------------------------------------------------------------------------------


@dataclass
class ExportReport:
    session_id: str
    output: str
    sessions: int
    snapshots: int
    missing: list[str]
    bytes: int = 0
    ref: str | None = None
    remote: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session_id,
            "output": self.output,
            "sessions": self.sessions,
            "snapshots": self.snapshots,
            "missingSnapshots": self.missing,
            "bytes": self.bytes,
            "ref": self.ref,
            "remote": self.remote,
        }


@dataclass
class _Gathered:
    manifest: Manifest
    files: list[bytes]
    warnings: list[str]


def _gather(repo: GitRepo, path: Path) -> _Gathered:
    reader = LineageReader()
    chain = reader.lineage(reader.load(path, full=True).session or path)
    files: list[bytes] = []
    members: list[SessionMember] = []
    wanted: dict[str, None] = {}
    for n, link in enumerate(chain.links):
        data = read_bytes(link.path)  # bounded, regular files only
        files.append(data)
        full = reader.load(link.path, full=True)
        for ref in full.view.references:
            wanted.setdefault(ref.snapshot, None)
        members.append(
            SessionMember(
                file=f"sessions/{n}.jsonl",
                id=link.session_id,
                name=link.path.name,
                cwd=link.cwd,
                parent_session=link.parent_session,
                original_path=str(link.path),
                sha256=sha256(data),
                size=len(data),
            )
        )
    present = [sha for sha in wanted if repo.commit_exists(sha)]
    missing = [sha for sha in wanted if sha not in set(present)]
    head = head_commit(repo)
    manifest = Manifest(
        session_id=chain.current.session_id,
        original_cwd=chain.current.cwd,
        original_repo=str(repo.root),
        repository_head=head,
        exported_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        ledger_version=_ledger_version(),
        sessions=members,
        snapshots=present,
        missing_snapshots=missing,
    )
    warnings = list(chain.warnings)
    if missing:
        warnings.append(
            f"{len(missing)} referenced snapshot(s) are missing here (pruned) and are not exported"
        )
    return _Gathered(manifest, files, warnings)


def export_archive(repo: GitRepo, path: Path, output: Path) -> ExportReport:
    """Write the session at ``path``, its ancestors and their snapshots to ``output``."""
    gathered = _gather(repo, path)
    bundle = (
        write_bundle(repo, gathered.manifest.snapshots)
        if gathered.manifest.snapshots
        else b"# v2 git bundle\n\n"
    )
    manifest = gathered.manifest
    manifest = Manifest(
        **{**manifest.__dict__, "bundle_sha256": sha256(bundle), "bundle_size": len(bundle)}
    )
    size = write_archive(output, manifest, gathered.files, bundle)
    return ExportReport(
        manifest.session_id,
        str(output),
        len(manifest.sessions),
        len(manifest.snapshots),
        manifest.missing_snapshots,
        size,
        warnings=gathered.warnings,
    )


# --- import -------------------------------------------------------------------------------------


@dataclass
class ImportReport:
    session_id: str
    session_file: str
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    snapshots: int = 0
    appended: int = 0
    objects_moved: int = 0
    missing: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def noop(self) -> bool:
        return not self.written and not self.appended and not self.objects_moved

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session_id,
            "file": self.session_file,
            "written": self.written,
            "unchanged": self.unchanged,
            "snapshots": self.snapshots,
            "appended": self.appended,
            "objectsMoved": self.objects_moved,
            "missingSnapshots": self.missing,
            "noop": self.noop,
        }


@dataclass(frozen=True)
class _PlannedFile:
    target: Path
    data: bytes
    exists: bool


def _new_cwd(manifest: Manifest, member: SessionMember, repo: GitRepo) -> str:
    original_root = manifest.original_repo.rstrip("/") or "/"
    cwd = member.cwd or manifest.original_cwd or original_root
    rel = os.path.relpath(cwd, original_root) if cwd.startswith(original_root) else "."
    if rel == "." or rel.startswith(".."):
        return str(repo.root)
    return str(repo.root / rel)


def _rewrite_header(data: bytes, *, cwd: str, parent: str | None, member: SessionMember) -> bytes:
    end = data.find(b"\n")
    first, rest = (data, b"") if end < 0 else (data[:end], data[end:])
    try:
        header = orjson.loads(first)
    except orjson.JSONDecodeError as exc:
        raise CorruptArchiveError(f"{member.file}: the first line is not a session header") from exc
    if (
        not isinstance(header, dict)
        or header.get("type") != "session"
        or header.get("id") != member.id
    ):
        raise CorruptArchiveError(f"{member.file}: the header does not match the manifest")
    header["cwd"] = cwd
    if parent is not None:
        header["parentSession"] = parent
    else:
        header.pop("parentSession", None)
    return orjson.dumps(header) + rest


def plan_sessions(
    contents: ArchiveContents | ArchiveFile, repo: GitRepo, agent_dir: Path
) -> list[_PlannedFile]:
    """Target path and bytes of every session file, ancestors last; refuses conflicts.

    Session ``i + 1`` of the archive is the parent of session ``i``: its header's
    ``parentSession`` becomes that ancestor's new path. The last session has no imported parent,
    so its ``parentSession`` (a path on the exporting machine, or anything a hostile archive
    chose) is dropped rather than kept pointing somewhere on this one."""
    manifest = contents.manifest
    sessions_dir = agent_dir / "sessions"
    targets: list[Path] = []
    for member, data in zip(manifest.sessions, contents.sessions):
        try:
            header = parse_session_bytes(data).header
        except NoHeaderError as exc:
            raise CorruptArchiveError(f"{member.file} is not a Pi session file ({exc})") from exc
        if header.get("id") != member.id:
            raise CorruptArchiveError(f"{member.file}: session id does not match the manifest")
        name = member.name
        if not _SAFE_NAME.match(name) or member.id not in name:
            stamp = (
                header.get("timestamp")
                if isinstance(header.get("timestamp"), str)
                else "1970-01-01T00:00:00.000Z"
            )
            name = session_file_name(str(stamp), member.id)
            if not _SAFE_NAME.match(name):
                raise HostileArchiveError(f"unusable session id in the archive: {member.id!r}")
        cwd = _new_cwd(manifest, member, repo)
        targets.append(sessions_dir / encode_cwd(cwd) / name)
    planned: list[_PlannedFile] = []
    for index, (member, data) in enumerate(zip(manifest.sessions, contents.sessions)):
        parent = str(targets[index + 1]) if index + 1 < len(targets) else None
        cwd = _new_cwd(manifest, member, repo)
        new = _rewrite_header(data, cwd=cwd, parent=parent, member=member)
        target = targets[index]
        exists = False
        if os.path.lexists(target):
            # Session files only grow: an imported file that was continued since still starts
            # with the archive's bytes, and importing again changes nothing.
            if (
                target.is_symlink()
                or not target.is_file()
                or not target.read_bytes().startswith(new)
            ):
                raise ImportConflictError(target)
            exists = True
        planned.append(_PlannedFile(target, new, exists))
    return planned


def _write_new(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.parent.is_symlink():
        raise HostileArchiveError(f"{target.parent} is a symlink; refusing to write through it")
    temp = target.parent / f".{target.name}.{os.getpid()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temp, target)
    except OSError as exc:
        if exc.errno != errno.EEXIST or target.read_bytes() != data:
            raise ImportConflictError(target) from exc
    finally:
        temp.unlink(missing_ok=True)


def _finish(
    repo: GitRepo,
    planned: list[_PlannedFile],
    snapshots: list[str],
    manifest: Manifest,
    report: ImportReport,
) -> ImportReport:
    report.appended = len(append_to_store(repo, snapshots))
    for item in reversed(planned):  # ancestors first: a child never points at a missing parent
        if item.exists:
            report.unchanged.append(str(item.target))
        else:
            _write_new(item.target, item.data)
            report.written.append(str(item.target))
    report.written.reverse()
    report.unchanged.reverse()
    report.missing = list(manifest.missing_snapshots)
    if report.missing:
        report.warnings.append(
            f"{len(report.missing)} snapshot(s) were already missing at export; "
            "those rewind points are skipped"
        )
    return report


def import_archive(
    repo: GitRepo,
    agent_dir: Path,
    archive: Path,
    limits: Limits | None = None,
    *,
    force: bool = False,
) -> ImportReport:
    """Import an archive made by :func:`export_archive` (see the module docstring). Refused with
    :class:`UnrelatedRepositoryError` when its repository shares no history with ``repo``
    (:mod:`ledger.portable.history`), unless ``force``."""
    # The bundle is spooled next to the objects it may become (the same file system), not in
    # a possibly memory-backed /tmp; the spool is an anonymous file, gone when this ends.
    with open_archive(archive, limits, spool_dir=repo.common_dir / "objects") as contents:
        return _import_checked(repo, agent_dir, contents, force=force)


def _import_checked(
    repo: GitRepo, agent_dir: Path, contents: ArchiveFile, *, force: bool = False
) -> ImportReport:
    manifest = contents.manifest
    bundle = read_bundle_header(contents.bundle, max_refs=len(manifest.snapshots))
    shas = [sha for sha, _ref in bundle.refs]
    if sorted(shas) != sorted(manifest.snapshots):
        raise CorruptArchiveError("the bundle's snapshots do not match the manifest")
    planned = plan_sessions(contents, repo, agent_dir)
    report = ImportReport(manifest.session_id, str(planned[0].target), snapshots=len(shas))
    absent = [sha for sha in shas if not repo.commit_exists(sha)]
    if absent:
        with quarantine(repo) as q:
            q.index_pack_file(contents.bundle, bundle.pack_offset)
            view = q.object_view()
            check_commits(view, q.commits(), allowed=frozenset({"snapshot"}))
            check_commits(view, shas, allowed=frozenset({"snapshot"}))
            q.check_connected(shas)
            report.warnings += check_history(repo, view, manifest, shas, force=force)
            report.objects_moved = q.migrate()
    else:
        view = ObjectView.of(repo)
        check_commits(view, shas, allowed=frozenset({"snapshot"}))
        report.warnings += check_history(repo, view, manifest, shas, force=force)
    return _finish(repo, planned, shas, manifest, report)


# --- remote -------------------------------------------------------------------------------------


def export_remote(repo: GitRepo, path: Path, remote: str) -> ExportReport:
    """Push the session (an export commit over a keepalive chain of its snapshots) to
    ``refs/pi-rewind/sessions/<id>`` of ``remote``."""
    gathered = _gather(repo, path)
    manifest = gathered.manifest
    if not manifest.snapshots:
        raise LedgerError(
            f"session {manifest.session_id} references no existing snapshot",
            hint="nothing to share; record some prompts first",
        )
    chain = keepalive_chain(repo, manifest.snapshots)
    sessions = write_tree(
        repo,
        [
            (member.file.split("/", 1)[1], write_blob(repo, data), "blob")
            for member, data in zip(manifest.sessions, gathered.files)
        ],
    )
    tree = write_tree(
        repo,
        [
            ("manifest.json", write_blob(repo, manifest.encode()), "blob"),
            ("sessions", sessions, "tree"),
        ],
    )
    from ledger.git.store.chain import git_identity, offset_minutes

    when_s = int(time.time())
    commit = write_commit(
        repo,
        message=f"{EXPORT_SUBJECT}\n\nSession: {manifest.session_id}\n",
        tree=tree,
        parents=[chain],
        identity=git_identity(repo),
        when_s=when_s,
        offset_min=offset_minutes(when_s),
    )
    ref = SESSION_REF_PREFIX + manifest.session_id
    runner = GitRunner(repo.root, repo.git_dir)
    old = ref_target(repo, ref)
    runner.run(
        ["update-ref", "--no-deref", ref, commit, old if old is not None else ZERO_SHA],
        operation=f"update {ref}",
        config=[("core.logAllRefUpdates", "false")],
    )
    runner.run(
        ["push", "--quiet", "--no-verify", remote, f"+{ref}:{ref}"], operation=f"git push {remote}"
    )
    return ExportReport(
        manifest.session_id,
        f"{remote}:{ref}",
        len(manifest.sessions),
        len(manifest.snapshots),
        manifest.missing_snapshots,
        ref=ref,
        remote=remote,
        warnings=gathered.warnings,
    )


def _remote_ref(runner: GitRunner, remote: str, session: str) -> tuple[str, str]:
    out = runner.run(
        ["ls-remote", remote, SESSION_REF_PREFIX + "*"], operation=f"git ls-remote {remote}"
    ).text
    refs = [(line.split("\t")[1], line.split("\t")[0]) for line in out.splitlines() if "\t" in line]
    matches = [
        (ref, sha) for ref, sha in refs if ref[len(SESSION_REF_PREFIX) :].startswith(session)
    ]
    if len(matches) != 1:
        from ledger.errors import NameResolutionError

        raise NameResolutionError(
            "remote session",
            session,
            [ref[len(SESSION_REF_PREFIX) :] for ref, _ in (matches or refs)],
            ambiguous=len(matches) > 1,
            scope=f"remote {remote}",
        )
    return matches[0]


def import_remote(
    repo: GitRepo, agent_dir: Path, remote: str, session: str, *, force: bool = False
) -> ImportReport:
    """Fetch ``refs/pi-rewind/sessions/<session…>`` from ``remote`` into a quarantine, check it,
    then import it as an archive (refused for an unrelated repository unless ``force``)."""
    runner = GitRunner(repo.root, repo.git_dir)
    ref, tip = _remote_ref(runner, remote, session)
    with quarantine(repo) as q:
        if not repo.commit_exists(tip):
            q.run(
                [
                    "fetch",
                    "--quiet",
                    "--no-write-fetch-head",
                    "--no-tags",
                    "--no-recurse-submodules",
                    "--refmap=",
                    remote,
                    ref,
                ],
                f"git fetch {remote}",
            )
        view = q.object_view()
        kinds = check_commits(
            view, q.commits(), allowed=frozenset({"snapshot", "keepalive", "export"})
        )
        if (kinds.get(tip) or _kind(view, tip)) != "export":
            raise HostileArchiveError(f"{ref} on {remote} is not a rewind session export")
        contents, shas = _contents_from_commit(view, tip)
        check_commits(view, shas, allowed=frozenset({"snapshot"}))
        q.check_connected([tip])
        planned = plan_sessions(contents, repo, agent_dir)
        report = ImportReport(
            contents.manifest.session_id, str(planned[0].target), snapshots=len(shas)
        )
        report.warnings += check_history(repo, view, contents.manifest, shas, force=force)
        report.objects_moved = q.migrate()
    return _finish(repo, planned, shas, contents.manifest, report)


def _kind(view: ObjectView, sha: str) -> str:
    from ledger.portable.objects import classify

    return classify(view, sha)


def _contents_from_commit(view: ObjectView, tip: str) -> tuple[ArchiveContents, list[str]]:
    commit = view.commit(tip)
    assert commit is not None
    try:
        manifest = Manifest.decode(view.blob_data(view.tree_entry(commit.tree, "manifest.json")))
        sessions_tree = view.tree_entry(commit.tree, "sessions")
    except KeyError as exc:
        raise CorruptArchiveError("the remote export has no manifest or sessions") from exc
    files = []
    for member in manifest.sessions:
        name = member.file.split("/", 1)[1] if member.file.startswith("sessions/") else ""
        try:
            data = view.blob_data(view.tree_entry(sessions_tree, name))
        except KeyError as exc:
            raise CorruptArchiveError(f"the remote export lacks {member.file}") from exc
        if sha256(data) != member.sha256:
            raise CorruptArchiveError(f"{member.file} does not match its checksum")
        files.append(data)
    shas = _chain_snapshots(view, commit.parents[0])
    if sorted(shas) != sorted(manifest.snapshots):
        raise CorruptArchiveError("the remote export's snapshots do not match its manifest")
    return ArchiveContents(manifest, files, b""), shas


def _chain_snapshots(view: ObjectView, head: str) -> list[str]:
    """The snapshots a keepalive chain keeps, oldest first (as :meth:`Store.snapshots`)."""
    found: list[str] = []
    sha: str | None = head
    seen: set[str] = set()
    while sha and sha not in seen:
        seen.add(sha)
        kind = _kind(view, sha)
        if kind == "snapshot":
            found.append(sha)
            break
        if kind != "keepalive":
            raise HostileArchiveError(
                f"commit {sha[:12]} in the remote export is not a keepalive or a snapshot"
            )
        commit = view.commit(sha)
        assert commit is not None
        parents = list(commit.parents)
        found.append(parents[-1])
        sha = parents[0] if len(parents) == 2 else None
    return list(dict.fromkeys(reversed(found)))


__all__ = [
    "ExportReport",
    "ImportReport",
    "export_archive",
    "export_remote",
    "import_archive",
    "import_remote",
    "plan_sessions",
]
