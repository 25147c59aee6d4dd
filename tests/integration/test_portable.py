"""``rewind export`` / ``rewind import`` between two clones and two agent dirs, with real git."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from ledger.errors import CorruptArchiveError, HostileArchiveError, ImportConflictError
from ledger.git.repo import GitRepo
from ledger.git.store.chain import Store
from ledger.lineage import LineageReader
from ledger.portable import export_archive, export_remote, import_archive, import_remote
from ledger.portable.archive import read_archive
from ledger.review.show import open_review
from tests.cli.helpers import run_process
from tests.enginekit import Agent, fresh_index_tree, tree_of_commit
from tests.gitkit import git


def _session(repo: Path, agent_dir: Path) -> Agent:
    agent = Agent.start(repo, agent_dir)
    for n in range(3):

        def change(r: Path, n: int = n) -> None:
            (r / "src").mkdir(exist_ok=True)
            (r / "src" / f"m{n}.py").write_text(f"print({n})\n")
            (r / "README.md").write_text(f"hello {n}\n")
            (r / "run.sh").write_text("#!/bin/sh\n")
            (r / "run.sh").chmod(0o755 if n % 2 else 0o644)

        agent.prompt(f"step {n}", change)
    return agent


def _clone(repo: Path, tmp_path: Path) -> Path:
    clone = tmp_path / "elsewhere" / "clone"
    clone.parent.mkdir()
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    return clone


def _snapshot_files(store_repo: Path) -> set[str]:
    return set(Store(GitRepo.discover(store_repo)).snapshots())


def test_export_import_into_a_fresh_clone_restores_every_point_byte_exactly(
    repo: Path, tmp_path: Path
) -> None:
    agent = _session(repo, tmp_path / "agent")
    archive = tmp_path / "s.rewind"
    report = export_archive(GitRepo.discover(repo), agent.session_file, archive)
    assert report.snapshots >= 4 and report.sessions == 1
    bundle = tmp_path / "b.bundle"
    bundle.write_bytes(read_archive(archive).bundle)
    clone = _clone(repo, tmp_path)
    git(clone, "bundle", "verify", "-q", str(bundle))  # git itself accepts the bundle
    other_agent = tmp_path / "agent2"
    imported = import_archive(GitRepo.discover(clone), other_agent, archive)
    assert imported.appended == report.snapshots and len(imported.written) == 1
    target = Path(imported.session_file)
    assert target.parent.name == "--" + str(clone.resolve()).lstrip("/").replace("/", "-") + "--"
    assert _snapshot_files(clone) >= set(read_archive(archive).manifest.snapshots)
    points = LineageReader().lineage(target).points(GitRepo.discover(clone).commit_exists)
    assert len(points) >= 6
    for entry_id, (sha, _link) in points.items():
        result = run_process(
            "restore",
            target,
            entry_id,
            "--mode",
            "files",
            "--yes",
            "--agent-dir",
            other_agent,
            cwd=clone,
        )
        assert result.code == 0, result.err
        assert fresh_index_tree(clone) == tree_of_commit(clone, sha), entry_id
    again = import_archive(GitRepo.discover(clone), other_agent, archive)
    assert again.noop and again.unchanged == [str(target)]


def test_lineage_survives_an_exported_fork_chain(repo: Path, tmp_path: Path) -> None:
    agent = _session(repo, tmp_path / "agent")
    result = run_process(
        "fork",
        agent.session_file,
        agent.session().branch()[-2].id,
        "--json",
        "--yes",
        "--agent-dir",
        agent.agent_dir,
        cwd=repo,
    )
    assert result.code == 0, result.err
    child = Path(result.json_lines()[0]["child"])
    archive = tmp_path / "fork.rewind"
    report = export_archive(GitRepo.discover(repo), child, archive)
    assert report.sessions == 2
    clone = _clone(repo, tmp_path)
    imported = import_archive(GitRepo.discover(clone), tmp_path / "agent2", archive)
    child_copy, parent_copy = (Path(p) for p in imported.written)
    chain = LineageReader().lineage(child_copy)
    assert [link.path for link in chain.links] == [child_copy.resolve(), parent_copy.resolve()]
    original = open_review(GitRepo.discover(repo), child)
    copy = open_review(GitRepo.discover(clone), child_copy)
    assert [(s.entry_id, s.before, s.after) for s in copy.steps] == [
        (s.entry_id, s.before, s.after) for s in original.steps
    ]


def test_a_bare_repository_works_as_the_remote(repo: Path, tmp_path: Path) -> None:
    agent = _session(repo, tmp_path / "agent")
    bare = tmp_path / "hosting.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "hub", str(bare))
    git(repo, "push", "-q", "hub", "HEAD:refs/heads/main")
    report = export_remote(GitRepo.discover(repo), agent.session_file, "hub")
    assert git(bare, "for-each-ref", "refs/pi-rewind/").count("refs/pi-rewind/sessions/") == 1
    clone = tmp_path / "teammate"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    imported = import_remote(
        GitRepo.discover(clone), tmp_path / "agent2", "origin", report.session_id[:13]
    )
    assert imported.appended == report.snapshots
    assert _snapshot_files(clone) >= _snapshot_files(repo) & set(
        Store(GitRepo.discover(clone)).snapshots()
    )
    again = import_remote(GitRepo.discover(clone), tmp_path / "agent2", "origin", report.session_id)
    assert again.noop
    before = set(git(clone, "for-each-ref", "--format=%(refname)").split())
    assert "refs/pi-rewind/store" in before and not any(
        r.startswith("refs/pi-rewind/sessions") for r in before
    )


def _tamper(archive: Path, out: Path, edit) -> Path:
    members = []
    with tarfile.open(archive, "r:gz") as tar:
        for info in tar:
            data = tar.extractfile(info).read()  # type: ignore[union-attr]
            members.append((info, data))
    with tarfile.open(out, "w:gz") as tar:
        for info, data in edit(members):
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out


def _state(clone: Path, agent_dir: Path) -> tuple[str, list[str]]:
    refs = git(clone, "for-each-ref")
    files = sorted(str(p) for p in agent_dir.rglob("*")) if agent_dir.exists() else []
    objects = sorted(str(p.relative_to(clone)) for p in (clone / ".git" / "objects").rglob("*"))
    return refs, files + objects


@pytest.mark.parametrize(
    "attack", ["dotdot", "absolute", "symlink", "extra", "truncated", "not-snapshot", "checksum"]
)
def test_hostile_or_corrupt_archives_are_refused_with_nothing_written(
    repo: Path, tmp_path: Path, attack: str
) -> None:
    agent = _session(repo, tmp_path / "agent")
    archive = tmp_path / "good.rewind"
    export_archive(GitRepo.discover(repo), agent.session_file, archive)
    bad = tmp_path / "bad.rewind"

    def add(name: str, data: bytes | None, kind: bytes = tarfile.REGTYPE, link: str = ""):
        info = tarfile.TarInfo(name)
        info.size = len(data or b"")
        info.type = kind
        info.linkname = link
        return lambda members: [*members, (info, data)]

    if attack == "dotdot":
        _tamper(archive, bad, add("../../evil.jsonl", b"x"))
    elif attack == "absolute":
        _tamper(archive, bad, add("/tmp/evil.jsonl", b"x"))
    elif attack == "symlink":
        _tamper(archive, bad, add("sessions/5.jsonl", None, tarfile.SYMTYPE, "/etc/passwd"))
    elif attack == "extra":
        _tamper(archive, bad, add("sessions/7.jsonl", b"{}"))
    elif attack == "truncated":
        data = archive.read_bytes()
        bad.write_bytes(data[: len(data) * 2 // 3])
    elif attack == "checksum":

        def flip(members):
            return [
                (i, d.replace(b"step 1", b"step X") if i.name == "sessions/0.jsonl" else d)
                for i, d in members
            ]

        _tamper(archive, bad, flip)
    else:  # a bundle whose commit is an ordinary commit, manifest rewritten to match
        from ledger.portable.archive import Manifest, sha256, write_archive
        from ledger.portable.objects import SNAPSHOT_REF_PREFIX, pack_objects

        contents = read_archive(archive)
        head = git(repo, "rev-parse", "HEAD").strip()
        bundle = (
            b"# v2 git bundle\n"
            + f"{head} {SNAPSHOT_REF_PREFIX}{head}\n\n".encode()
            + pack_objects(GitRepo.discover(repo), [head])
        )
        manifest = Manifest(
            **{
                **contents.manifest.__dict__,
                "snapshots": [head],
                "bundle_sha256": sha256(bundle),
                "bundle_size": len(bundle),
            }
        )
        write_archive(bad, manifest, contents.sessions, bundle)
    clone = tmp_path / "empty-clone"
    git(tmp_path, "init", "-q", str(clone))
    agent_dir = tmp_path / "agent2"
    before = _state(clone, agent_dir)
    with pytest.raises((HostileArchiveError, CorruptArchiveError)) as err:
        import_archive(GitRepo.discover(clone), agent_dir, bad)
    assert err.value.hint and "nothing was written" in err.value.hint
    assert _state(clone, agent_dir) == before
    assert not (tmp_path / "evil.jsonl").exists()


def test_an_import_never_replaces_a_different_session_file(repo: Path, tmp_path: Path) -> None:
    agent = _session(repo, tmp_path / "agent")
    archive = tmp_path / "s.rewind"
    export_archive(GitRepo.discover(repo), agent.session_file, archive)
    clone = _clone(repo, tmp_path)
    first = import_archive(GitRepo.discover(clone), tmp_path / "agent2", archive)
    path = Path(first.session_file)
    path.write_text(path.read_text().replace("step 1", "step X"))
    with pytest.raises(ImportConflictError):
        import_archive(GitRepo.discover(clone), tmp_path / "agent2", archive)


def test_an_import_into_a_linked_worktree_lands_in_the_shared_object_store(
    repo: Path, tmp_path: Path
) -> None:
    # A linked worktree's git dir (.git/worktrees/<name>) has no objects/ of its own: the
    # quarantine and the bundle's spool file live in the common dir.
    agent = _session(repo, tmp_path / "agent")
    archive = tmp_path / "s.rewind"
    report = export_archive(GitRepo.discover(repo), agent.session_file, archive)
    clone = tmp_path / "elsewhere" / "clone"
    # --no-local: a local clone would copy every object, snapshots too, and import nothing.
    git(tmp_path, "clone", "-q", "--no-local", str(repo), str(clone))
    linked = tmp_path / "linked"
    git(clone, "worktree", "add", "-q", str(linked))
    imported = import_archive(GitRepo.discover(linked), tmp_path / "agent2", archive)
    assert imported.appended == report.snapshots
    assert _snapshot_files(linked) >= set(read_archive(archive).manifest.snapshots)
    assert _snapshot_files(clone) == _snapshot_files(linked), "one store, shared"


def _unrelated_project(tmp_path: Path) -> Path:
    other = tmp_path / "other-project"
    other.mkdir()
    git(other, "init", "-q")
    (other / "app.c").write_text("int main(void) { return 0; }\n")
    git(other, "add", "-A")
    git(other, "-c", "user.name=O", "-c", "user.email=o@example.com", "commit", "-qm", "other")
    return other


def test_an_import_into_an_unrelated_project_is_refused_and_writes_nothing(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli.helpers import run_cli

    agent = _session(repo, tmp_path / "agent")
    archive = tmp_path / "s.rewind"
    export_archive(GitRepo.discover(repo), agent.session_file, archive)
    other = _unrelated_project(tmp_path)
    before = _state(other, tmp_path / "agent2")
    refused = run_cli(capsys, "import", archive, "--agent-dir", tmp_path / "agent2", cwd=other)
    assert refused.code == 1
    assert "error: import refused: the archive comes from" in refused.err
    assert "shares no commit with" in refused.err and "--force" in refused.err
    assert _state(other, tmp_path / "agent2") == before, "nothing written"
    forced = run_cli(
        capsys, "import", archive, "--force", "--agent-dir", tmp_path / "agent2", cwd=other
    )
    assert forced.code == 0, forced.err
    assert "warning: imported with --force although the archive comes from" in forced.err
    assert _snapshot_files(other) >= set(read_archive(archive).manifest.snapshots)


def test_an_import_into_a_clone_made_before_the_sessions_commits_is_accepted(
    repo: Path, tmp_path: Path
) -> None:
    # The clone lacks the exporter's newest commits (repositoryHead) but knows the HEAD the
    # first snapshots were taken on.
    clone = tmp_path / "early-clone"
    git(tmp_path, "clone", "-q", "--no-local", str(repo), str(clone))
    agent = _session(repo, tmp_path / "agent")
    (repo / "later.txt").write_text("later\n")
    git(repo, "add", "later.txt")
    git(repo, "-c", "user.name=L", "-c", "user.email=l@example.com", "commit", "-qm", "later")
    archive = tmp_path / "s.rewind"
    export_archive(GitRepo.discover(repo), agent.session_file, archive)
    imported = import_archive(GitRepo.discover(clone), tmp_path / "agent2", archive)
    assert imported.appended and not imported.warnings


def test_a_remote_import_into_an_unrelated_project_is_refused(repo: Path, tmp_path: Path) -> None:
    from ledger.errors import UnrelatedRepositoryError

    agent = _session(repo, tmp_path / "agent")
    bare = tmp_path / "hosting.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "hub", str(bare))
    report = export_remote(GitRepo.discover(repo), agent.session_file, "hub")
    other = _unrelated_project(tmp_path)
    git(other, "remote", "add", "hub", str(bare))
    refs_before = git(other, "for-each-ref")
    with pytest.raises(UnrelatedRepositoryError):
        import_remote(GitRepo.discover(other), tmp_path / "agent2", "hub", report.session_id)
    assert git(other, "for-each-ref") == refs_before
    forced = import_remote(
        GitRepo.discover(other), tmp_path / "agent2", "hub", report.session_id, force=True
    )
    assert forced.appended == report.snapshots and forced.warnings
