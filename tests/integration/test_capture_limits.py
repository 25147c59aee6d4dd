"""First-capture limits (docs/design.md#first-capture-limits): a first capture that would add
more untracked files or bytes than ``rewind.snapshot.firstCaptureMaxFiles`` /
``firstCaptureMaxBytes`` is refused before any object is written, naming the directories that
hold most of it; ignored, protected and tracked content never counts; later captures are not
checked. Real repositories, real git, the real CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ledger.errors import CaptureTooLargeError
from ledger.git.capture.index import PrivateIndex
from ledger.git.capture.limits import heaviest_directories
from ledger.git.capture.scan import CaptureResult, capture_tree
from ledger.git.repo import GitRepo
from ledger.git.shadow.layout import shadow_home
from ledger.session.agent_dir import resolve_agent_dir
from ledger.settings import SnapshotSettings, resolve_settings
from tests.cli.helpers import run_process
from tests.gitkit import fresh_tree, git

FEW_FILES = SnapshotSettings(first_capture_max_files=20)
FEW_BYTES = SnapshotSettings(first_capture_max_bytes=20_000)
_LOOSE = re.compile(r"[0-9a-f]{2}")


def loose_objects(git_dir: Path) -> set[str]:
    """Every loose object and pack file under ``git_dir`` (what a capture would have written)."""
    objects = git_dir / "objects"
    found = {
        f"{d.name}{f.name}"
        for d in objects.iterdir()
        if _LOOSE.fullmatch(d.name)
        for f in d.iterdir()
    }
    return found | {p.name for p in (objects / "pack").glob("*")}


def fill(root: Path, directory: str, count: int, size: int = 10) -> None:
    """``count`` distinct files of at least ``size`` bytes under ``root/directory`` (ten per
    subfolder)."""
    for i in range(count):
        path = root / directory / f"part{i // 10}" / f"f{i}.dat"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"{directory} {i}\n".encode().ljust(size, b"."))


def _capture(repo: Path, settings: SnapshotSettings) -> CaptureResult:
    return capture_tree(GitRepo.discover(repo), settings)


def test_first_capture_over_the_file_limit_is_refused_before_writing_anything(repo: Path) -> None:
    fill(repo, "data", 30)
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("print('app')\n")
    gitrepo = GitRepo.discover(repo)
    before = loose_objects(gitrepo.git_dir)
    with pytest.raises(CaptureTooLargeError) as caught:
        capture_tree(gitrepo, FEW_FILES)
    error = caught.value
    assert error.files == 31 and error.setting == "rewind.snapshot.firstCaptureMaxFiles"
    assert error.biggest[0] == ("data/", 30, 300), "the biggest directory comes first"
    assert "data/ (30 files, 300 B)" in error.message
    assert "more than rewind.snapshot.firstCaptureMaxFiles allows (20 files)" in error.message
    assert error.hint is not None
    assert ".gitignore" in error.hint and "rewind.snapshot.protectedDirs" in error.hint
    assert "nothing was written" in error.hint
    # Nothing was written: no object, and no capture state (the next capture is first again).
    assert loose_objects(gitrepo.git_dir) == before
    assert PrivateIndex(gitrepo.git_dir).load_state() is None
    with pytest.raises(CaptureTooLargeError):
        capture_tree(gitrepo, FEW_FILES)
    # Raising the limit (0 = none) lets the same tree through, exactly.
    result = capture_tree(gitrepo, FEW_FILES.replace(first_capture_max_files=0))
    assert result.tree == fresh_tree(repo)


def test_first_capture_over_the_byte_limit_is_refused_naming_the_directory(repo: Path) -> None:
    fill(repo, "media", 5, size=8000)
    fill(repo, "notes", 3, size=100)
    gitrepo = GitRepo.discover(repo)
    before = loose_objects(gitrepo.git_dir)
    with pytest.raises(CaptureTooLargeError) as caught:
        capture_tree(gitrepo, FEW_BYTES)
    error = caught.value
    assert error.setting == "rewind.snapshot.firstCaptureMaxBytes"
    assert error.size == 40_300 and error.files == 8
    assert [b[0] for b in error.biggest] == ["media/part0/", "notes/part0/"]
    assert "(19.5 KiB)" in error.message
    assert loose_objects(gitrepo.git_dir) == before


@pytest.mark.parametrize("how", ["gitignored", "protected"])
def test_the_big_directory_left_out_captures_fine(repo: Path, how: str) -> None:
    fill(repo, "data", 30)
    settings = FEW_FILES
    if how == "gitignored":
        (repo / ".gitignore").write_text("data/\n")
    else:
        settings = FEW_FILES.replace(protected_dirs=(*FEW_FILES.protected_dirs, "data"))
    result = _capture(repo, settings)
    assert result.tree == (
        fresh_tree(repo, exclude=("data",)) if how == "protected" else fresh_tree(repo)
    )


def test_an_unignored_node_modules_does_not_count_while_protected(repo: Path) -> None:
    fill(repo, "web/node_modules", 40)
    result = _capture(repo, FEW_FILES)
    assert [s.path for s in result.skipped] == ["web/node_modules/"]
    # Protection off: the same directory is what the refusal names (the deepest one holding it).
    git_dir = GitRepo.discover(repo).git_dir
    PrivateIndex(git_dir).reset()
    with pytest.raises(CaptureTooLargeError) as caught:
        _capture(repo, FEW_FILES.replace(protected_dirs=()))
    assert [b[:2] for b in caught.value.biggest] == [("web/node_modules/", 40)]


@pytest.mark.parametrize("count", [30, 2100], ids=["few", "many-listed-once"])
def test_content_the_user_tracks_never_counts(repo: Path, count: int) -> None:
    # A big real repository: everything tracked, so a first capture adds no untracked file.
    fill(repo, "vendor", count)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "vendored")
    (repo / "new.txt").write_text("one untracked file\n")
    settings = SnapshotSettings(first_capture_max_files=5, first_capture_max_bytes=100)
    result = _capture(repo, settings)
    assert result.tree == fresh_tree(repo)


def test_later_captures_are_not_checked(repo: Path) -> None:
    assert _capture(repo, FEW_FILES).tree == fresh_tree(repo)
    fill(repo, "data", 60)  # more than the limit, added after the first capture
    assert _capture(repo, FEW_FILES).tree == fresh_tree(repo)


def test_the_biggest_directories_are_the_deepest_holding_most_of_it() -> None:
    paths = [f"home/me/Library/Caches/c{i}" for i in range(80)]
    paths += [f"home/me/Documents/d{i}" for i in range(10)] + ["top.txt", "other.txt"]
    named = heaviest_directories(paths, [1] * len(paths), by_files=True)
    assert named == [("home/me/Library/Caches/", 80, 80), ("./", 2, 2)]
    # By bytes, the heavy documents win.
    sizes = [1] * 80 + [1000] * 10 + [1, 1]
    by_bytes = heaviest_directories(paths, sizes, by_files=False)
    assert by_bytes[0] == ("home/me/Documents/", 10, 10_000)


def test_the_limits_are_settings_listed_and_validated(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "settings.json").write_text(
        json.dumps(
            {"rewind": {"snapshot": {"firstCaptureMaxFiles": 10, "firstCaptureMaxBytes": "big"}}}
        )
    )
    effective = resolve_settings(agent)
    assert effective.settings.snapshot.first_capture_max_files == 10
    assert effective.settings.snapshot.first_capture_max_bytes == 2 * 1024**3
    assert [w.split(":")[0] for w in effective.warnings] == ["rewind.snapshot.firstCaptureMaxBytes"]
    rows = {key: value for key, value, _ in effective.rows()}
    assert rows["rewind.snapshot.firstCaptureMaxFiles"] == 10
    assert rows["rewind.snapshot.firstCaptureMaxBytes"] == 2 * 1024**3


def _settings_file(values: dict[str, object]) -> None:
    path = resolve_agent_dir() / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rewind": {"snapshot": values}}))


def test_rewind_snapshot_prints_the_refusal_and_exits_1(repo: Path) -> None:
    fill(repo, "data", 30)
    _settings_file({"firstCaptureMaxFiles": 20})
    before = loose_objects(repo / ".git")
    result = run_process("snapshot", cwd=repo)
    assert result.code == 1
    assert "Traceback" not in result.err
    assert result.err.startswith("error: a first snapshot of ")
    assert "would add 30 untracked files" in result.err and "data/ (30 files" in result.err
    assert "\nhint: nothing was written; ignore them in .gitignore" in result.err
    assert loose_objects(repo / ".git") == before
    assert git(repo, "for-each-ref", "refs/pi-rewind").strip() == ""


def test_a_shadow_directory_is_refused_too_with_its_own_hint(tmp_path: Path) -> None:
    plain = tmp_path / "downloads"
    fill(plain, "photos", 30)
    (plain / "todo.txt").write_text("todo\n")
    _settings_file({"firstCaptureMaxFiles": 20})
    result = run_process("snapshot", cwd=plain)
    assert result.code == 1, result.err
    assert "Traceback" not in result.err
    assert "error: a first snapshot of " in result.err and "photos/ (30 files" in result.err
    assert "hint: nothing was written; add them to rewind.snapshot.shadowExcludes" in result.err
    home = shadow_home(resolve_agent_dir(), plain)
    written = [p for p in home.rglob("objects/*/*") if _LOOSE.fullmatch(p.parent.name)]
    assert written == []
    # Excluded as the hint says, the same directory is captured.
    _settings_file({"firstCaptureMaxFiles": 20, "shadowExcludes": ["photos/"]})
    assert run_process("snapshot", cwd=plain).code == 0
