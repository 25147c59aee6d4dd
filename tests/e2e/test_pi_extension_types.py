"""The extension type-checks against the real Pi's own type declarations.

Why: Pi loads ``tools/pi-extension/*.ts`` with jiti, which strips types and checks none, so a
call that does not fit Pi's API (a renamed event, a wrong argument) was found only when a test
happened to run that path, or by a user. Here TypeScript's compiler and Node's types (pinned,
installed with npm beside Pi's cache) check all four files under
``tools/pi-extension/tsconfig.json`` (strict, no unused names, no implicit returns), with the
modules they import resolved in the installed Pi 0.73.1 (``@mariozechner/pi-coding-agent``,
``pi-tui``, ``pi-ai``, ``typebox``).

The check is shown able to fail: the same files with one call that Pi's API does not accept are
refused, with TypeScript's message naming the line.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.pikit import EXTENSION, PiUnavailable, ensure_typescript

EXTENSION_DIR = EXTENSION.parent


@pytest.fixture(scope="module")
def tools(pi_cli: Path) -> Path:
    """The ``node_modules`` with TypeScript's compiler and Node's types."""
    try:
        return ensure_typescript()
    except PiUnavailable as exc:  # node and npm exist (pi_cli): a failed install is a failure
        pytest.fail(str(exc))


def _check(
    tools: Path, pi_cli: Path, sources: Path, tmp_path: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """Run the pinned ``tsc`` on ``sources``' tsconfig.json, with bare imports resolved in Pi's
    ``node_modules`` and Node's types the pinned ones."""
    pi_modules = pi_cli.parents[3]  # …/node_modules/@mariozechner/pi-coding-agent/dist/cli.js
    config = tmp_path / "tsconfig.check.json"
    config.write_text(
        json.dumps(
            {
                "extends": str(sources / "tsconfig.json"),
                "compilerOptions": {
                    "paths": {"*": [f"{pi_modules}/*"]},
                    "typeRoots": [str(tools / "@types")],
                },
            }
        )
    )
    tsc = tools / "typescript" / "bin" / "tsc"
    return subprocess.run(
        ["node", str(tsc), "-p", str(config), "--pretty", "false", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_extension_type_checks_against_the_real_pi_types(
    tools: Path, pi_cli: Path, tmp_path: Path
) -> None:
    result = _check(tools, pi_cli, EXTENSION_DIR, tmp_path, "--listFiles")
    errors = [line for line in result.stdout.splitlines() if "error TS" in line]
    assert result.returncode == 0 and not errors, result.stdout[-4000:] + result.stderr[-2000:]
    read = result.stdout.splitlines()
    for module in (
        "@mariozechner/pi-coding-agent",
        "@mariozechner/pi-tui",
        "@mariozechner/pi-ai",
        "typebox",
    ):
        assert any(f"/node_modules/{module}/" in f for f in read), (
            f"the check did not read {module}'s declarations: its imports were not resolved"
        )
    assert any(f.startswith(f"{tools}/@types/node/") for f in read), "not the pinned Node types"
    for name in ("index.ts", "rewind-ledger.ts", "rewind-command.ts", "rewind-tool.ts"):
        assert str(EXTENSION_DIR / name) in read, f"{name} was not checked"


def test_a_call_that_pis_api_does_not_accept_fails_the_check(
    tools: Path, pi_cli: Path, tmp_path: Path
) -> None:
    sources = tmp_path / "pi-extension"
    shutil.copytree(EXTENSION_DIR, sources)
    tool = sources / "rewind-tool.ts"
    text = tool.read_text()
    # A command registered under a number instead of a name: only Pi's declaration of
    # ExtensionAPI.registerCommand can refuse it.
    tool.write_text(
        text
        + "\nexport function probe(pi: ExtensionAPI): void {\n"
        + '\tpi.registerCommand(42, { description: "x", handler: async () => {} });\n}\n'
    )
    line = text.count("\n") + 3
    result = _check(tools, pi_cli, sources, tmp_path)
    assert result.returncode != 0
    assert f"rewind-tool.ts({line}," in result.stdout and "error TS2345" in result.stdout, (
        result.stdout
    )
