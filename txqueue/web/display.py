"""How the dashboard's pages show values: ages and durations, times in UTC, payload previews
and the message page's JSON, text and hex views of a payload.

Text from the database reaches the templates as plain strings (autoescape makes it text, never
markup), and every value a template prints passes `finalize`, so no key, error, name or title
shows a raw control or bidirectional character: C0 and C1 controls (ESC, newlines), the bidi
embeddings, overrides, isolates and marks (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F,
U+061C) and the line separators are shown as ``\\n``, ``\\r``, ``\\t`` or ``\\uNNNN`` — JSON's
own escapes, so a key's JSON text on a page is still the JSON a form sends back. A payload's
text view (`Lines`) keeps its line breaks and shows other controls as
`txqueue.core.text.printable` does (``\\x1b``), as the command line shows payloads.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from markupsafe import Markup

from txqueue.core.text import printable
from txqueue.web import services

__all__ = [
    "Lines",
    "PayloadView",
    "age",
    "duration",
    "escaped",
    "finalize",
    "hex_dump",
    "payload_bytes",
    "payload_view",
    "preview",
    "seconds_since",
    "shown_text",
    "utc",
]

#: The most payload bytes the hex view shows (1,024 rows of 16).
HEX_LIMIT = 16 * 1024
#: The most characters the JSON and text views show.
TEXT_LIMIT = 256 * 1024
#: How many characters of a payload a table row shows.
PREVIEW_LENGTH = 80
#: The message page's views of a payload.
VIEWS = ("json", "text", "hex")
#: What a page never shows raw: C0, DEL and C1 controls, the bidi embeddings, overrides,
#: isolates and marks, and the line and paragraph separators.
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


class Lines(str):
    """Text shown as lines (a payload's text view): `finalize` keeps its line breaks."""

    __slots__ = ()


def escaped(value: object) -> str:
    """``value`` as text with every character of `_HIDDEN` shown as ``\\n``, ``\\r``,
    ``\\t`` or ``\\uNNNN`` (valid inside JSON text too)."""
    text = value if isinstance(value, str) else str(value)
    return _HIDDEN.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    return _NAMED.get(character) or f"\\u{ord(character):04x}"


def _shown_line(line: str) -> str:
    """A line of a payload: `printable`'s escapes, and the bidi marks printable keeps."""
    return _HIDDEN.sub(_escape, printable(line))


def finalize(value: Any) -> Any:
    """What a template prints for ``value`` (Jinja's ``finalize``): text escaped as `escaped`
    says, `Lines` with their line breaks kept; markup and other values as they are."""
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    if isinstance(value, Lines):
        return shown_text(value)
    return escaped(value)


def age(seconds: float | None) -> str:
    """A span of seconds as a short text ("45 s", "3 min 12 s", "2 h 5 min", "3 d 4 h")."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def duration(value: timedelta | None) -> str:
    """A duration for a table cell: seconds below a minute, else as `age` says it."""
    if value is None:
        return ""
    seconds = value.total_seconds()
    if seconds < 60:
        return f"{seconds:g} s"
    return age(seconds)


def seconds_since(moment: datetime | None) -> float | None:
    """Seconds from ``moment`` to now (None stays None)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (datetime.now(timezone.utc) - moment).total_seconds()


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC (a naive one is taken as UTC), as every page shows times."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def payload_bytes(payload: Any) -> bytes:
    """The payload's bytes: BYTES as they are, STRING as UTF-8, a JSON value as its JSON."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    if isinstance(payload, str):
        return payload.encode("utf-8", errors="surrogatepass")
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


def shown_text(text: str) -> Lines:
    """Text with every control character escaped, line breaks kept as lines."""
    return Lines("\n".join(_shown_line(line) for line in text.split("\n")))


def preview(payload: Any) -> str:
    """The start of a payload on one line: text when it decodes as UTF-8, else hex."""
    raw = payload_bytes(payload)
    head = raw[: PREVIEW_LENGTH * 4]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 3:  # not merely a character cut at the end
            shown = raw[: PREVIEW_LENGTH // 3].hex(" ")
            return shown + (" …" if len(raw) > PREVIEW_LENGTH // 3 else "")
        text = head[: error.start].decode("utf-8")
    line = _shown_line(text)
    if len(line) > PREVIEW_LENGTH or len(raw) > len(head):
        return line[:PREVIEW_LENGTH] + "…"
    return line


def hex_dump(raw: bytes) -> str:
    """Offset, 16 bytes in hex and the same bytes as ASCII (others as '.'), a row per 16."""
    rows = []
    for offset in range(0, len(raw), 16):
        chunk = raw[offset : offset + 16]
        left = " ".join(f"{byte:02x}" for byte in chunk[:8])
        right = " ".join(f"{byte:02x}" for byte in chunk[8:])
        ascii_text = "".join(chr(byte) if 0x20 <= byte < 0x7F else "." for byte in chunk)
        rows.append(f"{offset:08x}  {left:<23}  {right:<23}  |{ascii_text}|")
    return "\n".join(rows)


@dataclass(frozen=True, slots=True)
class PayloadView:
    """A payload as the message page shows it in one of `VIEWS`."""

    view: str
    text: str
    note: str | None
    kind: str  # "bytes", "text" or "JSON": the payload column's kind
    size: int  # bytes


def payload_view(payload: Any, wanted: str | None) -> PayloadView:
    """``payload`` in the view ``wanted`` (else the default: JSON when it parses, text when it
    is UTF-8, else hex); large payloads are cut, with a note saying so."""
    views = services.payload_views(payload)
    raw = payload_bytes(payload)
    view = wanted if wanted in VIEWS else _default_view(payload, views)
    note = None
    if view == "json" and views.json is None:
        note = "The payload is not JSON; it is shown as text."
        text = views.text
    elif view == "json":
        text = views.json or ""
    elif view == "text":
        text = views.text
        if not _utf8(payload):
            note = "The payload is not UTF-8 text: bytes that do not decode show as \ufffd."
    else:
        text = ""
    if view == "hex":
        shown = hex_dump(raw[:HEX_LIMIT])
        if len(raw) > HEX_LIMIT:
            note = f"The first {HEX_LIMIT:,} of {len(raw):,} bytes."
    else:
        shown = shown_text(text[:TEXT_LIMIT])
        if len(text) > TEXT_LIMIT:
            note = f"The first {TEXT_LIMIT:,} of {len(text):,} characters."
    if isinstance(payload, (bytes, bytearray, memoryview)):
        kind = "bytes"
    else:
        kind = "text" if isinstance(payload, str) else "JSON"
    return PayloadView(view, Lines(shown), note, kind, len(raw))


def _utf8(payload: Any) -> bool:
    """Whether the payload is text: a STRING or JSON value, or bytes that decode as UTF-8."""
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        return True
    try:
        bytes(payload).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _default_view(payload: Any, views: services.PayloadViews) -> str:
    """JSON when the payload parses as JSON, else text when it is UTF-8, else hex."""
    if views.json is not None:
        return "json"
    return "text" if _utf8(payload) else "hex"
