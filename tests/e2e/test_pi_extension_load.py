"""What Pi loads of our extension when it starts (issue 34: every Pi start pays it): the
extension and the model's ``rewind`` tool, once each; not the ``/rewind`` overlay
(``tools/pi-extension/rewind-command.ts``, ~800 lines), which loads at its first use. Pi's
loader (jiti, no module cache) evaluated that module twice at every start before stop 50: once
for ``/rewind`` and again through ``rewind-tool.ts``'s import of it. Seen in the loader's own
log (``JITI_DEBUG``), in the real Pi."""

from __future__ import annotations

import re

from ledger.records import TURN
from tests.e2e.pikit import PiRunner, records, turns, write


def _loaded(stderr: str) -> list[str]:
    """The extension files the loader read, in order (one "transpile" line each, from its cache or not)."""
    return re.findall(r"\[jiti\].*?\[transpile\].*?/tools/pi-extension/([\w-]+\.ts)", stderr)


def test_a_pi_start_loads_the_extension_and_the_tool_once_and_not_the_rewind_overlay(
    pi: PiRunner,
) -> None:
    result = pi.run(turns([write("a.txt", "one\n")]), env={"JITI_DEBUG": "1"})
    loaded = _loaded(result.stderr)
    assert loaded == ["rewind-ledger.ts", "rewind-tool.ts"], loaded
    assert len(records(pi.sessions()[0], TURN)) == 1, "the prompt was recorded all the same"
