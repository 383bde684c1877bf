"""A JSON payload is serialised once: the text its check produced is the text stored.

The check (``core.values.check_payload``) has to serialise a JSON payload to know it is JSON
as Spanner stores it and how large its cell is; the driver then stores that text instead of
serialising the value again. A dict subclass counts how often its items are read: once per
serialisation (checking its nesting reads its values, not its items).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import txqueue


class _Counted(dict[str, Any]):
    """A payload that counts its serialisations (json reads a dict subclass's items())."""

    serialised = 0

    def items(self) -> Any:
        type(self).serialised += 1
        return super().items()


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url, dialect="googlesql") as database:
        database.update_ddl(
            [
                "CREATE QUEUE Orders (OrderId STRING(36) NOT NULL, Payload JSON NOT NULL) PRIMARY KEY (OrderId)"
            ]
        )
        yield database


def test_a_json_payload_is_serialised_once(db: txqueue.Database) -> None:
    payload = _Counted({"order": 7, "note": "crème brûlée", "lines": [{"sku": "A", "qty": 2}]})
    _Counted.serialised = 0
    db.run_in_transaction(lambda txn: txn.send("Orders", "o-7", payload))
    assert _Counted.serialised == 1
    [message] = db.receive_now("Orders")
    assert message.payload == dict(payload)


def test_a_batch_of_json_payloads_is_serialised_once_each(db: txqueue.Database) -> None:
    payloads = [_Counted({"order": number, "text": "é" * number}) for number in range(5)]
    _Counted.serialised = 0
    with db.batch() as batch:
        for number, payload in enumerate(payloads):
            batch.send("Orders", f"o-{number}", payload)
    assert _Counted.serialised == len(payloads)
    received = db.receive_now("Orders", max_batch_size=10)
    assert sorted((m.payload for m in received), key=lambda p: p["order"]) == [
        dict(p) for p in payloads
    ]
