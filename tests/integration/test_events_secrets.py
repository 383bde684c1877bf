"""Signing secrets from a file or an environment variable, so they never sit in a command
line or a shell history: ``signing_secret_file=`` / ``signing_secret_env=`` in Python,
``--signing-secret-file`` / ``--signing-secret-env`` in the CLI. SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from events_receiver import Receiver, wait_until

import txqueue
from txqueue.cli.main import main
from txqueue.errors import InvalidArgument

SECOND = timedelta(seconds=1)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
ROTATED = "whsec_bmV3IHNlY3JldCBmb3Igcm90YXRpb24="
VARIABLE = "TXQUEUE_TEST_SIGNING_SECRET"


@pytest.fixture
def events(database_url: str) -> Iterator[txqueue.Events]:
    with txqueue.connect(database_url) as db:
        events = txqueue.Events(db)
        events.create_bus("orders")
        yield events


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text(SECRET + "\n")  # as `echo whsec_... > secret.txt` writes it
    return path


def cli(database: str, *args: str, code: int) -> str:
    assert not any(SECRET in arg or ROTATED in arg for arg in args)  # never in argv
    result = CliRunner().invoke(main, [*args, "--database", database])
    assert result.exit_code == code, result.output
    return result.output


def test_a_secret_from_a_file_signs_deliveries(
    database_url: str,
    events: txqueue.Events,
    receiver: Receiver,
    secret_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = receiver.url("/signed")
    pipeline = events.create_pipeline(
        "signed", url, signing_secret_file=secret_file, allow_private=True
    )
    assert pipeline.signing_secret == SECRET  # the file's trailing newline is not part of it
    events.create_enrollment("all", bus="orders", pipeline="signed", cel_match="true")
    with txqueue.Dispatcher(database_url, attempt_timeout=5 * SECOND):
        events.publish("orders", {"type": "t", "source": "//s", "id": "1", "data": {"a": 1}})
        [request] = receiver.wait_for("/signed", 1)
        txqueue.verify_signature(SECRET, request.headers, request.body)

        # Rotation: the new secret from the environment, read at the call.
        monkeypatch.setenv(VARIABLE, ROTATED)
        updated = events.update_pipeline("signed", signing_secret_env=VARIABLE)
        monkeypatch.delenv(VARIABLE)
        assert updated.signing_secret == ROTATED
        wait_until(lambda: _signed_with(events, receiver, ROTATED))


def _signed_with(events: txqueue.Events, receiver: Receiver, secret: str) -> bool:
    """Publish one more event and report whether its delivery verifies with ``secret``."""
    count = len(receiver.received("/signed"))
    events.publish("orders", {"type": "t", "source": "//s", "id": "n", "data": {"a": 1}})
    request = receiver.wait_for("/signed", count + 1)[-1]
    try:
        txqueue.verify_signature(secret, request.headers, request.body)
    except InvalidArgument:
        return False  # a dispatcher still on the old configuration (refreshed every 1 s)
    return True


def test_secret_sources_are_exclusive_and_must_yield_a_secret(
    events: txqueue.Events, secret_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "bus:orders"
    with pytest.raises(InvalidArgument, match="signing_secret, signing_secret_file"):
        events.create_pipeline("p", url, signing_secret=SECRET, signing_secret_file=secret_file)
    with pytest.raises(InvalidArgument, match="signing_secret_file, signing_secret_env"):
        events.create_pipeline(
            "p", url, signing_secret_file=secret_file, signing_secret_env=VARIABLE
        )
    missing = tmp_path / "missing.txt"
    with pytest.raises(
        InvalidArgument,
        match=r"signing_secret_file: file '.*missing.txt' cannot be read: No such file",
    ):
        events.create_pipeline("p", url, signing_secret_file=missing)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(InvalidArgument, match=r"signing_secret_file: file '.*empty.txt' is empty"):
        events.create_pipeline("p", url, signing_secret_file=empty)
    monkeypatch.delenv(VARIABLE, raising=False)
    with pytest.raises(
        InvalidArgument, match=f"signing_secret_env: environment variable {VARIABLE} is not set"
    ):
        events.create_pipeline("p", url, signing_secret_env=VARIABLE)
    monkeypatch.setenv(VARIABLE, "")
    with pytest.raises(
        InvalidArgument, match=f"signing_secret_env: environment variable {VARIABLE} is empty"
    ):
        events.create_pipeline("p", url, signing_secret_env=VARIABLE)
    monkeypatch.setenv(VARIABLE, "not-a-secret!")
    with pytest.raises(
        InvalidArgument,
        match=f"signing_secret_env: environment variable {VARIABLE}: secret must be",
    ):
        events.create_pipeline("p", url, signing_secret_env=VARIABLE)
    assert events.list_pipelines() == []

    events.create_pipeline("p", url, signing_secret=SECRET)
    with pytest.raises(InvalidArgument, match="signing_secret, signing_secret_env"):
        events.update_pipeline("p", signing_secret=None, signing_secret_env=VARIABLE)
    with pytest.raises(InvalidArgument, match=r"signing_secret_file: file .* cannot be read"):
        events.update_pipeline("p", signing_secret_file=missing)
    assert events.get_pipeline("p").signing_secret == SECRET


def test_the_cli_reads_secrets_from_a_file_or_the_environment(
    database_url: str,
    events: txqueue.Events,
    secret_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = cli(database_url, "pipelines", "create", "p", "--destination", "bus:orders",
              "--signing-secret-file", str(secret_file), code=0)  # fmt: skip
    assert '"signing_secret": "(set)"' in out
    assert events.get_pipeline("p").signing_secret == SECRET
    monkeypatch.setenv(VARIABLE, ROTATED)
    cli(database_url, "pipelines", "update", "p", "--signing-secret-env", VARIABLE, code=0)
    assert events.get_pipeline("p").signing_secret == ROTATED
    cli(database_url, "pipelines", "update", "p", "--signing-secret-file", str(secret_file), code=0)
    assert events.get_pipeline("p").signing_secret == SECRET

    def refused(*args: str) -> str:
        return cli(database_url, "pipelines", *args, code=2)

    out = refused("update", "p", "--signing-secret-env", VARIABLE,
                  "--signing-secret-file", str(secret_file))  # fmt: skip
    assert "--signing-secret, --signing-secret-file and --signing-secret-env" in out
    assert "mutually exclusive" in out
    out = refused("update", "p", "--clear-signing-secret", "--signing-secret-env", VARIABLE)
    assert "--clear-signing-secret" in out and "mutually exclusive" in out
    missing = tmp_path / "missing.txt"
    out = refused("update", "p", "--signing-secret-file", str(missing))
    assert "Invalid value for '--signing-secret-file'" in out and "cannot be read" in out
    monkeypatch.delenv(VARIABLE)
    out = refused("create", "q", "--destination", "bus:orders", "--signing-secret-env", VARIABLE)
    assert f"'--signing-secret-env': environment variable {VARIABLE} is not set" in out
    (tmp_path / "empty.txt").write_text("")
    out = refused("update", "p", "--signing-secret-file", str(tmp_path / "empty.txt"))
    assert "Invalid value for '--signing-secret-file'" in out and "is empty" in out
    out = refused("update", "p", "--signing-secret", "")
    assert "Invalid value for '--signing-secret': the secret is empty" in out
    assert events.get_pipeline("p").signing_secret == SECRET
    assert [p.name for p in events.list_pipelines()] == ["p"]


async def test_the_asyncio_face_reads_secrets_too(
    database_url: str, secret_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adb = await txqueue.connect_async(database_url)
    try:
        events = txqueue.AsyncEvents(adb)
        await events.create_bus("orders")
        created = await events.create_pipeline(
            "p", "bus:orders", signing_secret_file=str(secret_file)
        )
        assert created.signing_secret == SECRET
        monkeypatch.setenv(VARIABLE, ROTATED)
        await events.update_pipeline("p", signing_secret_env=VARIABLE)
        assert (await events.get_pipeline("p")).signing_secret == ROTATED
        with pytest.raises(InvalidArgument, match="signing_secret, signing_secret_file"):
            await events.update_pipeline("p", signing_secret=SECRET, signing_secret_file="x")
    finally:
        await adb.close()
