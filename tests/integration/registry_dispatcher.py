"""A dispatcher process for the registry tests, with a heartbeat of 0.2 s.

    python registry_dispatcher.py DATABASE_URL

It stops gracefully on SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from datetime import timedelta

import txqueue

HEARTBEAT = timedelta(seconds=0.2)


async def main(url: str) -> None:
    database = await txqueue.connect_async(url)
    try:
        dispatcher = txqueue.AsyncDispatcher(database, concurrency=2, heartbeat=HEARTBEAT)
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, dispatcher.stop)
        await dispatcher.run()
    finally:
        await database.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
