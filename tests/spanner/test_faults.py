"""The fault suite's kill campaign on the Cloud Spanner emulator (tests/faults/test_kill.py).

One steady worker and three victims at a time receive from one queue and process each
message with ``process_then_ack`` (effect row + token-fenced ack in one transaction). Each
victim is SIGKILLed at a point of a message's life: after receive's commit returned (the
lease committed for a worker that never hears of it), in the handler, inside the
transaction after the effect row, just before the commit of effect + ack (its lease read
holding the emulator's one transaction), after that commit, or at a random moment. The
emulator aborts concurrent transactions; the retries absorb that. The history checker then
demands 0 lost, 0 duplicated, 0 ghost, 0 stale acks and no late redelivery (within
``fault_check.TOLERANCE``).

Short here; ``scripts/spanner-fault-check --kills N`` runs a longer campaign.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from faults.worker import POINTS

from .fault_check import campaign, covering_seed

KILLS = 30


@pytest.mark.timeout(240)
def test_sigkill_on_the_emulator_loses_nothing_and_applies_each_effect_once(
    spanner_url: str, tmp_path: Path
) -> None:
    seed = covering_seed(random.Random())
    figures = campaign(spanner_url, tmp_path / "workers", KILLS, seed)
    report = figures.pop("report")
    print(f"seed={seed}", figures, report.figures())
    assert figures["kills"] >= KILLS
    for point in [*POINTS, "random"]:
        assert figures["kills_by_point"].get(point, 0) >= 1, (seed, figures["kills_by_point"])
    assert report.lost == 0, report
    assert report.duplicated == 0, report
    assert report.ghost == 0, report
    assert report.stale_ack == 0, report
    assert report.late_redeliveries == 0, report
    assert report.redeliveries_checked >= 3, report
    assert figures["effects"] == figures["messages_sent"]
