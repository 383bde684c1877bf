"""A message's failure history on the Cloud Spanner engine (the emulator), on both faces:
each failed attempt is kept beside the waiting message and moves into its dead letter."""

from __future__ import annotations

from datetime import timedelta
from typing import Any


def _send(db: Any, key: tuple[int, str]) -> None:
    with db.batch() as batch:
        batch.insert_or_update("Users", columns=("UserId", "UserName"), values=[(key[0], "u")])
        batch.send(queue="UserTasks", key=key, payload=b"x")


def charge_card(attempt: int) -> None:
    raise TimeoutError(f"gateway timed out on attempt {attempt}")


def test_each_failed_attempt_is_kept_and_moves_into_the_dead_letter(db: Any) -> None:
    _send(db, (1, "charge"))
    for attempt in (1, 2):
        [message] = db.receive_now("UserTasks")
        assert message.delivery_count == attempt
        try:
            charge_card(attempt)
        except TimeoutError as error:
            if attempt == 1:
                db.release_lease("UserTasks", [message.lease_token], timedelta(0), exception=error)
                [waiting] = db.list_messages("UserTasks")
                [failure] = waiting.failures
                assert (failure.attempt, failure.error_type) == (1, "TimeoutError")
                assert waiting.last_error == repr(error)
            else:
                db.dead_letter(
                    "UserTasks", message.key, message.lease_token, repr(error), exception=error
                )
    [letter] = db.dead_letters("UserTasks")
    assert letter.last_error == "TimeoutError('gateway timed out on attempt 2')"
    assert [(f.attempt, f.error_type, f.message) for f in letter.failures] == [
        (1, "TimeoutError", "gateway timed out on attempt 1"),
        (2, "TimeoutError", "gateway timed out on attempt 2"),
    ]
    assert all("in charge_card" in (f.traceback or "") for f in letter.failures)
    assert letter.failures[-1].failed_at == letter.last_failure
