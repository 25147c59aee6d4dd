"""git's C-style quoting of a path, in one place (``quote_c_style`` of git's ``quote.c``).

Why it exists: paths are bytes, and not every path is UTF-8. Wherever we print one the way git
would (``--json`` values that are not UTF-8, ``rewind status``, the HTML report's names) it must
read exactly as ``git diff`` prints it with ``core.quotePath`` on (its default): unchanged when
every byte is printable ASCII other than ``"`` and ``\\``, else in double quotes with ``\\n``-style
escapes and every other byte as three octal digits. The report keeps a UTF-8 name readable
(``keep_utf8``) and quotes it only for control characters, ``"`` or ``\\``. With
``core.quotePath`` off (``quote_path=False``) git leaves every byte from 0x80 up as it is, valid
UTF-8 or not, and still quotes a name for a control character, ``"`` or ``\\``: ``rewind diff``
follows the user's setting that way, as ``git diff --name-status`` does.

Messages (refusals, warnings, the lines of a restore plan) name paths with :func:`display_name`:
a name of printable UTF-8 characters without ``"`` or ``\\`` as it is, every other name exactly
as git quotes it (``"caf\\351.txt"`` for the Latin-1 bytes ``caf\\xe9.txt``, ``"a\\nb"`` for
a newline), so a raw byte or a control character can never break, forge or garble a line, and a
name read in a message can be found with git.

Invariants: pure; names decoded with ``surrogateescape`` give back their exact bytes (a path
``str`` in this package is ``os.fsdecode`` of the path's bytes: the same bytes whenever the file
system encoding is UTF-8, as it is for Python on Linux in any UTF-8 or C locale).
"""

from __future__ import annotations

from collections.abc import Sequence

_C_ESCAPES = {7: "a", 8: "b", 9: "t", 10: "n", 11: "v", 12: "f", 13: "r", 0x22: '"', 0x5C: "\\"}


def quote_c_style(name: str | bytes, *, keep_utf8: bool = False, quote_path: bool = True) -> str:
    """``name`` as git prints a path (see the module); ``keep_utf8``: characters of a valid UTF-8
    name stay as they are (only controls, ``"``, ``\\`` and DEL are escaped); ``quote_path``:
    git's ``core.quotePath`` (off: every byte from 0x80 up stays as it is, as git prints it)."""
    if isinstance(name, bytes):
        raw, text = name, None
    else:
        raw, text = name.encode("utf-8", "surrogateescape"), name
    if not quote_path:
        # git's quote_c_style with core.quotePath off: only bytes below 0x20, '"', '\\' and DEL
        # make the name quoted; the other bytes are written as they are (the text is decoded
        # back with surrogateescape, so a byte that is not UTF-8 stays that byte).
        raw_units = [(b, bytes([b])) for b in raw]
        if not any(b < 0x20 or b in (0x22, 0x5C, 0x7F) for b in raw):
            return raw.decode("utf-8", "surrogateescape")
        quoted = bytearray(b'"')
        for b, one in raw_units:
            if b in _C_ESCAPES:
                quoted += ("\\" + _C_ESCAPES[b]).encode("ascii")
            elif b < 0x20 or b == 0x7F:
                quoted += f"\\{b:03o}".encode("ascii")
            else:
                quoted += one
        quoted += b'"'
        return bytes(quoted).decode("utf-8", "surrogateescape")
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


def display_name(name: str | bytes) -> str:
    """``name`` for a message (see the module): as it is when it is printable UTF-8 holding no
    ``"`` or ``\\``, else exactly as git quotes it with ``core.quotePath`` on."""
    if isinstance(name, bytes):
        try:
            text = name.decode("utf-8")
        except UnicodeDecodeError:
            return quote_c_style(name)
    else:
        text = name
    if text.isprintable() and '"' not in text and "\\" not in text and _is_utf8(text):
        return text
    return quote_c_style(name)


def display_names(names: Sequence[str | bytes], limit: int = 5) -> str:
    """The first ``limit`` names for a message, each by :func:`display_name`, comma-separated,
    then `` (and N more)``."""
    shown = ", ".join(display_name(n) for n in names[:limit])
    more = len(names) - limit
    return shown + (f" (and {more} more)" if more > 0 else "")


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a surrogate: a byte that is not UTF-8
        return False
    return True


__all__ = ["display_name", "display_names", "quote_c_style"]
