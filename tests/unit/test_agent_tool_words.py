"""What the model reads about the ``rewind`` tool (issue 36, docs/pi.md#the-agents-rewind-tool):
a description of at most 120 words that says when to use it, and the guideline Pi puts in its
system prompt, both taken from the extension's source as Pi will read them."""

from __future__ import annotations

import re
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "tools" / "pi-extension" / "rewind-tool.ts"


def _constant(name: str) -> str:
    """The string constant ``name`` of rewind-tool.ts: its "…" pieces joined with +."""
    text = SOURCE.read_text()
    body = re.search(rf"export const {name} =\s*(.*?);\n", text, re.S)
    assert body, f"{name} not found in {SOURCE.name}"
    pieces = re.findall(r'"((?:[^"\\]|\\.)*)"', body.group(1))
    return "".join(p.replace('\\"', '"') for p in pieces)


def test_the_description_is_at_most_120_words_and_says_when_to_use_the_tool() -> None:
    description = _constant("DESCRIPTION")
    words = description.split()
    assert 40 <= len(words) <= 120, len(words)
    for action in ("checkpoint", "list", "diff (point)", "restore (point)"):
        assert action in description
    for instead in ("git checkout", "git stash", "git clean", "rm"):
        assert instead in description
    assert "left alone" in description and "undo" in description


def test_the_guideline_goes_to_pi_s_system_prompt() -> None:
    guideline = _constant("GUIDELINE")
    assert "checkpoint" in guideline and '"diff"' in guideline and '"restore"' in guideline
    assert "git checkout" in guideline and "never touches the user's" in guideline
    source = SOURCE.read_text()
    assert "promptGuidelines: [GUIDELINE]" in source and "description: DESCRIPTION" in source
    assert 'executionMode: "sequential"' in source


def test_the_setting_turns_the_tool_off_before_it_is_registered() -> None:
    source = SOURCE.read_text()
    register = source[source.index("export function registerRewindTool") :]
    assert register.index("agentToolOn(") < register.index("pi.registerTool(")
    assert 'rewindSetting(cwd, "agentTool") !== false' in source
