"""CPU per delivery of one dispatcher process against one raw outbox relay, alternating.

    python benchmarks/dispatcher_cpu.py                            # SQLite in a temp dir
    python benchmarks/dispatcher_cpu.py --database postgresql://user@host/db --rounds 4
    python benchmarks/dispatcher_cpu.py --checkout /tmp/before     # another checkout's code

The systems are `txqueue bench --workload events`'s (`txqueue/bench/events.py`): ``--events``
are published, then one ``txqueue dispatcher`` (or one relay) delivers them to the benchmark's
endpoint. Between the first arrival and 95 % of them this reads, from ``/proc``, the delivering
process's CPU time (user and system, all its threads) and its context switches, per delivery,
and the endpoint's CPU. The rate moves with the machine's moment; these move less, so they tell
two versions of the code apart. ``--checkout`` runs the dispatcher from another checkout (a
``git worktree`` of an older commit): its directory is the dispatcher's working directory and
its ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from txqueue.bench import events
from txqueue.bench.endpoint import Endpoint

TICK = os.sysconf("SC_CLK_TCK")


def _usage(pid: int) -> tuple[float, float, int]:
    """Seconds of user and system CPU and context switches of ``pid``'s threads so far."""
    user = system = switches = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        stat = Path(f"/proc/{pid}/task/{thread}/stat").read_text().rsplit(")", 1)[1].split()
        user, system = user + int(stat[11]), system + int(stat[12])
        status = Path(f"/proc/{pid}/task/{thread}/status").read_text()
        switches += sum(int(n) for n in re.findall(r"ctxt_switches:\s+(\d+)", status))
    return user / TICK, system / TICK, switches


def _children() -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.add(int(entry))
    return found


def measure(kind: str, url: str, endpoint: Endpoint, count: int) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    path = f"/{kind}-{tag}"
    system = events._system(kind, url, endpoint.url(path), tag, 100)
    documents = [events._document(number, tag) for number in range(count)]
    for start in range(0, count, 100):
        system.publish(documents[start : start + 100])
    before = _children()
    workers = system.start(url, 1)
    try:
        while not endpoint.arrivals(path).events:
            time.sleep(0.002)
        [pid] = [
            child
            for child in _children() - before
            if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes()
        ]  # the dispatcher, or the relay (not multiprocessing's helper)
        first, clock, arrived = _usage(pid), time.monotonic(), endpoint.arrivals(path).received
        while endpoint.arrivals(path).received < count * 0.95:
            time.sleep(0.01)
        last, seconds = _usage(pid), time.monotonic() - clock
        delivered = endpoint.arrivals(path).received - arrived
    finally:
        system.stop(workers)
        system.close()
    user, system_cpu, switches = (b - a for a, b in zip(first, last))
    return {
        "rate": delivered / seconds,
        "user_us": user / delivered * 1e6,
        "system_us": system_cpu / delivered * 1e6,
        "switches": switches / delivered,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", default=None)
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--checkout", default=None, help="run the dispatcher from here")
    options = parser.parse_args()
    url = options.database or f"sqlite:///{tempfile.mkdtemp()}/dispatcher_cpu.db"
    if options.checkout:
        os.chdir(options.checkout)  # `python -m` puts the working directory first on sys.path
        os.environ["PYTHONPATH"] = options.checkout
    with Endpoint() as endpoint:
        for round_number in range(options.rounds):
            kinds = ("raw", "txqueue") if round_number % 2 == 0 else ("txqueue", "raw")
            for kind in kinds:
                got = measure(kind, url, endpoint, options.events)
                print(
                    f"{kind:8} {got['rate']:7.0f} events/s  CPU per delivery "
                    f"{got['user_us'] + got['system_us']:5.0f} us (user {got['user_us']:4.0f}, "
                    f"system {got['system_us']:4.0f})  {got['switches']:4.1f} context switches",
                    flush=True,
                )


if __name__ == "__main__":
    main()
