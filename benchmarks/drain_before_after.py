"""Two versions of txqueue drain through the peer harness's adapters, turn by turn.

    python benchmarks/drain_before_after.py --harness /tmp/bench \\
        --before /tmp/txq-before --after . --engine sqlite --system batched

A whole harness run (``run.py --workloads w2``) drains 10,000 messages in under a second, and on
this 2-core VM one run differs from the next by ±15 %: eight alternating rounds of two
versions can read 0.8 or 1.1 for code that executes the same instructions (see
``drain_cost.py``). Here each version lives in a long-lived process, with its own queue
(its own SQLite file or PostgreSQL database), and the two take turns: each turn loads
``--chunk`` messages into both queues (not timed), then each side drains its chunk through the
harness's own adapter code (``txqueue:batch=100``: ``consume_loop``, which receives batches of
100 and acks each in one transaction; ``txqueue_worker``: ``consume``, which starts an ``App``
and a ``Worker`` and stops it, as the harness does for every drain). Which side goes first
alternates every turn. A slow spell of the machine then falls on both sides of a turn alike,
and the median of the per-turn ratios says what one version costs against the other. Both
processes are replaced every ``--turns-per-process`` turns.

``--harness`` is a prepared copy of ``../shared/bench`` with this directory's ``peers``
adapters in it (``benchmarks/peers/README.md``); ``--before`` and ``--after`` are source trees
of txqueue (a ``git worktree`` of the older commit, and this checkout).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any

SYSTEMS = {"batched": ("txqueue", {"batch": "100"}), "worker": ("txqueue_worker", {})}
SIDES = ("before", "after")


def _side(harness: str, engine: str, system: str, tag: str, pg_dsn: str) -> None:
    """One side, on standard streams: ``load N`` sends N messages (not timed); ``drain``
    handles all that wait and answers the seconds it took."""
    sys.path.insert(0, harness)
    from adapters import make_adapter  # the harness's registry

    name, params = SYSTEMS[system]
    workdir = f"/tmp/drain-before-after/{tag}"
    os.makedirs(workdir, exist_ok=True)
    config: dict[str, Any] = {
        "pg_dsn": pg_dsn,
        "workdir": workdir,
        "txqueue_db": f"drain_before_after_{tag}",
        "params": dict(params, engine=engine),
    }
    adapter = make_adapter(name, config)
    adapter.setup()
    adapter.worker_open(1)
    waiting = 0  # loaded and not yet handled: what the next drain waits for
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, count = line.partition(" ")
        if command == "load":
            payloads = [b'{"seq": %d, "ts": 0.0, "pad": ""}' % i for i in range(int(count))]
            adapter.producer_open()
            adapter.enqueue(payloads, 1000)
            adapter.producer_close()
            waiting += int(count)
            print("loaded", flush=True)
            continue
        seconds, handled = _drain(adapter, waiting)
        waiting -= handled
        print(f"{seconds:.6f}", flush=True)


def _drain(adapter: Any, target: int) -> tuple[float, int]:
    """Drain ``target`` messages through the adapter's ``consume``, as the harness's worker
    processes do; returns the seconds until the last one was handled, and how many were."""
    handled = 0
    finished: list[float] = []

    def on_message(payload: bytes) -> None:
        nonlocal handled
        handled += 1
        if handled == target:
            finished.append(time.perf_counter())

    started = time.perf_counter()
    adapter.consume(1, on_message, lambda: handled >= target)
    return finished[0] - started, handled


def _start(args: argparse.Namespace, side: str, tree: str) -> subprocess.Popen[str]:
    """Start one side's process (with its own new queue) and wait until it is ready."""
    environment = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    command = [sys.executable, os.path.abspath(__file__), "--side", side]
    command += ["--harness", args.harness, "--engine", args.engine, "--system", args.system]
    command += ["--pg-dsn", args.pg_dsn]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environment
    )
    if process.stdout is None or process.stdout.readline().strip() != "ready":
        raise SystemExit(f"the {side} side did not start")
    return process


def _ask(process: subprocess.Popen[str], line: str) -> str:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()
    return process.stdout.readline().strip()


def _turns(args: argparse.Namespace) -> dict[str, list[float]]:
    """Run the turns; returns each side's seconds per turn. Both processes are replaced every
    ``--turns-per-process`` turns: a process keeps its hash seed and memory layout for life,
    which moves its speed by a point or so, and new pairs average that out."""
    trees = {"before": args.before, "after": args.after}
    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    for first in range(0, args.turns, args.turns_per_process):
        processes = {side: _start(args, side, trees[side]) for side in SIDES}
        for turn in range(first, min(args.turns, first + args.turns_per_process)):
            for side in SIDES:
                _ask(processes[side], f"load {args.chunk}")
            for side in SIDES if turn % 2 == 0 else reversed(SIDES):
                seconds[side].append(float(_ask(processes[side], "drain")))
        for process in processes.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", required=True, help="a prepared copy of ../shared/bench")
    parser.add_argument("--before", help="source tree of the older txqueue")
    parser.add_argument("--after", help="source tree of the newer txqueue")
    parser.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--system", choices=tuple(SYSTEMS), default="batched")
    parser.add_argument("--chunk", type=int, default=2000, help="messages per side per turn")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--turns-per-process", type=int, default=25)
    parser.add_argument("--pg-dsn", default="host=127.0.0.1 port=55432 user=bench")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        _side(args.harness, args.engine, args.system, args.side, args.pg_dsn)
        return
    if not (args.before and args.after):
        parser.error("--before and --after are required")
    seconds = _turns(args)
    speed = [before / after for before, after in zip(seconds["before"], seconds["after"])]
    quartiles = statistics.quantiles(speed, n=4)
    rates = {side: args.chunk / statistics.median(seconds[side]) for side in SIDES}
    print(
        f"{args.system} drain on {args.engine}, {args.turns} turns of {args.chunk:,}:"
        f" before {rates['before']:,.0f}/s, after {rates['after']:,.0f}/s (medians);"
        f" after's speed against before's, median of the turns {statistics.median(speed):.3f}"
        f" (quartiles {quartiles[0]:.3f}–{quartiles[2]:.3f})"
    )


if __name__ == "__main__":
    main()
