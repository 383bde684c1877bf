"""FastAPI and Starlette: the asyncio database opened for the app's life, a batch per request,
the dashboard mounted under a path.

    from typing import Annotated
    from fastapi import FastAPI
    import txqueue
    from txqueue.contrib.fastapi import Queues

    queues = Queues("postgresql://app@db/shop")
    app = FastAPI(lifespan=queues.lifespan)              # opens and closes the database
    app.mount("/txq", queues.dashboard(token="a-long-random-token"))

    @app.post("/orders", status_code=201)
    async def create_order(batch: Annotated[txqueue.AsyncBatch, queues.batch]) -> None:
        batch.insert("Orders", ("OrderId", "Email"), [("o-1", "ada@example.com")])
        batch.send("OrderEmails", ("o-1",), b"...")      # commits with the order

``queues.batch`` commits when the endpoint returns, before the response is sent: a client
that gets its 2xx knows the writes are committed; an endpoint that raises writes nothing.
``lifespan`` and ``dashboard`` work in plain Starlette too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

try:
    import anyio.to_thread
    from starlette.responses import PlainTextResponse
    from starlette.types import ASGIApp, Receive, Scope, Send
except ImportError as missing:  # pragma: no cover - exercised in a subprocess
    raise ImportError(f"{missing}: pip install 'txqueue[fastapi]'") from missing

import txqueue
from txqueue.errors import FailedPrecondition

__all__ = ["Queues"]


class Queues:
    """One application's txqueue: its database URL, and what is open while the app runs."""

    def __init__(self, database: str, *, dialect: str | None = None) -> None:
        self.url = database
        self.dialect = dialect
        self._database: txqueue.AsyncDatabase | None = None
        self._dashboard_options: dict[str, Any] | None = None
        self._dashboard_database: txqueue.Database | None = None
        self._dashboard_app: ASGIApp | None = None
        self._batch: Any = None

    @property
    def database(self) -> txqueue.AsyncDatabase:
        """The open asyncio database; ``FailedPrecondition`` outside the app's lifespan."""
        if self._database is None:
            raise FailedPrecondition(
                "the txqueue database is open only while the application runs: pass "
                "lifespan=queues.lifespan to FastAPI(...) or Starlette(...)"
            )
        return self._database

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[Mapping[str, Any]]:
        """Open the database at start-up (and the dashboard's, when one is mounted); close
        them at shutdown. The state carries it as ``request.state.txqueue``."""
        self._database = await txqueue.connect_async(self.url, dialect=self.dialect)
        try:
            if self._dashboard_options is not None:
                await self._open_dashboard(self._dashboard_options)
            yield {"txqueue": self._database}
        finally:
            opened, self._database = self._database, None
            dashboard, self._dashboard_database = self._dashboard_database, None
            self._dashboard_app = None
            try:
                if dashboard is not None:
                    await anyio.to_thread.run_sync(dashboard.close)
            finally:
                await opened.close()

    def dashboard(self, *, token: str | None = None, **options: Any) -> ASGIApp:
        """The dashboard as an ASGI app to mount (``app.mount("/txq", ...)``): it takes its
        base path from the mount point. ``token`` and ``options`` go to
        ``txqueue.web.create_app``; the app is built at start-up, on a sync database of its
        own (the dashboard uses the sync face)."""
        self._dashboard_options = {"token": token, **options}
        return self._serve_dashboard

    async def _open_dashboard(self, options: dict[str, Any]) -> None:
        from txqueue.web import create_app

        def open_sync() -> txqueue.Database:
            return txqueue.connect(self.url, dialect=self.dialect)

        self._dashboard_database = await anyio.to_thread.run_sync(open_sync)
        self._dashboard_app = create_app(self._dashboard_database, **options)

    async def _serve_dashboard(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._dashboard_app
        if app is None:
            if scope["type"] != "http":
                return
            response = PlainTextResponse(
                "the dashboard runs only while the application's lifespan does "
                "(lifespan=queues.lifespan)",
                status_code=503,
            )
            await response(scope, receive, send)
            return
        await app(scope, receive, send)

    @property
    def batch(self) -> Any:
        """The dependency ``Annotated[txqueue.AsyncBatch, queues.batch]``: a batch that commits
        when the endpoint returns, before the response goes out, and is dropped if it raises."""
        if self._batch is None:
            from fastapi import Depends

            self._batch = Depends(self._open_batch, scope="function")
        return self._batch

    async def _open_batch(self) -> AsyncIterator[txqueue.AsyncBatch]:
        async with self.database.batch() as batch:
            yield batch
