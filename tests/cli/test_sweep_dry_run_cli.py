"""``rewind sweep --dry-run`` says what ``rewind sweep`` then does (issue 32, item 8).

The dry run used to print "the store already keeps exactly these snapshots: nothing to rewrite"
whenever it counted no object that would become unreachable, while the real sweep rewrote the
store: with no store ref, with the ref pointing straight at a snapshot, and when another ref
also reaches the chain. Each state here is one that disagreed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.demo import DemoWorld, build_world, run_prompts
from ledger.git.repo import GitRepo
from ledger.git.store.chain import STORE_REF, Store
from tests.cli.helpers import run_cli
from tests.gitkit import git


@pytest.fixture
def world(tmp_path: Path) -> DemoWorld:
    return run_prompts(build_world(tmp_path / "demo"))


def _no_store_ref(world: DemoWorld) -> None:
    git(world.repo, "update-ref", "-d", STORE_REF)


def _ref_at_a_snapshot(world: DemoWorld) -> None:
    first = Store(GitRepo.discover(world.repo)).snapshots()[0]
    git(world.repo, "update-ref", STORE_REF, first)


def _another_ref_reaches_the_chain(world: DemoWorld) -> None:
    git(world.repo, "update-ref", "refs/backup/store", STORE_REF)


@pytest.mark.parametrize(
    ("prepare", "limits"),
    [
        (_no_store_ref, ()),
        (_ref_at_a_snapshot, ()),
        (_another_ref_reaches_the_chain, ("--max-snapshots", "1")),
        (_another_ref_reaches_the_chain, ()),
        (lambda world: None, ("--max-snapshots", "1")),
        (lambda world: None, ()),
    ],
    ids=["no-ref", "ref-at-snapshot", "backup-ref-drop", "backup-ref-same", "drop", "same"],
)
def test_the_dry_run_prints_what_the_sweep_then_does(
    world: DemoWorld, capsys: pytest.CaptureFixture[str], prepare, limits: tuple[str, ...]
) -> None:
    prepare(world)

    def sweep(*args: str):
        result = run_cli(
            capsys, "--agent-dir", world.agent_dir, "sweep", *args, *limits, cwd=world.repo
        )
        assert result.code == 0, result.err
        return result

    head = git(world.repo, "rev-parse", "-q", "--verify", STORE_REF, check=False).strip()
    dry_text = sweep("--dry-run").out
    dry = sweep("--dry-run", "--json").json_lines()[0]
    assert git(world.repo, "rev-parse", "-q", "--verify", STORE_REF, check=False).strip() == head
    real = sweep("--json").json_lines()[0]

    assert real["rewritten"] == ("nothing to rewrite" not in dry_text), dry_text
    if real["rewritten"]:
        assert "would rewrite refs/pi-rewind/store" in dry_text or (
            "would create refs/pi-rewind/store" in dry_text
        )
    assert dry["decision"] == real["decision"]
    assert (dry["decision"]["action"] == "rewrite") == real["rewritten"]
