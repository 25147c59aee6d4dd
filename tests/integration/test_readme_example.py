"""The README's runnable example runs as written."""

from __future__ import annotations

import re

from tests.gitkit import ROOT


def test_the_event_api_example_in_the_readme_runs() -> None:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- readme-example: event-api -->\n```python\n(.*?)```", text, re.S)
    assert match, "the README lost its event-API example"
    exec(compile(match.group(1), "README.md", "exec"), {})
