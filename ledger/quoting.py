"""git's C-style quoting of a path, in one place (``quote_c_style`` of git's ``quote.c``).

Why it exists: paths are bytes, and not every path is UTF-8. Wherever we print one the way git
would (``--json`` values that are not UTF-8, ``rewind status``, the HTML report's names) it must
read exactly as ``git diff`` prints it with ``core.quotePath`` on (its default): unchanged when
every byte is printable ASCII other than ``"`` and ``\\``, else in double quotes with ``\\n``-style
escapes and every other byte as three octal digits. The report keeps a UTF-8 name readable
(``keep_utf8``) and quotes it only for control characters, ``"`` or ``\\``.

Invariants: pure; names decoded with ``surrogateescape`` give back their exact bytes.
"""

from __future__ import annotations

_C_ESCAPES = {7: "a", 8: "b", 9: "t", 10: "n", 11: "v", 12: "f", 13: "r", 0x22: '"', 0x5C: "\\"}


def quote_c_style(name: str | bytes, *, keep_utf8: bool = False) -> str:
    """``name`` as git prints a path (see the module); ``keep_utf8``: characters of a valid UTF-8
    name stay as they are (only controls, ``"``, ``\\`` and DEL are escaped)."""
    if isinstance(name, bytes):
        raw, text = name, None
    else:
        raw, text = name.encode("utf-8", "surrogateescape"), name
    readable = keep_utf8 and text is not None and not any(0xDC80 <= ord(c) <= 0xDCFF for c in text)
    units = (
        [(ord(c), c) for c in text] if readable and text is not None else [(b, chr(b)) for b in raw]
    )
    if not any(
        code < 0x20 or code in (0x22, 0x5C, 0x7F) or (code >= 0x80 and not readable)
        for code, _ in units
    ):
        return "".join(char for _, char in units)
    out = ['"']
    for code, char in units:
        if code in _C_ESCAPES:
            out.append("\\" + _C_ESCAPES[code])
        elif code < 0x20 or code == 0x7F or (code >= 0x80 and not readable):
            out.append(f"\\{code:03o}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


__all__ = ["quote_c_style"]
