"""The asyncio face: AsyncEvents (generated twin of Events) and AsyncDispatcher in one event loop."""

from __future__ import annotations

import asyncio
import gc
from datetime import timedelta

import pytest
from events_receiver import Receiver

import txqueue


async def test_async_publish_in_a_transaction_and_deliver(
    database_url: str, receiver: Receiver
) -> None:
    adb = await txqueue.connect_async(database_url)
    try:
        events = txqueue.AsyncEvents(adb)
        await events.create_bus("orders")
        await events.create_pipeline("notify", receiver.url("/async"), allow_private=True)
        await events.create_enrollment("all", bus="orders", pipeline="notify", cel_match="true")
        assert [b.name for b in await events.list_buses()] == ["orders"]

        async def checkout(txn: txqueue.AsyncTransaction, order_id: str, fail: bool) -> str:
            event = {"type": "com.shop.order.paid", "source": "//shop", "id": order_id}
            uid = await events.publish("orders", event, txn=txn)
            if fail:
                raise RuntimeError("declined")
            return uid

        with pytest.raises(RuntimeError):
            await adb.run_in_transaction(checkout, "order-1", True)
        uid = await adb.run_in_transaction(checkout, "order-2", False)

        dispatcher = txqueue.AsyncDispatcher(adb, attempt_timeout=timedelta(seconds=5))
        assert gc.get_freeze_count() == 0
        running = asyncio.create_task(dispatcher.run())
        try:
            [request] = await asyncio.to_thread(receiver.wait_for, "/async", 1)
            # In the main thread the dispatcher owns the process: its start-up heap is frozen.
            assert gc.get_freeze_count() > 0
        finally:
            dispatcher.stop()
            await running
        assert gc.get_freeze_count() == 0  # unfrozen when it stopped
        assert request.headers["ce-id"] == "order-2"
        assert request.headers["ce-messageuid"] == uid
        assert [m.message_uid for m in await events.messages()] == [uid]
        assert [r.state for r in await events.attempts(uid)] == ["delivered"]
        assert dispatcher.stats.delivered == 1
    finally:
        await adb.close()
