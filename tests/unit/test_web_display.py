"""What a dashboard page prints for a value (`txqueue.web.display.finalize`): control and
bidirectional characters as escapes that are also JSON's, markup and payload lines kept."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")

from markupsafe import Markup

from txqueue.web.display import Lines, escaped, finalize, payload_view, preview

HIDDEN = (
    [chr(code) for code in range(0x20)]
    + [chr(code) for code in range(0x7F, 0xA0)]
    + ["\u061c", "\u200e", "\u200f", "\u2028", "\u2029"]
    + [chr(code) for code in range(0x202A, 0x202F)]
    + [chr(code) for code in range(0x2066, 0x206A)]
)


@pytest.mark.parametrize("character", HIDDEN, ids=lambda c: f"U+{ord(c):04X}")
def test_every_control_and_bidi_character_is_shown_as_a_json_escape(character: str) -> None:
    text = f"a{character}b"
    shown = finalize(text)
    assert character not in shown and shown.isprintable()
    assert json.loads(f'"{shown}"') == text  # a key's JSON text stays the same JSON


def test_ordinary_text_markup_and_other_values_are_kept() -> None:
    assert finalize("Grüße, 東京 🚀 \\x1b") == "Grüße, 東京 🚀 \\x1b"
    assert escaped('["k\u202e", "\\n"]') == '["k\\u202e", "\\n"]'
    csrf = Markup('<input type="hidden" name="csrf_token" value="x">')
    assert finalize(csrf) is csrf
    assert finalize(3) == 3 and finalize(None) is None


def test_a_payload_keeps_its_lines_and_escapes_the_rest() -> None:
    view = payload_view('{"a": "x\u202ey", "b": 1}'.encode(), "json")
    assert isinstance(view.text, Lines) and view.text.count("\n") == 3  # pretty JSON's lines
    assert "\u202e" not in view.text and "x\\u202ey" in view.text
    assert finalize(view.text) == view.text
    assert finalize(Lines("one\ntwo\x1b\u202e")) == "one\ntwo\\x1b\\u202e"
    assert preview("line\nnext\u200f") == "line\\nnext\\u200f"
