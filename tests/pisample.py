"""The real Pi sample (vendored from shared/pi-fixtures/sample), made usable at a real path.

The sample is path-neutral: paths start with ``/pi-fixture-root`` and session directories use
its encoding. ``materialize_sample`` copies it and points every path at the copy, following the
fixture README's recipe.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SAMPLE = Path(__file__).resolve().parent / "fixtures" / "pi-sample"
PLACEHOLDER = "/pi-fixture-root"


def pi_encode_cwd(cwd: str) -> str:
    return "--" + re.sub(r"[/\\:]", "-", re.sub(r"^[/\\]", "", cwd)) + "--"


def materialize_sample(dst: Path) -> Path:
    shutil.copytree(SAMPLE, dst)
    root = dst.resolve()
    old_prefix = pi_encode_cwd(PLACEHOLDER)[:-2]
    new_prefix = pi_encode_cwd(str(root))[:-2]
    root_in_json = json.dumps(str(root))[1:-1]
    sessions = root / "agent-home" / "sessions"
    for d in list(sessions.iterdir()):
        assert d.name.startswith(old_prefix + "-"), d.name
        d.rename(sessions / (new_prefix + d.name[len(old_prefix) :]))
    for f in root.rglob("*"):
        if f.is_file() and f.suffix in (".jsonl", ".json"):
            text = f.read_text(encoding="utf-8")
            text = text.replace(old_prefix + "-", new_prefix + "-").replace(
                PLACEHOLDER, root_in_json
            )
            f.write_text(text, encoding="utf-8")
    return root


def manifest(root: Path = SAMPLE) -> dict[str, Any]:
    return json.loads((root / "manifest.json").read_text())


def iter_cases(root: Path = SAMPLE) -> Iterator[tuple[str, Path, dict[str, Any]]]:
    """(name, session file, Pi's expected values) for every file with golden data."""
    for scen, v in manifest(root)["scenarios"].items():
        for name, s in (v.get("sessions") or v.get("files") or {}).items():
            expected = json.loads((root / s["expected"]).read_text())
            yield f"{scen}/{name}", root / (s.get("file") or s["migrated"]), expected


def session_file(root: Path, scenario: str, name: str) -> Path:
    return root / manifest(root)["scenarios"][scenario]["sessions"][name]["file"]
