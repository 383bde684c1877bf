"""The kill campaign of the fault suite on the Cloud Spanner emulator (tests/faults/test_kill.py).

``tests/spanner/test_faults.py`` runs a short one in CI; ``scripts/spanner-fault-check
[--kills N] [--seed S]`` a longer one on an emulator of its own, printing the figures and,
last, ``kills=N lost=L duplicated=D ghost=G stale_ack=S late=T worst_late_s=W`` (exit 0 only
when L, D, G, S and T are 0).

Redeliveries may come up to ``TOLERANCE`` seconds late (SQLite and PostgreSQL keep to
1.5 s; the figures report the worst seen here). The emulator runs one read-write transaction
at a time, so receivers abort each other, and a receive re-run after an abort walks the
ready index's eight shards from a random one: oldest first within a shard, best effort
across them (drivers/spanner/leasing.py). A redelivered message then waits while fresh ones
of other shards go first, seconds on a busy emulator; what the check still catches is a
message not redelivered at all until the drain.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from faults import test_kill
from faults.test_kill import run_campaign
from faults.worker import POINTS

#: Seconds a redelivery may come after lease expiry + backoff on the emulator.
TOLERANCE = 8.0
#: Every point is among the first victims of a campaign's seed this many times at least.
COVERED = 3
#: Victims a campaign starts before its kills are counted up (see `covering_seed`).
FIRST_VICTIMS = 24


def covering_seed(rng: random.Random) -> int:
    """A random seed whose first victims stop at every point ``COVERED`` times or more.

    Mirrors how ``run_campaign`` draws each victim's point (a choice, then a uniform or an
    integer), so a short campaign kills at every point; if that drawing changes, coverage is
    no longer certain and the test's per-point check says so.
    """
    points = (*POINTS, "random")
    while True:
        seed = rng.randrange(1 << 30)
        draw = random.Random(seed)
        seen: dict[str, int] = {}
        for _ in range(FIRST_VICTIMS):
            point = draw.choice(points)
            seen[point] = seen.get(point, 0) + 1
            if point == "random":
                draw.uniform(0.05, 0.6)
            else:
                draw.randint(1, 3)
        if all(seen.get(point, 0) >= COVERED for point in points):
            return seed


def campaign(url: str, directory: Path, kills: int, seed: int) -> dict[str, Any]:
    """Run the kill campaign on ``url``: its figures, with the checker's report."""
    return run_campaign(url, directory, seed, kills_wanted=kills, tolerance=TOLERANCE)


def main() -> int:
    from spannerserver import SpannerEmulator

    parser = argparse.ArgumentParser(prog="scripts/spanner-fault-check")
    parser.add_argument("--kills", type=int, default=150)
    parser.add_argument("--seed", type=int, default=None)
    arguments = parser.parse_args()
    seed = arguments.seed if arguments.seed is not None else random.randrange(1 << 30)
    print(f"seed={seed}", flush=True)  # first: a failed campaign can be re-run with it
    # the campaign's own time limit is for the CI's sizes: a longer one gets more time
    test_kill.CAMPAIGN_TIMEOUT = max(test_kill.CAMPAIGN_TIMEOUT, 2.0 * arguments.kills)
    with SpannerEmulator.start() as emulator, tempfile.TemporaryDirectory() as scratch:
        os.environ["SPANNER_EMULATOR_HOST"] = emulator.host
        url = emulator.create_database()
        figures = campaign(url, Path(scratch) / "workers", arguments.kills, seed)
    report = figures.pop("report")
    for name, value in figures.items():
        print(f"{name}: {value}")
    print(f"checker: {report}")
    print(
        f"kills={figures['kills']} lost={report.lost} duplicated={report.duplicated}"
        f" ghost={report.ghost} stale_ack={report.stale_ack} late={report.late_redeliveries}"
        f" worst_late_s={report.worst_redelivery_excess:.2f}"
    )
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
