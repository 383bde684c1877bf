"""Commands copied from the Eventarc Advanced documentation run with only the program name
changed (issue #40, item 2): ``gcloud eventarc`` becomes ``txqueue``, everything else is as
printed, run by a real shell. Fully qualified names, ``--location``, ``--project``,
``--message-bus-project`` and ``--destinations`` are taken; what has no local meaning is
refused with the part named. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import txqueue

BIN = str(Path(sys.executable).parent)

# As printed in the Eventarc Advanced documentation ("Retry events"), program name changed.
RETRY_POLICY_UPDATE = """
txqueue pipelines update my-pipeline \\
    --min-retry-delay=4 \\
    --max-retry-delay=4 \\
    --max-retry-attempts=5
"""
ARCHIVE_PIPELINE = """
    txqueue pipelines create my-archive-pipeline \\
    --destinations=pubsub_topic='my-archive-topic' \\
    --min-retry-delay=1 \\
    --max-retry-delay=20 \\
    --max-retry-attempts=6 \\
    --location=us-central1
"""
ARCHIVE_ENROLLMENT = """
    txqueue enrollments create my-archive-enrollment \\
    --cel-match="true" \\
    --destination-pipeline=my-archive-pipeline \\
    --message-bus=my-message-bus \\
    --message-bus-project=my-google-cloud-project \\
    --location=us-central1
"""
# The documentation's PIPELINE_NAME may be "the ID or fully qualified name of the pipeline".
QUALIFIED_UPDATE = """
txqueue pipelines update projects/my-project/locations/us-central1/pipelines/my-pipeline \\
    --min-retry-delay=2 --max-retry-delay=8 --max-retry-attempts=3
"""


def shell(database_url: str, script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run by bash as a user types it, ``txqueue`` on PATH, the database set."""
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "TXQUEUE_DATABASE_URL": database_url,
    }
    return subprocess.run(
        ["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=120
    )


def ok(database_url: str, script: str) -> Any:
    result = shell(database_url, script)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def configured(database_url: str) -> str:
    """What the documentation sets up in words: a bus, and the topic the archive pipeline
    delivers to (a bus here); ``my-pipeline`` is the pipeline its retry example changes."""
    with txqueue.connect(database_url) as db:
        events = txqueue.Events(db)
        events.create_bus("my-message-bus")
        events.create_bus("my-archive-topic")
        events.create_pipeline("my-pipeline", "bus:my-message-bus")
    return database_url


def test_the_retry_policy_command_runs_as_printed(configured: str) -> None:
    updated = ok(configured, RETRY_POLICY_UPDATE)
    assert updated["name"] == "my-pipeline"
    assert updated["retry"] == {
        "max_attempts": 5,
        "min_retry_delay_seconds": 4.0,
        "max_retry_delay_seconds": 4.0,
    }


def test_a_fully_qualified_pipeline_name_names_the_local_pipeline(configured: str) -> None:
    updated = ok(configured, QUALIFIED_UPDATE)
    assert updated["name"] == "my-pipeline"
    assert updated["retry"]["max_attempts"] == 3
    described = ok(
        configured,
        "txqueue pipelines describe projects/other-project/locations/europe-west1/pipelines/"
        "my-pipeline",
    )
    assert described["retry"] == updated["retry"]


def test_the_archive_pipeline_and_enrollment_run_as_printed(configured: str) -> None:
    pipeline = ok(configured, ARCHIVE_PIPELINE)
    assert pipeline["name"] == "my-archive-pipeline"
    assert pipeline["destination"] == "bus:my-archive-topic"
    assert pipeline["retry"] == {
        "max_attempts": 6,
        "min_retry_delay_seconds": 1.0,
        "max_retry_delay_seconds": 20.0,
    }
    enrollment = ok(configured, ARCHIVE_ENROLLMENT)
    assert {k: enrollment[k] for k in ("name", "bus", "pipeline", "cel_match")} == {
        "name": "my-archive-enrollment",
        "bus": "my-message-bus",
        "pipeline": "my-archive-pipeline",
        "cel_match": "true",
    }


@pytest.mark.parametrize(
    ("command", "named"),
    [
        (
            "txqueue pipelines create p --destinations=workflow=my-workflow",
            "workflow= has no meaning for a local database",
        ),
        (
            "txqueue pipelines create p"
            " --destinations=http_endpoint_uri=https://example.com,network_attachment=a",
            "network_attachment= has no meaning for a local database",
        ),
        (
            "txqueue pipelines create p --destinations=pubsub_topic=t,message_bus=b",
            "exactly one of http_endpoint_uri=, message_bus= or pubsub_topic=",
        ),
        (
            "txqueue pipelines update projects/My_Project/locations/us-central1/pipelines/p"
            " --min-retry-delay=4",
            "project 'My_Project' is not a Google Cloud project ID",
        ),
        (
            "txqueue pipelines update projects/my-project/locations/us-central1/buses/p"
            " --min-retry-delay=4",
            "expected projects/PROJECT/locations/LOCATION/pipelines/ID",
        ),
        (
            "txqueue pipelines update projects/my-project/locations/us-central1/pipelines/p"
            " --location=europe-west1 --min-retry-delay=4",
            "location 'us-central1' in the name differs from --location 'europe-west1'",
        ),
        (
            "txqueue enrollments create e --cel-match=true --destination-pipeline=my-pipeline"
            " --message-bus=my-message-bus --message-bus-project=Not_A_Project",
            "Invalid value for --message-bus-project",
        ),
        (
            "txqueue pipelines create p --destination bus:my-message-bus --location=US_Central",
            "location 'US_Central' is not a location such as us-central1",
        ),
    ],
)
def test_what_has_no_local_meaning_is_refused_by_name(
    configured: str, command: str, named: str
) -> None:
    result = shell(configured, command)
    assert result.returncode == 2, result.stdout
    assert named in result.stderr
    listed = shell(configured, "txqueue pipelines list --format json").stdout.splitlines()
    assert sorted(json.loads(line)["name"] for line in listed) == ["my-pipeline"]
