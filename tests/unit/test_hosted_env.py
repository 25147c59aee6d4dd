"""The environment a watcher compares before it hosts a Pi session: the same keys on both sides
(``bridge_env`` in ledger/bridge/session_env.py, ``bridgeEnv`` in the extension), or sessions would be
declined for nothing, or hosted where a bridge of their own would behave otherwise."""

from __future__ import annotations

import json
import re

from ledger.bridge import session_env
from ledger.bridge.session_env import bridge_env
from tests.gitkit import ROOT

EXTENSION = ROOT / "tools" / "pi-extension" / "rewind-ledger.ts"


def _ts_list(name: str) -> list[str]:
    match = re.search(rf"const {name} = (?:new Set\()?(\[[^\]]*\])", EXTENSION.read_text())
    assert match is not None, name
    values: list[str] = json.loads(match.group(1))
    return values


def test_the_extension_compares_the_same_environment_keys_as_the_watcher() -> None:
    assert tuple(_ts_list("ENV_PREFIXES")) == session_env._ENV_PREFIXES
    assert set(_ts_list("ENV_KEYS")) == session_env._ENV_KEYS
    assert set(_ts_list("ENV_IGNORED")) == session_env._ENV_IGNORED


def test_bridge_env_keeps_what_changes_a_bridge_and_drops_the_rest() -> None:
    env = {
        "GIT_DIR": "g",
        "REWIND_FEED": "0",
        "PI_CODING_AGENT_DIR": "/a",
        "PI_CODING_AGENT": "true",
        "PI_SKIP_VERSION_CHECK": "1",
        "HOME": "/h",
        "PATH": "/bin",
        "LC_ALL": "C",
        "PYTHONPATH": "/p",
        "TERM": "xterm",
        "SHLVL": "2",
        "PWD": "/somewhere",
    }
    assert bridge_env(env) == {
        "GIT_DIR": "g",
        "REWIND_FEED": "0",
        "PI_CODING_AGENT_DIR": "/a",
        "HOME": "/h",
        "PATH": "/bin",
        "LC_ALL": "C",
        "PYTHONPATH": "/p",
    }
