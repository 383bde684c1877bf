"""A FastAPI shop: an order and its confirmation email commit in one transaction.

    pip install "txqueue[fastapi,dashboard]" uvicorn
    SHOP_DATABASE_URL=sqlite:///shop.db SHOP_DASHBOARD_TOKEN=<a long random token> \\
        uvicorn examples.fastapi_app.app:app
    curl -X POST localhost:8000/orders -H 'content-type: application/json' \\
         -d '{"order_id": "o-1", "email": "ada@example.com"}'

The database opens with the application (``queues.lifespan``); each request's writes go in one
batch (``queues.batch``) that commits before the response is sent; the dashboard is at
/txq/ (log in with the token). ``txqueue worker examples.fastapi_app.app:worker`` sends the
emails.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

import txqueue
from txqueue.contrib.fastapi import Queues

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS Orders (OrderId STRING(36) NOT NULL, Email STRING(MAX) NOT NULL)"
    " PRIMARY KEY (OrderId)",
    "CREATE QUEUE IF NOT EXISTS OrderEmails (OrderId STRING(36) NOT NULL,"
    " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (OrderId)",
]

DATABASE_URL = os.environ.get("SHOP_DATABASE_URL", "sqlite:///shop.db")
queues = Queues(DATABASE_URL, dialect="googlesql")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[Mapping[str, Any]]:
    """txqueue's lifespan, and the schema made at start-up (a real app keeps it in migrations:
    Alembic's op.update_ddl, docs/frameworks.md)."""
    async with queues.lifespan(app) as state:
        await queues.database.update_ddl(SCHEMA)
        yield state


app = FastAPI(lifespan=lifespan)
app.mount("/txq", queues.dashboard(token=os.environ.get("SHOP_DASHBOARD_TOKEN")))


class Order(BaseModel):
    order_id: str
    email: str


@app.post("/orders", status_code=201)
async def create_order(
    order: Order, batch: Annotated[txqueue.AsyncBatch, queues.batch]
) -> dict[str, str]:
    if "@" not in order.email:
        raise HTTPException(400, "email is required")  # nothing is written
    batch.insert("Orders", ("OrderId", "Email"), [(order.order_id, order.email)])
    batch.send("OrderEmails", (order.order_id,), json.dumps({"email": order.email}).encode())
    return {"order_id": order.order_id}


@app.get("/orders/{order_id}")
async def get_order(order_id: str) -> dict[str, str]:
    async with queues.database.snapshot() as snapshot:
        rows = await snapshot.execute_sql(
            "SELECT Email FROM Orders WHERE OrderId = @id", params={"id": order_id}
        )
        found = list(rows)  # type: ignore[arg-type]
    if not found:
        raise HTTPException(404, f"no order {order_id}")
    return {"order_id": order_id, "email": found[0][0]}


worker = txqueue.App(DATABASE_URL)


@worker.handler("OrderEmails")
def send_order_email(message: txqueue.Message) -> None:
    print(f"order email sent to {json.loads(message.payload)['email']}", flush=True)
