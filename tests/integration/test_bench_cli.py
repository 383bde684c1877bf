"""``txqueue bench`` end to end on a small run: every workload against txqueue and the raw
baseline of the engine, counted (not timed): each send stored, each message drained once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import txqueue
from txqueue.bench.systems import TxqueueSystem, ordered_key, random_key
from txqueue.cli.main import main
from txqueue.drivers.engines import parse_url

MESSAGES = 120


def test_bench_runs_every_workload_on_both_systems(database_url: str, tmp_path: Path) -> None:
    report = tmp_path / "bench.json"
    arguments = [
        "bench",
        "--database",
        database_url,
        "--messages",
        str(MESSAGES),
        "--workers",
        "2",
        "--batch",
        "25",
        "--repeats",
        "1",
        "--rate",
        "400",
        "--keys",
        "ordered",
        "--output",
        str(report),
    ]
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, arguments)
    assert result.exit_code == 0, result.output

    data = json.loads(report.read_text())
    assert data["keys"] == "ordered"
    results = data["results"]
    assert set(results) == {
        "send 1/txn",
        "send ×25",
        "drain 1 worker ×25",
        "drain 2 workers ×25",
        "drain 1 worker ×1",
        "latency @400/s",
    }
    for label, systems in results.items():
        assert set(systems) == {"raw", "txqueue"}, label
        for system, (run,) in systems.items():
            if label.startswith("send"):
                assert run["stored"] == MESSAGES and run["rate"] > 0, (label, system, run)
            elif label.startswith("drain"):
                assert (run["handled"], run["duplicates"]) == (MESSAGES, 0), (label, system)
            else:
                assert run["p50_ms"] is not None and run["p99_ms"] >= run["p50_ms"], run
                assert run["after_commit_p99_ms"] >= run["after_commit_p50_ms"] > 0, run
                assert run["commit_p99_ms"] > 0, run
    assert "txqueue / raw" in result.output
    # Progress while it runs: stderr is no terminal here, so a line as each measurement starts.
    steps = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert steps[0] == "[1/12] send 1/txn: raw" and steps[-1].startswith("[12/12] latency")


def test_each_section_starts_from_an_empty_queue_as_the_baseline_does(database_url: str) -> None:
    """On PostgreSQL the raw baseline truncates its table before a section; txqueue's queue
    must start as clean, not behind the previous section's rows left as dead tuples."""
    system = TxqueueSystem(database_url)
    try:
        system.setup()
        system.send([b"{}"] * 30, 10)
        assert system.pending() == 30
        system.setup()
        assert system.pending() == 0
        if parse_url(database_url).engine == "postgres":
            import psycopg

            with psycopg.connect(parse_url(database_url).target) as connection:
                query = "SELECT pg_relation_size('txqueuebench')"
                assert connection.execute(query).fetchone() == (0,)  # a new, empty file
    finally:
        system.close()


def test_ordered_keys_sort_in_the_order_they_were_made() -> None:
    keys = [ordered_key() for _ in range(2000)]
    assert all(len(key) == 32 for key in keys)
    prefixes = [key[:16] for key in keys]
    assert prefixes == sorted(prefixes)  # nanoseconds first: creation order
    assert len(set(keys)) == len(keys)
    assert len(random_key()) == 32


def test_bench_on_an_unreachable_database_says_so_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-directory" / "bench.db"
    arguments = ["bench", "--database", f"sqlite:///{missing}", "--workload", "send"]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit), result.exception  # not a traceback
    assert result.output.startswith("Error: NotFound: "), result.output  # no wait mends it
    assert not missing.parent.exists()


@pytest.mark.timeout(300)  # a dozen process start-ups: slow on a loaded machine
def test_bench_events_runs_both_systems_and_counts_every_event(
    database_url: str, tmp_path: Path
) -> None:
    """``--workload events``: txqueue's dispatcher and the raw outbox relay deliver every
    event once to the endpoint, with 1 and 2 processes, and the latency run gives p50/p99."""
    report = tmp_path / "events.json"
    arguments = [
        "bench", "--database", database_url, "--workload", "events", "--messages", "60",
        "--workers", "2", "--batch", "25", "--repeats", "1", "--rate", "100",
        "--output", str(report),
    ]  # fmt: skip
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, arguments)
    assert result.exit_code == 0, result.output

    data = json.loads(report.read_text())
    assert data["endpoint"]["ceiling"] > 0 and data["endpoint"]["concurrency"] > 0
    results = data["results"]
    assert set(results) == {"events 1 dispatcher", "events 2 dispatchers", "events latency @100/s"}
    for label, systems in results.items():
        assert set(systems) == {"raw", "txqueue"}, label
        for system, (run,) in systems.items():
            if "latency" in label:
                assert run["lost"] == 0, (label, system, run)
                assert run["p99_ms"] >= run["p50_ms"] > 0, (label, system, run)
            else:
                counts = (run["delivered"], run["duplicates"], run["lost"])
                assert counts == (60, 0, 0), (label, system, run)
                assert run["rate"] > 0, (label, system, run)
    assert "txqueue / raw" in result.output and "events/s" in result.output
    # The event tables were created in the dialect txqueue bench opens the database with, so a
    # second run of any workload opens it again.
    txqueue.connect(database_url, dialect="googlesql").close()
