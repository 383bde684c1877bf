"""``txqueue bench``: txqueue and the raw-SQL baseline of the same engine, side by side."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from txqueue.bench import workloads
from txqueue.cli.common import database_option, open_database
from txqueue.core.url import redact_url
from txqueue.drivers.engines import SPANNER, traits_for

_SYSTEMS = ("raw", "txqueue")
#: The Cloud Spanner emulator runs one read-write transaction at a time.
EMULATOR_LABEL = "emulator: correctness only, not a speed figure"


@click.command()
@database_option
@click.option(
    "--workload",
    type=click.Choice(["send", "drain", "latency", "events", "all"]),
    default="all",
    help="all: send, drain and latency. events (on its own): the event dispatcher against a"
    " raw outbox relay, 1, 2 and --workers processes, and its latency at --rate.",
)
@click.option("--messages", default=5000, show_default=True, help="Messages per measurement.")
@click.option("--workers", default=4, show_default=True, help="Drain worker processes.")
@click.option("--batch", default=100, show_default=True, help="Send/receive/ack batch size.")
@click.option(
    "--repeats", default=3, show_default=True, help="Runs per figure; the median is shown."
)
@click.option("--rate", default=200.0, show_default=True, help="Send rate of the latency workload.")
@click.option(
    "--keys",
    type=click.Choice(["random", "ordered"]),
    default="random",
    show_default=True,
    help="txqueue's message keys: random, 32 hex digits (as the shared harness's UUID4 hex), or time-ordered.",
)
@click.option("--output", type=click.Path(path_type=Path), default=None, help="Write JSON here.")
def bench(
    database: str,
    workload: str,
    messages: int,
    workers: int,
    batch: int,
    repeats: int,
    rate: float,
    keys: str,
    output: Path | None,
) -> None:
    """Measure send, drain and latency for txqueue and the raw baseline, and print ratios."""
    # Unreachable: one clear error, first. A new database is created (bench writes).
    open_database(database, dialect="googlesql", create=True).close()
    plan: list[tuple[str, dict[str, Any]]] = []
    if workload in ("send", "all"):
        plan += [
            ("send 1/txn", {"kind": "send", "batch": 1}),
            (f"send ×{batch}", {"kind": "send", "batch": batch}),
        ]
    if workload in ("drain", "all"):
        plan += [
            (f"drain 1 worker ×{batch}", {"kind": "drain", "workers": 1, "batch": batch}),
            (
                f"drain {workers} workers ×{batch}",
                {"kind": "drain", "workers": workers, "batch": batch},
            ),
            ("drain 1 worker ×1", {"kind": "drain", "workers": 1, "batch": 1}),
        ]
    if workload in ("latency", "all"):
        plan += [(f"latency @{rate:g}/s", {"kind": "latency", "batch": 1})]
    if workload == "events":
        # Imported here: they need the events extra (httpx), which the rest of txqueue does not.
        from txqueue.bench import events as event_workloads
        from txqueue.bench.endpoint import Endpoint, ceiling

        plan += event_workloads.plan(workers, rate)
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    console = Console()
    endpoint = Endpoint() if workload == "events" else None
    report: dict[str, Any] = {"database": redact_url(database), "keys": keys}
    label = _label(database)
    if label:
        report["label"] = label
        console.print(label)
    if endpoint is not None:
        concurrency = event_workloads.CONCURRENCY
        limit = ceiling(endpoint, max(messages, 500), concurrency)
        report["endpoint"] = {"ceiling": round(limit, 1), "concurrency": concurrency}
        console.print(f"HTTP endpoint: {limit:,.0f} POST/s from a bare httpx loop of {concurrency}")
    with _Steps(len(plan) * 2 * repeats) as progress:
        for label, spec in plan:
            for attempt in range(repeats):
                # The two systems alternate, each first in every other round, so that a slow
                # spell of a shared machine (a disk stalling on fsync) weighs on both.
                for system in _SYSTEMS if attempt % 2 == 0 else _SYSTEMS[::-1]:
                    progress.start(f"{label}: {system}")
                    if endpoint is not None:
                        run = event_workloads.run(
                            system, database, endpoint, messages, rate, batch, spec
                        )
                    else:
                        run = _run(system, database, messages, rate, workers, spec, keys)
                    results.setdefault(label, {}).setdefault(system, []).append(run)
                    progress.advance()
    if endpoint is not None:
        endpoint.close()
    console.print(_table(results, database, label))
    if output:
        report["results"] = results
        output.write_text(json.dumps(report, indent=1))
        console.print(f"wrote {output}")


class _Steps:
    """Progress while the measurements run, on stderr: rich's bar when stderr is a terminal,
    else one line as each measurement starts (a log, a CI job)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.console = Console(stderr=True)
        self.bar = Progress(console=self.console, transient=True)
        self.task = self.bar.add_task("benchmarking", total=total)
        self.live = self.console.is_terminal

    def __enter__(self) -> _Steps:
        if self.live:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.bar.stop()

    def start(self, description: str) -> None:
        if self.live:
            self.bar.update(self.task, description=description)
        else:
            click.echo(f"[{self.done + 1}/{self.total}] {description}", err=True)

    def advance(self) -> None:
        self.done += 1
        self.bar.advance(self.task)


def _run(
    system: str,
    url: str,
    messages: int,
    rate: float,
    workers: int,
    spec: dict[str, Any],
    keys: str,
) -> dict[str, Any]:
    if spec["kind"] == "send":
        count = messages if spec["batch"] > 1 else min(messages, 2000)
        return workloads.send(system, url, count, spec["batch"], keys)
    if spec["kind"] == "drain":
        count = messages if spec["batch"] > 1 else min(messages, 2000)
        return workloads.drain(system, url, count, spec["workers"], spec["batch"], keys=keys)
    return workloads.latency(system, url, min(messages, 1000), rate, spec["batch"], keys)


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _label(url: str) -> str | None:
    """What the figures are worth: on the Cloud Spanner emulator, nothing as speed."""
    if traits_for(url) is SPANNER and os.environ.get("SPANNER_EMULATOR_HOST"):
        return EMULATOR_LABEL
    return None


def _table(
    results: dict[str, dict[str, list[dict[str, Any]]]], url: str, label: str | None = None
) -> Table:
    title = f"txqueue bench on {redact_url(url).split('?')[0]} (medians)"
    table = Table(title=f"{title}; {label}" if label else title)
    for column in ("workload", "raw", "txqueue", "txqueue / raw"):
        table.add_column(column, justify="right" if column != "workload" else "left")
    for label, systems in results.items():
        key = "p50_ms" if "latency" in label else "rate"
        raw, ours = _median(systems["raw"], key), _median(systems["txqueue"], key)
        if key == "p50_ms":
            raw99, ours99 = _median(systems["raw"], "p99_ms"), _median(systems["txqueue"], "p99_ms")
            table.add_row(
                label + " p50/p99 ms", _milliseconds(raw, raw99), _milliseconds(ours, ours99), ""
            )
            after = [
                _milliseconds(
                    _median(systems[system], "after_commit_p50_ms"),
                    _median(systems[system], "after_commit_p99_ms"),
                )
                for system in _SYSTEMS
            ]
            table.add_row("  after the send's commit", *after, "")
            continue
        ratio = f"{ours / raw:.0%}" if raw and ours else "-"
        table.add_row(
            label + (" events/s" if label.startswith("events") else " msg/s"),
            f"{raw:,.0f}" if raw else "-",
            f"{ours:,.0f}" if ours else "-",
            ratio,
        )
    return table


def _milliseconds(p50: float | None, p99: float | None) -> str:
    """``p50 / p99`` to a tenth of a millisecond (a median of two runs is their mean)."""
    return " / ".join("-" if value is None else f"{value:.1f}" for value in (p50, p99))
