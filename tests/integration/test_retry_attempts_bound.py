"""max_attempts is an INT64, as stored and as Eventarc takes it: 10**30 was accepted.

Every door checks it the same way (they all build a RetryPolicy): the Python API, the CLI's
--max-retry-attempts; the HTTP API builds the same policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import txqueue
from txqueue.cli.main import main
from txqueue.core.retry import MAX_ATTEMPTS
from txqueue.errors import InvalidArgument

RANGE = r"max_attempts must be a positive integer up to 9223372036854775807 \(INT64\)"
DESTINATION = "http://127.0.0.1:9/hook"


@pytest.mark.parametrize("attempts", [10**30, 2**63, 0, -1])
def test_out_of_range_names_the_field_and_range(attempts: int) -> None:
    with pytest.raises(InvalidArgument, match=rf"{RANGE}, got {attempts}"):
        txqueue.RetryPolicy(max_attempts=attempts)


def test_a_huge_number_is_not_printed_whole() -> None:
    with pytest.raises(InvalidArgument, match=rf"{RANGE}, got a larger number"):
        txqueue.RetryPolicy(max_attempts=10**5000)


def test_int64_max_is_accepted(tmp_path: Path) -> None:
    assert MAX_ATTEMPTS == 2**63 - 1
    with txqueue.connect(f"sqlite:///{tmp_path}/app.db") as db:
        events = txqueue.Events(db)
        policy = txqueue.RetryPolicy(max_attempts=MAX_ATTEMPTS)
        events.create_pipeline("p", DESTINATION, retry=policy, allow_private=True)
        assert events.get_pipeline("p").retry.max_attempts == MAX_ATTEMPTS
        with pytest.raises(InvalidArgument, match=RANGE):
            events.update_pipeline("p", max_attempts=10**30)
        assert events.get_pipeline("p").retry.max_attempts == MAX_ATTEMPTS


def test_cli_refuses_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    result = CliRunner().invoke(
        main,
        [
            "pipelines",
            "create",
            "p",
            "--destination",
            DESTINATION,
            "--allow-private",
            "--max-retry-attempts",
            str(10**30),
            "--database",
            url,
        ],
    )
    assert result.exit_code != 0
    assert "--max-retry-attempts must be a positive integer up to 9223372036854775807" in (
        result.output
    ), result.output
