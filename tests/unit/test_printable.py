"""`printable`: the one rule by which stored and remote text reaches a terminal or a log line."""

from __future__ import annotations

import pytest

from txqueue.core.text import printable


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]8;;http://evil\x1b\\click", "\\x1b]8;;http://evil\\x1b\\click"),  # OSC 8 link
        ("ring\x07", "ring\\x07"),
        ("line\nforged\r\ttab", "line\\nforged\\r\\ttab"),
        ("\x00\x7f", "\\x00\\x7f"),  # NUL and DEL
        ("\x9b31m", "\\x9b31m"),  # C1 CSI, a one-byte ESC [
        ("abc\u202edcba", "abc\\u202edcba"),  # right-to-left override
        ("a\u2028b", "a\\u2028b"),  # line separator
    ],
)
def test_control_characters_are_shown_as_escapes(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_ordinary_text_is_kept() -> None:
    text = "Grüße, 東京 🚀 [/x] [link=https://e]x[/link] C:\\path \\x1b"
    assert printable(text) == text


def test_any_value_becomes_text() -> None:
    assert printable(("k\x1b",)) == "('k\\x1b',)"  # repr already escapes inside containers
    assert printable(ValueError("bad \x1b[2J")) == "bad \\x1b[2J"
    assert printable(None) == "None"
