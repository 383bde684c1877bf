"""txqueue's worker runtime in the shared peer harness (../shared/bench).

Copy next to the harness's adapters (see README.md here) and register it as
``"txqueue_worker": "adapters.txqueue_worker_adapter:TxQueueWorker"``.

params: engine=sqlite|postgres, concurrency=N (handlers in flight per process, default 16,
        the runtime's own default)
One async handler per message; the runtime receives in batches sized to free places and
coalesces acks (each fenced by its lease token) into one transaction every few ms.
"""

from __future__ import annotations

import asyncio

from .txqueue_adapter import TxQueue


class TxQueueWorker(TxQueue):
    name = "txqueue_worker"
    system = "txqueue (worker runtime)"
    concurrency_kind = "process (1 Worker each)"

    def describe(self):
        info = super().describe()
        info["worker_concurrency"] = int(self.params.get("concurrency", 16))
        return info

    def consume(self, concurrency, on_message, stop):
        asyncio.run(self._aconsume(on_message, stop))

    async def _aconsume(self, on_message, stop):
        import txqueue
        from txqueue.worker.runtime import Worker

        app = txqueue.App(self.url)

        @app.handler("BenchQ")
        async def handle(message):
            on_message(bytes(message.payload))

        worker = Worker(app, concurrency=int(self.params.get("concurrency", 16)))
        task = asyncio.create_task(worker.run())
        while not stop():
            await asyncio.sleep(0.01)
            if task.done():
                task.result()
        worker.stop()
        await asyncio.wait_for(task, timeout=30)
