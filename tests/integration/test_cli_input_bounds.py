"""The CLI's durations, numbers of seconds and query parameters past what txqueue takes: a usage
error naming the flag (exit 2) before anything runs, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from txqueue.cli.main import main

HUGE = ["99999999999d", "1" + "0" * 400 + "s", "nan", "inf", "36501d"]


def run(database: str, *args: str) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(main, [*args, "--database", database])
    return result.exit_code, result.output, result.exception


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/cli.db"
    code, output, _ = run(url, "sql", "CREATE TABLE T (A INT64 NOT NULL) PRIMARY KEY (A)")
    assert code == 0, output
    return url


@pytest.mark.parametrize("text", HUGE)
@pytest.mark.parametrize(
    "command",
    [
        ("buses", "create", "orders", "--retention"),
        ("buses", "update", "orders", "--retention"),
        ("events", "purge", "--older-than"),
        ("events", "undelivered", "--since"),
        ("events", "replay", "--since"),
        ("dispatcher", "--purge-interval"),
        ("worker", "no_such_module:app", "--grace"),
    ],
)
def test_a_duration_option_past_the_maximum_or_not_a_number_is_a_usage_error(
    database: str, command: tuple[str, ...], text: str
) -> None:
    *words, flag = command
    code, output, error = run(database, *words, f"{flag}={text}")
    assert (code, error is None or isinstance(error, SystemExit)) == (2, True), output
    assert flag in output


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300"])
@pytest.mark.parametrize(
    "command",
    [
        ("pipelines", "create", "p", "--destination", "bus:b", "--min-retry-delay"),
        ("pipelines", "update", "p", "--max-retry-delay"),
        ("dispatcher", "--attempt-timeout"),
    ],
)
def test_a_number_of_seconds_that_is_not_finite_or_too_long_is_a_usage_error(
    database: str, command: tuple[str, ...], value: str
) -> None:
    *words, flag = command
    code, output, error = run(database, *words, f"{flag}={value}")
    assert (code, error is None or isinstance(error, SystemExit)) == (2, True), output
    assert flag in output


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("99999999999999999999", "outside the INT64 range"),
        ('"\\ud800"', "lone surrogate"),
        ('{"a": NaN}', "not JSON-serializable"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_a_query_parameter_no_engine_takes_is_a_usage_error(
    database: str, value: str, rule: str
) -> None:
    code, output, error = run(database, "sql", "-p", f"x={value}", "SELECT A FROM T WHERE A = @x")
    assert (code, error is None or isinstance(error, SystemExit)) == (2, True), output
    assert "--param" in output
    assert rule in output
