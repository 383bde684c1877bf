"""Pytest fixtures for the Cloud Spanner emulator (the root conftest imports them).

``spanner_emulator`` starts one emulator per session (``tests/spannerserver.py``) and points
the client at it with ``SPANNER_EMULATOR_HOST``; ``spanner_url`` is a fresh GoogleSQL database
per test. Without the emulator or google-cloud-spanner the tests are skipped, except under
``CI=true`` where they fail. ``TXQUEUE_TEST_SPANNER=1`` adds Cloud Spanner to the engines the
conformance and driver suites run on (``database_url``).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest
from spannerserver import ExternalEmulator, SpannerEmulator, find_or_start

#: Set to 1 to run the conformance and driver suites on Cloud Spanner too.
ENV_OPT_IN = "TXQUEUE_TEST_SPANNER"


def spanner_opted_in() -> bool:
    return os.environ.get(ENV_OPT_IN) == "1"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def spanner_emulator() -> Iterator[SpannerEmulator | ExternalEmulator]:
    """The session's emulator, with ``SPANNER_EMULATOR_HOST`` pointing at it."""
    if importlib.util.find_spec("google.cloud.spanner") is None:
        _unavailable("google-cloud-spanner is not installed (pip install 'txqueue[spanner]')")
    emulator, reason = find_or_start()
    if emulator is None:
        _unavailable(reason)
    assert emulator is not None
    previous = os.environ.get("SPANNER_EMULATOR_HOST")
    os.environ["SPANNER_EMULATOR_HOST"] = emulator.host
    try:
        yield emulator
    finally:
        if previous is None:
            os.environ.pop("SPANNER_EMULATOR_HOST", None)
        else:
            os.environ["SPANNER_EMULATOR_HOST"] = previous
        emulator.stop()


@pytest.fixture
def spanner_url(spanner_emulator: SpannerEmulator | ExternalEmulator) -> Iterator[str]:
    """A fresh GoogleSQL database on the emulator; dropped afterwards."""
    url = spanner_emulator.create_database()
    try:
        yield url
    finally:
        spanner_emulator.drop_database(url)
