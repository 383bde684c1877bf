"""Standard Webhooks signatures: known vector, round trip, tampering, expiry, rotation."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone

import pytest

from txqueue.errors import InvalidArgument
from txqueue.events.signing import sign, verify

# The test vector published with the Standard Webhooks specification.
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

SECRET = b"0123456789abcdef0123456789abcdef"
TS = 1_714_979_289
NOW = datetime.fromtimestamp(TS, timezone.utc)
BODY = b'{"order": 42}'


def test_standard_webhooks_vector() -> None:
    headers = sign(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)
    assert headers == {
        "webhook-id": SPEC_ID,
        "webhook-timestamp": str(SPEC_TIMESTAMP),
        "webhook-signature": SPEC_SIGNATURE,
    }
    verify(
        SPEC_SECRET, headers, SPEC_BODY, now=datetime.fromtimestamp(SPEC_TIMESTAMP, timezone.utc)
    )


def test_whsec_string_and_raw_bytes_are_the_same_key() -> None:
    as_string = "whsec_" + base64.b64encode(SECRET).decode()
    assert sign(as_string, "m", TS, BODY) == sign(SECRET, "m", TS, BODY)
    verify(as_string, sign(SECRET, "m", TS, BODY), BODY, now=NOW)


def test_round_trip() -> None:
    verify(SECRET, sign(SECRET, "msg-1", TS, BODY), BODY, now=NOW)


def test_header_names_are_case_insensitive() -> None:
    headers = {name.title(): value for name, value in sign(SECRET, "msg-1", TS, BODY).items()}
    verify(SECRET, headers, BODY, now=NOW)


@pytest.mark.parametrize(
    ("header", "value", "body"),
    [
        (None, None, BODY + b" "),
        (None, None, b""),
        ("webhook-id", "msg-2", BODY),
        ("webhook-timestamp", str(TS + 1), BODY),
    ],
)
def test_tampering_is_detected(header: str | None, value: str | None, body: bytes) -> None:
    headers = sign(SECRET, "msg-1", TS, BODY)
    if header is not None and value is not None:
        headers[header] = value
    with pytest.raises(InvalidArgument, match="no signature matches"):
        verify(SECRET, headers, body, now=NOW)


def test_wrong_secret_is_detected() -> None:
    with pytest.raises(InvalidArgument, match="no signature matches"):
        verify(b"another secret", sign(SECRET, "msg-1", TS, BODY), BODY, now=NOW)


def test_expired_and_future_timestamps_are_refused() -> None:
    headers = sign(SECRET, "msg-1", TS, BODY)
    verify(SECRET, headers, BODY, now=NOW + timedelta(minutes=5))
    verify(SECRET, headers, BODY, now=NOW - timedelta(minutes=5))
    with pytest.raises(InvalidArgument, match="too old"):
        verify(SECRET, headers, BODY, now=NOW + timedelta(minutes=5, seconds=1))
    with pytest.raises(InvalidArgument, match="in the future"):
        verify(SECRET, headers, BODY, now=NOW - timedelta(minutes=5, seconds=1))
    verify(SECRET, headers, BODY, tolerance=timedelta(hours=1), now=NOW + timedelta(minutes=59))


def test_default_now_is_the_clock() -> None:
    now = int(datetime.now(timezone.utc).timestamp())
    verify(SECRET, sign(SECRET, "msg-1", now, BODY), BODY)
    with pytest.raises(InvalidArgument, match="too old"):
        verify(SECRET, sign(SECRET, "msg-1", now - 3600, BODY), BODY)


def test_any_of_several_signatures_suffices() -> None:
    good = sign(SECRET, "msg-1", TS, BODY)["webhook-signature"]
    rotated = sign(b"old secret", "msg-1", TS, BODY)["webhook-signature"]
    headers = sign(SECRET, "msg-1", TS, BODY)
    for value in (
        f"{rotated} {good}",
        f"v1,AAAA {good}",
        f"v1a,{good[3:]} {good}",
        f"{good} {rotated}",
    ):
        headers["webhook-signature"] = value
        verify(SECRET, headers, BODY, now=NOW)
    headers["webhook-signature"] = f"{rotated} v1,AAAA v2,{good[3:]}"
    with pytest.raises(InvalidArgument, match="no signature matches"):
        verify(SECRET, headers, BODY, now=NOW)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_missing_headers_are_named(missing: str) -> None:
    headers = sign(SECRET, "msg-1", TS, BODY)
    del headers[missing]
    with pytest.raises(InvalidArgument, match=f"header '{missing}' is missing"):
        verify(SECRET, headers, BODY, now=NOW)


def test_non_integer_timestamp_is_refused() -> None:
    headers = sign(SECRET, "msg-1", TS, BODY)
    headers["webhook-timestamp"] = "yesterday"
    with pytest.raises(InvalidArgument, match="not an integer"):
        verify(SECRET, headers, BODY, now=NOW)


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("whsec_not base64!", "base64 part is invalid"),
        (b"", "must not be empty"),
        ("whsec_", "must not be empty"),
        (42, "got int"),
    ],
)
def test_bad_secrets_are_refused(secret: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        sign(secret, "msg-1", TS, BODY)  # type: ignore[arg-type]


@pytest.mark.parametrize(("message_id", "timestamp"), [("", TS), ("m", -1), ("m", True)])
def test_bad_sign_arguments_are_refused(message_id: str, timestamp: int) -> None:
    with pytest.raises(InvalidArgument, match=r"(message_id|timestamp) must be"):
        sign(SECRET, message_id, timestamp, BODY)


def test_naive_now_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="timezone-aware"):
        verify(SECRET, sign(SECRET, "m", TS, BODY), BODY, now=datetime(2024, 5, 6))
