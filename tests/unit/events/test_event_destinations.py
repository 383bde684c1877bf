"""Destination URL checks: scheme, credentials, host, and non-public addresses (SSRF)."""

from __future__ import annotations

import re
import socket
from typing import Any

import pytest

from txqueue.errors import InvalidArgument
from txqueue.events.destinations import ALLOW_PRIVATE_ENV, check_destination


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV, raising=False)


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a lookup happens: IP literals must be judged without DNS."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"unexpected DNS lookup {args}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def fake_dns(monkeypatch: pytest.MonkeyPatch, *addresses: str) -> list[str]:
    """Make every lookup answer ``addresses``; return the list of names looked up."""
    asked: list[str] = []

    def answer(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        asked.append(host)
        return [
            (
                socket.AF_INET6 if ":" in a else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (a, port),
            )
            for a in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", answer)
    return asked


@pytest.mark.usefixtures("no_dns")
@pytest.mark.parametrize(
    "url",
    [
        "https://8.8.8.8/hook",
        "http://8.8.8.8:8080/hook?x=1",
        "HTTPS://1.1.1.1",
        "https://[2001:4860:4860::8888]/hook",
        "http://[::ffff:8.8.8.8]/",
    ],
)
def test_public_ip_literals_are_accepted(url: str) -> None:
    assert check_destination(url, allow_private=False) == url.replace("HTTPS:", "https:")


@pytest.mark.usefixtures("no_dns")
@pytest.mark.parametrize(
    "url",
    ["ftp://8.8.8.8/", "file:///etc/passwd", "8.8.8.8/hook", "javascript:alert(1)", "ws://8.8.8.8"],
)
def test_only_http_and_https(url: str) -> None:
    with pytest.raises(InvalidArgument, match="scheme must be http or https"):
        check_destination(url, allow_private=True)


@pytest.mark.usefixtures("no_dns")
@pytest.mark.parametrize(
    "url", ["https://user:secret@8.8.8.8/", "https://user@8.8.8.8/", "https://:pw@8.8.8.8/"]
)
def test_credentials_are_refused_even_when_private_is_allowed(url: str) -> None:
    with pytest.raises(InvalidArgument, match="must not contain credentials"):
        check_destination(url, allow_private=True)


@pytest.mark.usefixtures("no_dns")
@pytest.mark.parametrize("url", ["http:///path", "https://:443/", "https://"])
def test_host_is_required(url: str) -> None:
    with pytest.raises(InvalidArgument, match="has no host"):
        check_destination(url, allow_private=True)


@pytest.mark.usefixtures("no_dns")
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://8.8.8.8:99999/", "malformed"),
        ("https://8.8.8.8:port/", "malformed"),
        ("https://8.8.8.8/a b", "whitespace or control"),
        ("https://8.8.8.8/\r\nHost: x", "whitespace or control"),
        ("", "non-empty string"),
    ],
)
def test_malformed_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        check_destination(url, allow_private=False)


@pytest.mark.usefixtures("no_dns")
@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("[::1]", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("[fc00::1]", "private"),
        ("169.254.169.254", "link-local"),  # cloud metadata endpoint
        ("[fe80::1]", "link-local"),
        ("224.0.0.1", "multicast"),
        ("[ff02::1]", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("[::]", "unspecified"),
        ("100.64.0.1", "non-global"),  # carrier-grade NAT
        ("[::ffff:127.0.0.1]", "loopback (embedded in IPv6)"),
        ("[::ffff:10.0.0.1]", "private (embedded in IPv6)"),
        ("[2002:7f00:1::]", "loopback (embedded in IPv6)"),  # 6to4 of 127.0.0.1
        ("[fec0::1]", "site-local"),
        ("[FEC0:0:0:0:0:0:0:1]", "site-local"),
        ("[fec0:0000::0001]", "site-local"),
        ("[feff:ffff::1]", "site-local"),
        ("[::ffff:7f00:1]", "loopback (embedded in IPv6)"),
        ("[2001:0:4136:e378:8000:63bf:80ff:fffe]", "loopback (embedded in IPv6)"),  # Teredo
        ("[2001:0:4136:e378:8000:63bf:f7f7:f7f7]", "private"),  # Teredo of 8.8.8.8
    ],
)
def test_non_public_addresses_are_refused(host: str, reason: str) -> None:
    url = f"http://{host}:8080/hook"
    expected = re.escape(f"{reason} address")
    with pytest.raises(InvalidArgument, match=f"is an? {expected}") as caught:
        check_destination(url, allow_private=False)
    assert ALLOW_PRIVATE_ENV in str(caught.value)
    assert check_destination(url, allow_private=True) == url.lower()


@pytest.mark.parametrize("host", ["2130706433", "0x7f000001", "127.1", "0177.0.0.1", "LOCALHOST"])
def test_other_spellings_of_loopback_are_refused(host: str) -> None:
    with pytest.raises(InvalidArgument, match=r"is a loopback address"):
        check_destination(f"http://{host}:8080/", allow_private=False)


def test_scheme_and_host_are_normalized_to_lower_case(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = fake_dns(monkeypatch, "93.184.216.34")
    url = "HTTPS://Hooks.Example:8443/In/Path?Token=AbC#Frag"
    assert check_destination(url) == "https://hooks.example:8443/In/Path?Token=AbC#Frag"
    assert asked == ["hooks.example"]


@pytest.mark.usefixtures("no_dns")
def test_ipv6_literals_are_normalized_to_lower_case() -> None:
    url = "HTTP://[2001:4860:4860::8888]:80/X"
    assert check_destination(url) == "http://[2001:4860:4860::8888]:80/X"
    assert check_destination("http://[FC00::1]/", allow_private=True) == "http://[fc00::1]/"


def test_localhost_resolves_to_loopback_and_is_refused() -> None:
    with pytest.raises(InvalidArgument, match=r"localhost \(.*\) is a loopback address"):
        check_destination("http://localhost:8080/", allow_private=False)


def test_a_name_resolving_to_a_private_address_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = fake_dns(monkeypatch, "93.184.216.34", "10.0.0.5")
    with pytest.raises(InvalidArgument, match=r"hooks\.example \(10\.0\.0\.5\) is a private"):
        check_destination("https://hooks.example/in", allow_private=False)
    assert asked == ["hooks.example"]


def test_a_name_resolving_to_public_addresses_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, "93.184.216.34", "2606:2800:220:1::1")
    assert check_destination("https://hooks.example/in", allow_private=False)


def test_resolution_failure_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    with pytest.raises(InvalidArgument, match=r"'nowhere\.example' does not resolve"):
        check_destination("https://nowhere.example/", allow_private=False)


def test_allowing_private_skips_the_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = fake_dns(monkeypatch, "10.0.0.5")
    assert check_destination("https://internal.example/", allow_private=True)
    assert asked == []


@pytest.mark.usefixtures("no_dns")
def test_environment_variable_allows_private(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW_PRIVATE_ENV, "1")
    assert check_destination("http://127.0.0.1:9/", allow_private=False) == "http://127.0.0.1:9/"
    with pytest.raises(InvalidArgument, match="must not contain credentials"):
        check_destination("http://u:p@127.0.0.1:9/", allow_private=False)


@pytest.mark.usefixtures("no_dns")
@pytest.mark.parametrize("value", ["0", "", "yes", "true"])
def test_other_environment_values_do_not_allow_private(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ALLOW_PRIVATE_ENV, value)
    with pytest.raises(InvalidArgument, match="loopback"):
        check_destination("http://127.0.0.1:9/", allow_private=False)
