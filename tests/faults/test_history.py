"""The history checker itself: it passes clean histories and catches each kind of anomaly.

The fault tests trust its zeros, so here it is fed histories with known defects.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from .history import Effect, History, Receive, Renewal, Send, backoff, check, read_journal

LEASE = 1.0


def _token(n: int) -> str:
    return f"token{n}"


def simulate(keys: int, failures: list[int], jitter: float = 0.1) -> History:
    """A correct history: each key fails ``failures[k]`` leases, then is processed once."""
    history = History()
    serial = 0
    for key in range(keys):
        history.sends.append(Send(key, True))
        t = 100.0 + key
        for count in range(1, failures[key % len(failures)] + 2):
            serial += 1
            receive = Receive(key, _token(serial), t, t + LEASE, count, "w")
            history.receives.append(receive)
            t = receive.lease_expiration + backoff(count) + jitter  # redelivered on time
        history.effects.append(Effect(key, _token(serial), history.receives[-1].at + 0.01))
    return history


def test_a_clean_history_has_no_anomalies() -> None:
    report = check(simulate(5, [0, 1, 3]), lease=LEASE)
    assert report.clean, report
    assert report.redeliveries_checked == 0 + 1 + 3 + 0 + 1  # failures per key, cycled
    assert report.worst_redelivery_excess <= 0.1 + 1e-9


def test_backoff_follows_the_spec() -> None:
    assert [backoff(n) for n in range(5)] == [0.0, 1.0, 2.0, 4.0, 8.0]
    assert backoff(13) == 3600.0 and backoff(100) == 3600.0


def test_a_committed_send_without_an_effect_is_lost() -> None:
    history = simulate(3, [0])
    del history.effects[1]
    report = check(history, lease=LEASE)
    assert (report.lost, report.duplicated, report.ghost, report.stale_ack) == (1, 0, 0, 0)
    assert "gone without an effect" in report.details["lost"][0]


def test_a_message_still_queued_is_lost_only_when_the_queue_was_drained() -> None:
    history = simulate(2, [0])
    history.effects.pop()
    history.remaining.add(1)
    assert check(history, lease=LEASE, drained=True).lost == 1
    assert check(history, lease=LEASE, drained=False).lost == 0


def test_two_effects_for_one_key_are_a_duplicate() -> None:
    history = simulate(3, [1])
    first = history.effects[0]
    history.effects.append(Effect(first.key, history.receives[0].token, history.receives[0].at))
    report = check(history, lease=LEASE)
    assert report.duplicated == 1
    assert report.lost == report.ghost == report.stale_ack == 0


def test_delivering_a_rolled_back_send_is_a_ghost() -> None:
    history = simulate(2, [0])
    history.sends.append(Send(99, False))
    history.receives.append(Receive(99, "ghost-token", 200.0, 201.0, 1))
    assert check(history, lease=LEASE).ghost == 1
    # An effect for a key that was never sent at all is a ghost too.
    history = simulate(2, [0])
    history.effects.append(Effect(42, "t", 1.0))
    report = check(history, lease=LEASE)
    assert report.ghost == 1


def test_an_effect_applied_after_its_lease_expired_is_a_stale_ack() -> None:
    history = simulate(2, [0])
    receive = history.receives[0]
    history.effects[0] = Effect(receive.key, receive.token, receive.lease_expiration + 0.5)
    report = check(history, lease=LEASE)
    assert report.stale_ack == 1
    assert "after its lease expired" in report.details["stale_ack"][0]


def test_an_effect_applied_after_another_worker_took_over_is_a_stale_ack() -> None:
    history = simulate(1, [1])  # delivery 1 fails, delivery 2 is processed
    first, second = history.receives
    # The first worker's effect commits (inside its lease, by its own clock) after the second
    # worker already received the message: the checker must flag it.
    history.effects = [Effect(0, first.token, second.at + 0.2)]
    history.receives[0] = Receive(0, first.token, first.at, second.at + 5, 1)
    report = check(history, lease=LEASE)
    assert report.stale_ack == 1
    assert "took it over" in report.details["stale_ack"][0]


def test_an_effect_under_a_token_no_receive_granted_is_stale() -> None:
    history = simulate(1, [0])
    history.effects = [Effect(0, "forged", history.receives[0].at)]
    assert check(history, lease=LEASE).stale_ack == 1


def test_a_renewed_lease_may_be_acked_after_the_first_expiration() -> None:
    history = simulate(1, [0])
    receive = history.receives[0]
    renewed = Renewal(0, receive.token, "renewed", receive.lease_expiration + 10, receive.at + 0.5)
    history.renewals.append(renewed)
    history.effects = [Effect(0, "renewed", receive.lease_expiration + 5)]
    assert check(history, lease=LEASE).clean
    history.effects = [Effect(0, "renewed", renewed.lease_expiration + 1)]
    assert check(history, lease=LEASE).stale_ack == 1


def test_a_redelivery_later_than_lease_plus_backoff_is_late() -> None:
    history = simulate(1, [2])
    on_time = check(history, lease=LEASE, tolerance=0.5)
    assert on_time.late_redeliveries == 0 and on_time.redeliveries_checked == 2
    last = history.receives[-1]
    history.receives[-1] = Receive(0, last.token, last.at + 3.0, last.lease_expiration + 3, 3)
    history.effects[-1] = Effect(0, last.token, last.at + 3.01)
    report = check(history, lease=LEASE, tolerance=0.5)
    assert report.late_redeliveries == 1
    assert report.worst_redelivery_excess > 2.9


def test_an_unrecorded_lease_in_between_extends_the_allowed_delay() -> None:
    history = simulate(1, [2])
    del history.receives[1]  # a worker killed before it wrote the receive down
    assert check(history, lease=LEASE, tolerance=0.5).late_redeliveries == 0


def test_a_torn_journal_line_is_skipped(tmp_path: Path) -> None:
    journal = tmp_path / "w.jsonl"
    journal.write_text('{"ev": "receive", "key": 1}\n{"ev": "ack')
    assert read_journal(journal) == [{"ev": "receive", "key": 1}]


@settings(max_examples=60, deadline=None)
@given(
    keys=st.integers(1, 12),
    failures=st.lists(st.integers(0, 4), min_size=1, max_size=6),
    defect=st.sampled_from(["none", "lose", "duplicate", "ghost", "stale", "late"]),
    pick=st.integers(0, 10_000),
)
def test_every_injected_defect_is_counted(
    keys: int, failures: list[int], defect: str, pick: int
) -> None:
    history = simulate(keys, failures)
    key = pick % keys
    effect = next(e for e in history.effects if e.key == key)
    receives = [r for r in history.receives if r.key == key]
    if defect == "lose":
        history.effects.remove(effect)
    elif defect == "duplicate":
        history.effects.append(Effect(key, effect.token, effect.applied_at))
    elif defect == "ghost":
        history.sends = [s if s.key != key else Send(key, False) for s in history.sends]
    elif defect == "stale":
        last = receives[-1]
        history.effects.remove(effect)
        history.effects.append(Effect(key, last.token, last.lease_expiration + 1.0))
    elif defect == "late":
        # One more failed lease before the last delivery, which then comes 5 s too late.
        last = receives[-1]
        failed = Receive(key, "failed", last.at - 10, last.at - 9, last.delivery_count)
        late_at = failed.lease_expiration + backoff(last.delivery_count) + 5.0
        history.receives.remove(last)
        history.receives += [
            failed,
            Receive(key, last.token, late_at, late_at + LEASE, last.delivery_count + 1),
        ]
        history.effects.remove(effect)
        history.effects.append(Effect(key, last.token, late_at + 0.01))
    report = check(history, lease=LEASE, tolerance=1.0)
    counts = {
        "lose": report.lost,
        "duplicate": report.duplicated,
        "ghost": report.ghost,
        "stale": report.stale_ack,
        "late": report.late_redeliveries,
    }
    if defect == "none":
        assert report.clean, report
    else:
        assert counts[defect] >= 1, (defect, report)
