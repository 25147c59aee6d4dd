"""Where Pi's agent dir is: ``--agent-dir``, else ``$PI_CODING_AGENT_DIR``, else ``~/.pi/agent``.

Why it exists apart from :mod:`ledger.session.discovery`: every CLI command needs the agent dir,
and this answer must not cost the import of the session model (docs/capture.md#start-up).
"""

from __future__ import annotations

import os
from pathlib import Path


def resolve_agent_dir(option: str | os.PathLike[str] | None = None) -> Path:
    """The agent dir: the option when given, else ``$PI_CODING_AGENT_DIR``, else the default."""
    if option:
        return Path(option).expanduser()
    env = os.environ.get("PI_CODING_AGENT_DIR")
    if env:
        return Path(os.path.expanduser(env))
    return Path.home() / ".pi" / "agent"
