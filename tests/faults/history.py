"""A checker for recorded queue histories: lost, duplicated, ghost and stale-ack counts.

A fault test records what happened — every send (committed or not, from the sender's point
of view or read back from the database), every receive a worker saw (key, lease token, lease
expiration, delivery count, wall time), every lease renewal, every effect the database holds
at the end (with the lease token its transaction acked with and when it was applied) and the
keys still queued — and hands it to `check`. The checker knows the rules, not the code under
test; it recomputes the redelivery backoff from SPEC §3 itself.

The counts (each must be 0 in every fault test):

``lost``        a committed send with no committed effect that is not still queued (or, when
                the test drained the queue, still queued): the message vanished or was never
                processed.
``duplicated``  a key with more than one committed effect: processed twice although effect and
                ack share a transaction.
``ghost``       a key that was received or has an effect although its send never committed:
                a rolled-back send was delivered.
``stale_ack``   a committed effect whose transaction ran on a lease that was no longer held:
                applied after the token's lease expired, or after another worker had received
                the message under a newer lease.

And one timing check: ``late_redeliveries`` counts receives that came later than the lease
rules allow after the previous lease ran out (lease expiration + backoff, plus ``tolerance``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from itertools import pairwise
from pathlib import Path
from typing import Any

__all__ = ["Effect", "History", "Receive", "Renewal", "Report", "Send", "backoff", "check"]

#: Longest redelivery backoff (SPEC §3: min(2^(n-1) s, 1 h)).
MAX_BACKOFF = 3600.0


def backoff(expired_leases: int) -> float:
    """Seconds a message waits after its n-th expired lease (SPEC §3), recomputed here."""
    if expired_leases <= 0:
        return 0.0
    return min(2.0 ** min(expired_leases - 1, 12), MAX_BACKOFF)


@dataclass(frozen=True)
class Send:
    key: Any
    committed: bool


@dataclass(frozen=True)
class Receive:
    key: Any
    token: str
    at: float  # wall-clock seconds when the worker had the message
    lease_expiration: float
    delivery_count: int
    worker: str = ""


@dataclass(frozen=True)
class Renewal:
    key: Any
    old_token: str
    new_token: str
    lease_expiration: float
    at: float


@dataclass(frozen=True)
class Effect:
    """A committed effect row: applied under ``token`` at ``applied_at`` (before its ack ran)."""

    key: Any
    token: str
    applied_at: float
    worker: str = ""


@dataclass
class History:
    sends: list[Send] = field(default_factory=list)
    receives: list[Receive] = field(default_factory=list)
    renewals: list[Renewal] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    remaining: set[Any] = field(default_factory=set)


@dataclass
class Report:
    lost: int = 0
    duplicated: int = 0
    ghost: int = 0
    stale_ack: int = 0
    late_redeliveries: int = 0
    redeliveries_checked: int = 0
    worst_redelivery_excess: float = 0.0  # seconds past the earliest allowed moment
    details: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    @property
    def clean(self) -> bool:
        return not (
            self.lost or self.duplicated or self.ghost or self.stale_ack or self.late_redeliveries
        )

    def figures(self) -> dict[str, Any]:
        data: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        data["worst_redelivery_excess"] = round(self.worst_redelivery_excess, 3)
        data["details"] = {k: v[:10] for k, v in self.details.items() if v}
        return data

    def __str__(self) -> str:
        return json.dumps(self.figures(), indent=1, default=str)


def _note(report: Report, kind: str, text: str) -> None:
    report.details[kind].append(text)


def check(
    history: History,
    *,
    lease: float,
    drained: bool = True,
    tolerance: float = 1.0,
    stale_slack: float = 0.05,
) -> Report:
    """Count the anomalies of ``history``; ``lease`` is the lease duration in seconds.

    ``drained``: the test waited for the queue to empty, so a committed send still queued is
    lost too. ``tolerance`` absorbs wake-up and scheduling latency in the redelivery check;
    ``stale_slack`` absorbs clock rounding between the database and the worker.
    """
    report = Report()
    committed = {s.key for s in history.sends if s.committed}
    effects_by_key: dict[Any, list[Effect]] = defaultdict(list)
    for effect in history.effects:
        effects_by_key[effect.key].append(effect)

    for key in sorted(committed, key=repr):
        if effects_by_key.get(key):
            continue
        if key in history.remaining and not drained:
            continue
        report.lost += 1
        where = "still queued" if key in history.remaining else "gone without an effect"
        _note(report, "lost", f"{key!r}: {where}")

    for key, effects in effects_by_key.items():
        if len(effects) > 1:
            report.duplicated += 1
            _note(report, "duplicated", f"{key!r}: {len(effects)} effects {effects}")

    seen = {r.key for r in history.receives} | set(effects_by_key)
    for key in sorted(seen - committed, key=repr):
        report.ghost += 1
        _note(report, "ghost", f"{key!r}: delivered but its send never committed")

    _check_stale(history, report, effects_by_key, stale_slack)
    _check_redelivery(history, report, lease, tolerance)
    return report


def _check_stale(
    history: History, report: Report, effects_by_key: dict[Any, list[Effect]], slack: float
) -> None:
    # Every lease a token names: when it was granted and when it runs out.
    granted: dict[str, tuple[Any, float, float]] = {}
    for r in history.receives:
        granted[r.token] = (r.key, r.at, r.lease_expiration)
    for n in history.renewals:
        key, started, _ = granted.get(n.old_token, (n.key, n.at, n.lease_expiration))
        granted[n.new_token] = (key, started, n.lease_expiration)
    receives_by_key: dict[Any, list[Receive]] = defaultdict(list)
    for r in history.receives:
        receives_by_key[r.key].append(r)

    for key, effects in effects_by_key.items():
        for effect in effects:
            lease = granted.get(effect.token)
            if lease is None:
                report.stale_ack += 1
                _note(report, "stale_ack", f"{key!r}: effect under unknown token {effect.token}")
                continue
            _, started, expiration = lease
            if effect.applied_at > expiration + slack:
                report.stale_ack += 1
                _note(
                    report,
                    "stale_ack",
                    f"{key!r}: applied {effect.applied_at - expiration:.3f}s after its lease expired",
                )
                continue
            newer = [
                r
                for r in receives_by_key[key]
                if r.token != effect.token and started < r.at < effect.applied_at - slack
            ]
            if newer:
                report.stale_ack += 1
                _note(report, "stale_ack", f"{key!r}: applied after {newer[0].worker} took it over")


def _check_redelivery(history: History, report: Report, lease: float, tolerance: float) -> None:
    """Each receive must come no later than the previous lease's expiry plus the backoffs."""
    expirations: dict[str, float] = {r.token: r.lease_expiration for r in history.receives}
    final_expiration: dict[str, float] = {}  # first token of a lease -> its last expiration
    renewed_from: dict[str, str] = {}
    for n in sorted(history.renewals, key=lambda n: n.at):
        first = renewed_from.get(n.old_token, n.old_token)
        renewed_from[n.new_token] = first
        final_expiration[first] = n.lease_expiration
    by_key: dict[Any, list[Receive]] = defaultdict(list)
    for r in history.receives:
        by_key[r.key].append(r)
    for key, receives in by_key.items():
        receives.sort(key=lambda r: r.delivery_count)
        for before, after in pairwise(receives):
            if after.delivery_count <= before.delivery_count:
                continue
            expired = final_expiration.get(before.token, expirations[before.token])
            # Leases granted in between that no record shows (a worker killed before it
            # could write the receive down) each last a lease and back off in turn.
            skipped = after.delivery_count - before.delivery_count - 1
            allowed = sum(
                backoff(n) for n in range(before.delivery_count, after.delivery_count)
            ) + skipped * (lease + tolerance)
            excess = after.at - (expired + allowed)
            report.redeliveries_checked += 1
            report.worst_redelivery_excess = max(report.worst_redelivery_excess, excess)
            if excess > tolerance:
                report.late_redeliveries += 1
                _note(
                    report,
                    "late_redeliveries",
                    f"{key!r}: delivery {after.delivery_count} came {excess:.2f}s late",
                )


def read_journal(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a worker journal; a torn last line (killed mid-write) is skipped."""
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def receives_from(events: Iterable[dict[str, Any]]) -> list[Receive]:
    return [
        Receive(e["key"], e["token"], e["t"], e["exp"], e["count"], e.get("worker", ""))
        for e in events
        if e.get("ev") == "receive"
    ]


def renewals_from(events: Iterable[dict[str, Any]]) -> list[Renewal]:
    return [
        Renewal(e["key"], e["old"], e["new"], e["exp"], e["t"])
        for e in events
        if e.get("ev") == "renew"
    ]
