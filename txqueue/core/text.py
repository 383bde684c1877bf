"""Stored and remote text made safe to show on a terminal or in a log line.

Keys, dead-letter reasons, webhook response bodies and error messages come from outside: an
ESC, BEL or OSC 8 sequence in them would drive the reader's terminal (move the cursor, clear
the screen, plant a hyperlink), a newline would forge a log line. `printable` shows every such
character as a Python-style escape instead; ordinary Unicode is kept.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 controls, DEL and C1 controls (Unicode category Cc), the bidirectional embeddings,
# overrides and isolates (they reorder what follows), and the line and paragraph separators.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(value: object) -> str:
    """``value`` as text in which every control character is shown as an escape:
    ``\\n``, ``\\r``, ``\\t``, else ``\\xNN`` (ESC is ``\\x1b``) or ``\\uNNNN``."""
    text = value if isinstance(value, str) else str(value)
    return _CONTROLS.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    named = _NAMED.get(character)
    if named is not None:
        return named
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
