"""Every documented install (docs/pi.md#install) starts the real Pi and the extension answers:

- ``pi install <checkout>``: the package's ``pi`` manifest loads the extension, which sets up its
  own Python side (a venv inside the installed package) when no ``rewind`` is on PATH, says where
  its ``rewind`` command is and how to put it on PATH, then records. Needs the network for ``pip
  install`` (pygit2, orjson, anytree, pydantic, pygments) unless pip's cache has them; pip's
  cache is kept next to the Pi cache so reruns are quick.
- ``pi -e <checkout>/tools/pi-extension/rewind-ledger.ts`` and the folder copy into the agent
  dir's ``extensions/`` (Pi loads its ``index.ts``), each with ``rewind`` on PATH (``pip install``
  of the checkout, here this checkout's venv): the prompt gets its rewind-turn record.

Each runs Pi with an isolated agent dir and without ``--no-extensions``, as a user would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ledger.records import TURN
from ledger.session.store import read_session
from tests.e2e.pikit import CACHE, SCRIPTED, turns, write

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["ledger", "pyproject.toml", "README.md", "package.json", "tools/pi-extension"]


def checkout_copy(dest: Path) -> Path:
    """What a clone would hold of the package (its tracked, needed files), without any venv."""
    for name in SHIPPED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def path_without_rewind() -> str:
    keep = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "rewind").exists() and ".venv" not in Path(d).parts
    ]
    return os.pathsep.join(keep)


def test_pi_install_of_a_checkout_sets_up_python_and_records_a_point(
    pi_cli: Path, project: Path, tmp_path: Path
) -> None:
    package = checkout_copy(tmp_path / "rewind-ledger")
    agent_dir = tmp_path / "clean-agent"
    agent_dir.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("REWIND_", "VIRTUAL_ENV", "PYTHON"))
    }
    env.update(
        PI_CODING_AGENT_DIR=str(agent_dir),
        PI_OFFLINE="1",
        PI_TELEMETRY="0",
        PATH=path_without_rewind(),
        PIP_CACHE_DIR=str(CACHE.parent / "pip-cache"),
        REWIND_AUTO_WATCH="0",  # no watcher outliving the test by ten minutes (tests/conftest.py)
    )
    assert shutil.which("rewind", path=env["PATH"]) is None
    node = shutil.which("node") or "node"

    installed = subprocess.run(
        [node, str(pi_cli), "install", str(package)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    settings = json.loads((agent_dir / "settings.json").read_text())
    assert any("rewind-ledger" in json.dumps(entry) for entry in settings.get("packages", [])), (
        settings
    )

    prompt = "hello " + turns([write("a.txt", "one\n")])
    run = subprocess.run(
        [
            node,
            str(pi_cli),
            "--provider",
            "scripted",
            "--model",
            "scripted-1",
            "--no-skills",
            "--no-prompt-templates",
            "--no-context-files",
            "--no-themes",
            "-e",
            str(SCRIPTED),
            "-p",
            prompt,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Rewind: setting up its Python side" in run.stderr, run.stderr[-3000:]
    assert "bridge unavailable" not in run.stderr, run.stderr[-3000:]
    venv = package / ".rewind-venv"
    assert (venv / "bin" / "rewind").exists(), "the venv lives inside the installed package"
    # `rewind` is not on PATH after `pi install`: the ready message says where it is and how.
    assert f"the `rewind` command is {venv}/bin/rewind" in run.stderr, run.stderr[-3000:]
    assert f'export PATH="{venv}/bin:$PATH"' in run.stderr, run.stderr[-3000:]
    (session,) = (agent_dir / "sessions").rglob("*.jsonl")
    (turn,) = [e.raw["data"] for e in read_session(session).entries if e.custom_type == TURN]
    assert len(turn["bindings"]) == 3 and (project / "a.txt").read_text() == "one\n"

    again = subprocess.run(
        [
            node,
            str(pi_cli),
            "--provider",
            "scripted",
            "--model",
            "scripted-1",
            "--no-skills",
            "--no-prompt-templates",
            "--no-context-files",
            "--no-themes",
            "-e",
            str(SCRIPTED),
            "-p",
            "again " + turns([write("b.txt", "2\n")]),
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert again.returncode == 0 and "setting up" not in again.stderr, "the setup runs once"


def clean_env(agent_dir: Path, path: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("REWIND_", "VIRTUAL_ENV", "PYTHON"))
    }
    env.update(PI_CODING_AGENT_DIR=str(agent_dir), PI_OFFLINE="1", PI_TELEMETRY="0", PATH=path)
    env["REWIND_AUTO_WATCH"] = "0"  # no watcher outliving the test by ten minutes
    return env


def path_with_rewind() -> str:
    """PATH with a ``rewind`` on it (what ``pip install /path/to/rewind-ledger`` gives): the one
    next to this interpreter, this checkout's venv."""
    rewind = Path(sys.executable).parent / "rewind"
    assert rewind.exists(), f"no {rewind}: the tests run from the project's venv"
    return os.pathsep.join([str(rewind.parent), path_without_rewind()])


def run_pi(pi_cli: Path, project: Path, env: dict[str, str], *extension: str) -> str:
    """One ``pi -p`` prompt that writes a.txt; the rewind-turn record of that prompt."""
    node = shutil.which("node") or "node"
    run = subprocess.run(
        [
            node,
            str(pi_cli),
            "--provider",
            "scripted",
            "--model",
            "scripted-1",
            "--no-skills",
            "--no-prompt-templates",
            "--no-context-files",
            "--no-themes",
            "-e",
            str(SCRIPTED),
            *extension,
            "-p",
            "hello " + turns([write("a.txt", "one\n")]),
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stderr


def assert_recorded(agent_dir: Path, project: Path, stderr: str) -> None:
    assert "Failed to load extension" not in stderr and "error" not in stderr.lower(), stderr
    assert "bridge unavailable" not in stderr, stderr
    (session,) = (agent_dir / "sessions").rglob("*.jsonl")
    turns_recorded = [e.raw["data"] for e in read_session(session).entries if e.custom_type == TURN]
    assert len(turns_recorded) == 1, "the extension loaded and its bridge answered"
    assert len(turns_recorded[0]["bindings"]) == 3 and (project / "a.txt").read_text() == "one\n"


def test_pi_e_of_the_checkouts_extension_file_records_a_point(
    pi_cli: Path, project: Path, tmp_path: Path
) -> None:
    package = checkout_copy(tmp_path / "rewind-ledger")
    agent_dir = tmp_path / "clean-agent"
    agent_dir.mkdir()
    env = clean_env(agent_dir, path_with_rewind())
    extension = package / "tools" / "pi-extension" / "rewind-ledger.ts"
    stderr = run_pi(pi_cli, project, env, "-e", str(extension))
    assert_recorded(agent_dir, project, stderr)
    assert not (package / ".rewind-venv").exists(), "rewind on PATH: no venv set up"


def test_the_folder_copy_into_the_agent_dirs_extensions_loads_its_index_and_records(
    pi_cli: Path, project: Path, tmp_path: Path
) -> None:
    """``cp -r tools/pi-extension ~/.pi/agent/extensions/rewind-ledger``: Pi discovers the folder
    and loads its ``index.ts``, which must parse (issue 32: a ``*/`` in its comment did not)."""
    agent_dir = tmp_path / "clean-agent"
    folder = agent_dir / "extensions" / "rewind-ledger"
    shutil.copytree(ROOT / "tools" / "pi-extension", folder)
    env = clean_env(agent_dir, path_with_rewind())
    stderr = run_pi(pi_cli, project, env)
    assert_recorded(agent_dir, project, stderr)
