"""Deliveries carry the publish's message_uid twice, as Eventarc Advanced does: ``ce-messageuid``
and, with the same value, ``ce-xgooglemessageuid`` (so handlers written for Eventarc Advanced
work unchanged); a replay carries its new message_uid in both. Both engines, a real receiver."""

from __future__ import annotations

from datetime import timedelta

from cloudevents.core.v1.event import CloudEvent
from events_receiver import Receiver, wait_until

import txqueue

SECOND = timedelta(seconds=1)


def test_deliveries_carry_the_message_uid_under_both_names(
    database_url: str, receiver: Receiver
) -> None:
    with txqueue.connect(database_url) as db:
        events = txqueue.Events(db)
        events.create_bus("orders")
        retry = txqueue.RetryPolicy(max_attempts=1)
        events.create_pipeline("notify", receiver.url("/hook"), retry=retry, allow_private=True)
        events.create_enrollment("all", bus="orders", pipeline="notify", cel_match="true")
        receiver.script("/hook", 503, 200)
        uid = events.publish("orders", CloudEvent({"type": "t", "source": "//s", "id": "e-1"}))
        with txqueue.Dispatcher(database_url, attempt_timeout=5 * SECOND):
            [first] = receiver.wait_for("/hook", 1)
            wait_until(lambda: events.undelivered(pipeline="notify"))
            [new_uid] = events.replay(pipeline="notify")
            second = receiver.wait_for("/hook", 2)[1]

    assert first.headers["ce-messageuid"] == first.headers["ce-xgooglemessageuid"] == uid
    assert second.headers["ce-messageuid"] == second.headers["ce-xgooglemessageuid"] == new_uid
    assert new_uid != uid
