"""Standard Webhooks signatures (HMAC-SHA256), so receivers can check a delivery came from us.

The signed content is ``"{webhook-id}.{webhook-timestamp}.{body}"``; the signature header holds
space-separated ``v1,<base64>`` entries, so a secret can be rotated by signing with both keys
for a while. Secrets are raw bytes or Standard Webhooks ``whsec_<base64>`` strings. The
timestamp bounds replays: `verify` refuses one outside ``tolerance`` of now.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone

from txqueue.core.durations import require_aware, to_duration
from txqueue.errors import InvalidArgument

__all__ = ["ID_HEADER", "SIGNATURE_HEADER", "TIMESTAMP_HEADER", "sign", "verify"]

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
_PREFIX = "whsec_"
_VERSION = "v1"
#: Unix seconds: ASCII digits, at most 19 (any more is no time a clock will show).
_TIMESTAMP = re.compile(r"[0-9]{1,19}\Z")


def sign(secret: bytes | str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers signing ``body`` under ``message_id`` at ``timestamp``.

    ``timestamp`` is in Unix seconds.
    """
    key = _key(secret)
    if not isinstance(message_id, str) or not message_id or not _is_text(message_id):
        raise InvalidArgument("message_id must be a non-empty string of valid Unicode text")
    body = _body(body)
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
        raise InvalidArgument(
            f"timestamp must be a non-negative integer (Unix seconds), got {timestamp!r}"
        )
    return {
        ID_HEADER: message_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: f"{_VERSION},{_signature(key, message_id, timestamp, body)}",
    }


def verify(
    secret: bytes | str,
    headers: Mapping[str, str],
    body: bytes,
    tolerance: timedelta = timedelta(minutes=5),
    now: datetime | None = None,
) -> None:
    """Return if ``headers`` carry a valid, timely signature of ``body``; raise InvalidArgument.

    Header names are matched case-insensitively; any one matching ``v1`` signature suffices and
    signatures of other versions are ignored. Comparison is constant-time.
    """
    key = _key(secret)
    window = to_duration(tolerance, "tolerance", allow_zero=True)
    content = _body(body)
    if not isinstance(headers, Mapping):
        raise InvalidArgument(f"headers must be a mapping, got {type(headers).__name__}")
    found = {
        name.lower(): value
        for name, value in headers.items()
        if isinstance(name, str) and isinstance(value, str)
    }
    for name in (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER):
        if not found.get(name):
            raise InvalidArgument(f"webhook signature check failed: header {name!r} is missing")
    message_id = found[ID_HEADER]
    if not _is_text(message_id):
        raise InvalidArgument(
            f"webhook signature check failed: {ID_HEADER!r} is not valid Unicode text"
        )
    if _TIMESTAMP.match(found[TIMESTAMP_HEADER]) is None:
        raise InvalidArgument(
            f"webhook signature check failed: {TIMESTAMP_HEADER!r} is not an integer of at "
            "most 19 digits (Unix seconds)"
        )
    timestamp = int(found[TIMESTAMP_HEADER])
    current = datetime.now(timezone.utc) if now is None else require_aware(now, "now")
    age = current.timestamp() - timestamp
    if age > window.total_seconds():
        raise InvalidArgument("webhook signature check failed: the timestamp is too old (expired)")
    if -age > window.total_seconds():
        raise InvalidArgument("webhook signature check failed: the timestamp is in the future")
    expected = _signature(key, message_id, timestamp, content).encode()
    matched = False
    for entry in found[SIGNATURE_HEADER].split():
        version, _, signature = entry.partition(",")
        if not signature.isascii():
            continue  # base64 is ASCII: this entry cannot match (and compare_digest wants ASCII)
        if version == _VERSION and hmac.compare_digest(signature.encode(), expected):
            matched = True  # keep going: the time taken must not depend on which entry matched
    if not matched:
        raise InvalidArgument("webhook signature check failed: no signature matches")


def _key(secret: bytes | str) -> bytes:
    """The HMAC key: raw bytes as given, or the base64 part of a ``whsec_`` string decoded."""
    if isinstance(secret, (bytes, bytearray)):
        key = bytes(secret)
    elif isinstance(secret, str):
        encoded = secret.removeprefix(_PREFIX)
        try:
            key = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument(
                "secret must be bytes or a 'whsec_<base64>' string; its base64 part is invalid"
            ) from None
    else:
        raise InvalidArgument(
            f"secret must be bytes or a 'whsec_' string, got {type(secret).__name__}"
        )
    if not key:
        raise InvalidArgument("secret must not be empty")
    return key


def _body(body: object) -> bytes:
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"body must be bytes, got {type(body).__name__}")
    return bytes(body)


def _is_text(value: str) -> bool:
    """True when ``value`` encodes as UTF-8 (holds no lone surrogate)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _signature(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    content = f"{message_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
